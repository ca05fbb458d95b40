//! The retail app: a chain of stores' graphs, served by the `mostrador` binary as an example of
//! an app (the platform knows nothing of it).
//!
//! * [`retail`]: the `retail` schema's statements, and the demo data. Tools with external
//!   effects (the refund) run once per idempotency key through `mostrador_queue::data::effects`.
//! * [`graphs`]: `tienda`, `cliente`, `compras` and `fichas`.
//! * [`approvals`]: the managers' approval queue, a route the binary registers with the api.
//! * [`offline`]: what the built-in offline model answers the graphs' questions.
//! * [`MIGRATOR`]: the `retail` schema's migrations.
//! * [`APP`]: all of it, as the `mostrador` binary serves it.

pub mod approvals;
pub mod graphs;
pub mod offline;
pub mod retail;

/// The retail app's migrations (`apps/retail/migrations/`: its `retail` schema), run after the
/// platform's by `mostrador migrate`. Their versions (4, 13) are those they had when they were
/// the platform's, so databases migrated then need nothing; new ones take versions the platform
/// will not use (from 100000).
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate::Migrator {
    ignore_missing: true,
    ..sqlx::migrate!("./migrations")
};

/// The schema the retail app's tables live in, which the runtime role is granted.
pub const SCHEMA: &str = "retail";

/// The retail app's four graphs, their policy, routes, tables, demo data and offline answers.
pub const APP: mostrador::App = mostrador::App {
    build: graphs::all,
    policy: Some(graphs::POLICY),
    routes: &[approvals::ROUTES],
    migrations: &[&MIGRATOR],
    schemas: &[SCHEMA],
    demo_data: Some(|pool| Box::pin(retail::load_demo_data(pool))),
    offline: offline::answer,
    example: true,
};
