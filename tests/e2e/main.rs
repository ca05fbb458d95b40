mod api;
mod retail;
mod soak;
mod support;
mod token;
mod worker;
