mod api;
mod model;
mod retail;
mod soak;
mod support;
mod token;
mod worker;
