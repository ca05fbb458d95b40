//! What the product keeps beside runs and their threads' state: assistants, the Store, API keys,
//! webhooks, crons, retention policies, tools' effects and the graphs workers describe.

pub mod api_keys;
pub mod assistants;
pub mod cron;
pub mod effects;
pub mod graphs;
pub mod retention;
pub mod store;
pub mod webhooks;
