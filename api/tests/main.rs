mod auth;
mod http;
mod runs;
mod support;
mod threads;
