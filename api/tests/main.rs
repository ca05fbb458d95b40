mod auth;
mod http;
mod runs;
mod state;
mod stream;
mod support;
mod threads;
