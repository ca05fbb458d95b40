mod auth;
