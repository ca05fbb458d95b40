//! Connection options and the pool.
//!
//! N.B. Connect directly to Postgres or through a pooler in session mode. LISTEN needs a session,
//! migrations take a session advisory lock, and sqlx's prepared statements return wrong results
//! behind PgBouncer in transaction mode older than 1.21 (or without `max_prepared_statements`).

use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};

use crate::Result;

/// Pool size used when none is configured.
pub const POOL_SIZE_DEFAULT: u32 = 10;
/// Statement timeout used when none is configured: long enough for a retention batch, short enough
/// that a stuck statement does not hold a connection for ever.
pub const STATEMENT_TIMEOUT_DEFAULT: Duration = Duration::from_secs(30);
/// How long `acquire` waits for a free connection before failing.
pub const ACQUIRE_TIMEOUT_DEFAULT: Duration = Duration::from_secs(10);

/// How a process connects to Postgres.
#[derive(Debug, Clone)]
pub struct DbConfig {
    /// A `postgres://` URL. Its password is never logged: `PgConnectOptions` redacts it.
    pub url: String,
    pub pool_size: u32,
    /// Applied to every connection with `SET statement_timeout`; zero disables it.
    pub statement_timeout: Duration,
    /// Shown in `pg_stat_activity`, e.g. `mostrador-api`.
    pub application_name: String,
}

impl DbConfig {
    pub fn new(url: impl Into<String>, application_name: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            pool_size: POOL_SIZE_DEFAULT,
            statement_timeout: STATEMENT_TIMEOUT_DEFAULT,
            application_name: application_name.into(),
        }
    }

    /// Parses the URL and applies the application name and statement timeout.
    ///
    /// # Errors
    ///
    /// A malformed URL.
    pub fn connect_options(&self) -> Result<PgConnectOptions> {
        let timeout_ms = self.statement_timeout.as_millis().to_string();
        let options = self
            .url
            .parse::<PgConnectOptions>()?
            .application_name(&self.application_name)
            .options([
                ("statement_timeout", timeout_ms.as_str()),
                // N.B. The queue's statements are written so that their generic plan is the
                // right one (primary-key lookups, the claim index, `offset 0` fences), and
                // re-planning them on every execution costs 0.5 to 1 ms on these machines:
                // about 15 % of claim-complete throughput.
                ("plan_cache_mode", "force_generic_plan"),
                // N.B. Every statement here is a short one. A plan whose estimate passes
                // `jit_above_cost` is a bad estimate (a table not yet analyzed), and compiling it
                // costs hundreds of milliseconds: more than any of them takes to run.
                ("jit", "off"),
            ]);
        Ok(options)
    }

    /// Opens a pool. Connections are made lazily, so this fails only on a malformed URL; the first
    /// query (usually [`crate::schema::check_schema`]) tells whether the database answers.
    ///
    /// # Errors
    ///
    /// A malformed URL.
    pub fn connect_lazy(&self) -> Result<PgPool> {
        let pool = PgPoolOptions::new()
            .max_connections(self.pool_size)
            .acquire_timeout(ACQUIRE_TIMEOUT_DEFAULT)
            .connect_lazy_with(self.connect_options()?);
        Ok(pool)
    }
}

/// A pool of one connection for [`crate::claim`], with `pool`'s options, whose plans sort nothing
/// an index can give in order: the claim walks `runs_claim_idx` in queue order and stops at its
/// limit, whatever the table's statistics say.
///
/// N.B. On a `runs` table never analyzed (a new deployment's first minute, or one autovacuum has
/// not reached yet), the planner takes `runs_claim_idx`'s row count from the index's creation on
/// the empty table, expects a handful of pending runs, and bitmap-scans and sorts all of them on
/// every claim: 8 to 12 ms a claim with 5,000 pending. The claim's last `order by` (a few rows)
/// still sorts, its cost now inflated past `jit_above_cost`: hence `jit = off` here too, whatever
/// `pool` says.
pub fn claimer(pool: &PgPool) -> PgPool {
    let options = (*pool.connect_options())
        .clone()
        .options([("enable_sort", "off"), ("jit", "off")]);
    PgPoolOptions::new()
        .max_connections(1)
        .acquire_timeout(ACQUIRE_TIMEOUT_DEFAULT)
        .connect_lazy_with(options)
}
