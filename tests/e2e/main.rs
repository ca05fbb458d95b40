mod api;
mod soak;
mod support;
mod token;
mod worker;
