//! The worker against a real Postgres, a database per test: one claimed run executed end to end,
//! the publisher of its events, and the supervisor in process.

mod conformance;
mod execute;
mod publish;
mod sandbox;
mod supervisor;
mod support;
