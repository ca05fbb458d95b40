mod auth;
mod http;
mod matrix;
mod runs;
mod state;
mod stream;
mod support;
mod threads;
