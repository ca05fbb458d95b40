mod auth;
mod http;
mod support;
mod threads;
