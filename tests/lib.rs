//! End-to-end tests that start real api and worker processes against Postgres.
//!
//! They arrive with the api and worker issues. The queue's own guarantees are proved by the
//! database tests in `queue/tests/`.
