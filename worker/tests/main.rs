//! The worker against a real Postgres, a database per test: one claimed run executed end to end,
//! and the supervisor in process.

mod execute;
mod supervisor;
mod support;
