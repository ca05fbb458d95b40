mod soak;
mod support;
mod worker;
