//! Database tests of the queue's guarantees. Each test gets a database of its own, migrated with
//! the binary's `MIGRATOR`, which also isolates its notifications.

mod api_keys;
mod cancel;
mod checkpoint;
mod claim;
mod connections;
mod cron;
mod effects;
mod enqueue;
mod events;
mod files;
mod history;
mod lifecycle;
mod retention;
mod saver;
mod schema;
mod store;
mod support;
