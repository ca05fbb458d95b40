mod auth;
mod http;
