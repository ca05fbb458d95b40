mod api;
mod model;
mod retail;
mod schedule;
mod soak;
mod support;
mod token;
mod worker;
