mod auth;
mod http;
mod runs;
mod stream;
mod support;
mod threads;
