//! Connection options and the pool.
//!
//! N.B. Connect directly to Postgres or through a pooler in session mode. LISTEN needs a session,
//! migrations take a session advisory lock, and sqlx's prepared statements return wrong results
//! behind PgBouncer in transaction mode older than 1.21 (or without `max_prepared_statements`).
//! Every connection's settings are set by a statement once it is connected ([`SETTINGS`]), never in
//! the startup packet, which PgBouncer refuses.
//!
//! N.B. Every connection keeps the generic plan its first execution of a statement made, and a
//! new deployment's connections make theirs on tables of a few rows, never analyzed. A statement
//! that finds a run or a thread by id therefore checks what the row must be (`running`, not
//! deleted) on what it read or locked, not in the scan beside the id: there, `status = 'running'`
//! or `deleted_at is null` lets the plan walk a partial index with that predicate whole
//! (`runs_one_running_per_thread`, whose dead entries stay until a vacuum;
//! `threads_retention_idx`, every live thread) instead of the primary key. The test
//! `a_runs_statements_read_no_more_pages_with_thousands_of_runs_behind_them` holds a run's
//! statements to it.

use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool, PgPoolOptions};
use sqlx::{Connection, Postgres};

use crate::Result;

/// Pool size used when none is configured.
pub const POOL_SIZE_DEFAULT: u32 = 10;
/// Statement timeout used when none is configured: long enough for a retention batch, short enough
/// that a stuck statement does not hold a connection for ever.
pub const STATEMENT_TIMEOUT_DEFAULT: Duration = Duration::from_secs(30);
/// How long `acquire` waits for a free connection before failing.
pub const ACQUIRE_TIMEOUT_DEFAULT: Duration = Duration::from_secs(10);
/// A pooled connection idle for longer is pinged before it is handed out; one used more recently
/// is not (see [`pool_options`]).
const PING_IDLE_AFTER: Duration = Duration::from_millis(500);

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

    /// Parses the URL and applies the application name.
    ///
    /// # Errors
    ///
    /// A malformed URL.
    pub fn connect_options(&self) -> Result<PgConnectOptions> {
        Ok(self
            .url
            .parse::<PgConnectOptions>()?
            .application_name(&self.application_name))
    }

    /// Opens a pool whose every connection runs with [`SETTINGS`] and the statement timeout.
    /// Connections are made lazily, so this fails only on a malformed URL; the first query
    /// (usually [`crate::schema::check_schema`]) tells whether the database answers.
    ///
    /// # Errors
    ///
    /// A malformed URL.
    pub fn connect_lazy(&self) -> Result<PgPool> {
        let timeout = format!("{}ms", self.statement_timeout.as_millis());
        let settings: Vec<(&str, String)> = std::iter::once(("statement_timeout", timeout))
            .chain(
                SETTINGS
                    .iter()
                    .map(|(name, value)| (*name, (*value).to_owned())),
            )
            .collect();
        let pool = pool_options(settings)
            .max_connections(self.pool_size)
            .connect_lazy_with(self.connect_options()?);
        Ok(pool)
    }
}

/// What every connection sets once connected, beside the statement timeout.
///
/// N.B. Set by a statement, not in the startup packet's `options`: PgBouncer refuses a connection
/// whose startup packet sets a parameter it does not track (1.18, Debian's, every one; later ones
/// all but a few), and one told to ignore `options` would drop them silently.
pub const SETTINGS: &[(&str, &str)] = &[
    // N.B. The queue's statements are written so that their generic plan is the right one
    // (primary-key lookups, the claim index, `offset 0` fences), and re-planning them on every
    // execution costs 0.5 to 1 ms on these machines: about 15 % of claim-complete throughput.
    ("plan_cache_mode", "force_generic_plan"),
    // N.B. Every statement here is a short one. A plan whose estimate passes `jit_above_cost` is
    // a bad estimate (a table not yet analyzed), and compiling it costs hundreds of milliseconds:
    // more than any of them takes to run.
    ("jit", "off"),
];

/// A pool of one connection made as `pool`'s are, with `pool`'s statement timeout and
/// [`SETTINGS`], and `more` settings of its own.
fn one_connection_like(pool: &PgPool, more: &'static [(&'static str, &'static str)]) -> PgPool {
    let like = pool.clone();
    let options = (*pool.connect_options()).clone();
    PgPoolOptions::new()
        .max_connections(1)
        .acquire_timeout(ACQUIRE_TIMEOUT_DEFAULT)
        .test_before_acquire(false)
        .before_acquire(ping_when_idle)
        .after_connect(move |connection, _| {
            let like = like.clone();
            Box::pin(async move {
                // `pool` made its connections with the timeout its configuration says.
                let timeout: String =
                    sqlx::query_scalar("select current_setting('statement_timeout')")
                        .fetch_one(&like)
                        .await?;
                let settings = std::iter::once(("statement_timeout", timeout)).chain(
                    SETTINGS
                        .iter()
                        .chain(more)
                        .map(|(name, value)| (*name, (*value).to_owned())),
                );
                apply(connection, settings).await
            })
        })
        .connect_lazy_with(options)
}

/// Sets `settings` on a new connection, in one round trip.
async fn apply(
    connection: &mut PgConnection,
    settings: impl Iterator<Item = (&str, String)>,
) -> std::result::Result<(), sqlx::Error> {
    let (names, values): (Vec<&str>, Vec<String>) = settings.unzip();
    sqlx::query("select set_config(name, value, false) from unnest($1::text[], $2::text[]) as s(name, value)")
        .bind(&names)
        .bind(&values)
        .execute(connection)
        .await?;
    Ok(())
}

/// A pool of one connection for [`crate::claim`], with `pool`'s options, whose plans sort nothing
/// an index can give in order and scan no table whole: the claim walks `runs_claim_idx` in queue
/// order and stops at its limit, and finds the runs it takes and their threads' checkpoints by
/// index, whatever the tables' statistics say.
///
/// N.B. On a `runs` table never analyzed (a new deployment's first minute, or one autovacuum has
/// not reached yet), the planner takes `runs_claim_idx`'s row count from the index's creation on
/// the empty table, expects a handful of pending runs, and bitmap-scans and sorts all of them on
/// every claim: 8 to 12 ms a claim with 5,000 pending. The claim's last `order by` (a few rows)
/// still sorts, its cost now inflated past `jit_above_cost`: hence `jit = off` here too, whatever
/// `pool` says. Its generic plan, made once per connection, lives until the next `analyze` of its
/// tables: one made while `runs` was small scanned all of it to update the claimed runs (1.8 ms a
/// claim at 165 rows in a new deployment's first seconds), hence `enable_seqscan = off`.
pub fn claimer(pool: &PgPool) -> PgPool {
    one_connection_like(pool, &[("enable_sort", "off"), ("enable_seqscan", "off")])
}

/// A pool of one connection for a worker's publisher ([`crate::run::ending::write`]), with `pool`'s
/// options, whose plans scan no table whole: its statement finds the runs it writes and their
/// threads by primary key, whatever the tables' statistics said when its generic plan was made
/// (one made while `runs` and `threads` were small scans both whole on every write, as the
/// claimer's did; see [`claimer`]).
pub fn publisher(pool: &PgPool) -> PgPool {
    one_connection_like(pool, &[("enable_seqscan", "off")])
}

/// How every pool here hands out its connections: a connection is pinged before use only when it
/// has been idle for [`PING_IDLE_AFTER`].
///
/// N.B. sqlx's default pings a connection on every acquire, and the pool pings it again on every
/// release: a statement run on the pool cost three round trips instead of one (the engine's
/// checkpoint writes ran 35 % faster without the first ping, `bench/RESULTS.md`). The release's
/// ping cannot be turned off, and it is what makes the acquire's redundant for a connection
/// released moments ago: the same reasoning as HikariCP's 500 ms `aliveBypassWindowMs`. A
/// connection that dies within the window fails its next statement with an I/O error, as one in
/// use when the database goes away does, and is closed when it is released.
fn pool_options(settings: Vec<(&'static str, String)>) -> PgPoolOptions {
    PgPoolOptions::new()
        .acquire_timeout(ACQUIRE_TIMEOUT_DEFAULT)
        .test_before_acquire(false)
        .before_acquire(ping_when_idle)
        .after_connect(move |connection, _| {
            let settings = settings.clone();
            Box::pin(async move { apply(connection, settings.into_iter()).await })
        })
}

fn ping_when_idle(
    connection: &mut PgConnection,
    meta: sqlx::pool::PoolConnectionMetadata,
) -> std::pin::Pin<Box<dyn Future<Output = std::result::Result<bool, sqlx::Error>> + Send + '_>> {
    Box::pin(async move {
        if meta.idle_for >= PING_IDLE_AFTER {
            connection.ping().await?;
        }
        Ok(true)
    })
}

/// Where a sequence of statements gets its connections: from the pool for each statement, or
/// ([`Connections::kept`]: a claimed run's checkpoint writes and reads, a worker's claims, its
/// publisher's transactions) one connection kept from one statement to the next for at most
/// [`PING_IDLE_AFTER`], so that statements that follow each other closely cost one round trip
/// each: a connection given back to the pool is pinged on its way in, a second round trip per
/// statement.
///
/// Taking the kept connection while it is taken (concurrent tasks of one superstep) takes another
/// from the pool; a statement that failed gives its connection back to the pool, which closes it
/// if it is broken.
///
/// N.B. The connection is out of the pool while it is kept, so it is kept only for a moment: a run
/// whose next statement comes later (its node calls a model) gives it back, and a pool smaller
/// than the runs in flight makes statements wait at most that moment, never for ever.
#[derive(Debug)]
pub struct Connections {
    pool: PgPool,
    /// `None` when nothing is kept.
    kept: Option<Arc<Mutex<Slot>>>,
}

/// Where the kept connection waits for the next statement.
#[derive(Debug, Default)]
struct Slot {
    /// The connection, and since when it waits.
    kept: Option<(PoolConnection<Postgres>, Instant)>,
    /// A task gives it back to the pool once it has waited [`PING_IDLE_AFTER`]: one at a time,
    /// so a statement does not cost a task of its own.
    timer: bool,
}

impl Connections {
    /// A connection from the pool for each statement.
    pub fn pooled(pool: PgPool) -> Self {
        Self { pool, kept: None }
    }

    /// One connection kept from one statement to the next.
    pub fn kept(pool: PgPool) -> Self {
        Self {
            pool,
            kept: Some(Arc::default()),
        }
    }

    /// Gives the kept connection back and closes the pool.
    pub async fn close(self) {
        drop(self.kept);
        self.pool.close().await;
    }

    /// The kept connection, or one from the pool; [`Taken::done`] after its statement succeeded.
    ///
    /// # Errors
    ///
    /// The pool gave no connection.
    pub async fn take(&self) -> Result<Taken<'_>> {
        let kept = self
            .kept
            .as_ref()
            .and_then(|slot| slot.lock().expect("never poisoned").kept.take())
            .filter(|(_, since)| since.elapsed() < PING_IDLE_AFTER);
        let connection = match kept {
            Some((connection, _)) => connection,
            None => self.pool.acquire().await?,
        };
        Ok(Taken {
            from: self,
            connection,
        })
    }
}

/// A connection taken from [`Connections`]: dropped, it goes back to the pool.
#[derive(Debug)]
pub struct Taken<'a> {
    from: &'a Connections,
    connection: PoolConnection<Postgres>,
}

impl Taken<'_> {
    /// Its statement succeeded: the connection is kept for the next, unless another is kept
    /// already or nothing is, and given back to the pool if no statement takes it in time.
    pub fn done(self) {
        let Some(slot) = &self.from.kept else {
            return;
        };
        let since = Instant::now();
        {
            let mut slot = slot.lock().expect("never poisoned");
            if slot.kept.is_some() {
                return;
            }
            slot.kept = Some((self.connection, since));
            if std::mem::replace(&mut slot.timer, true) {
                return;
            }
        }
        tokio::spawn(give_back(Arc::downgrade(slot), since + PING_IDLE_AFTER));
    }
}

/// Gives the kept connection back to the pool once it has waited [`PING_IDLE_AFTER`], sleeping
/// again while the one kept is younger; ends when nothing is kept.
async fn give_back(slot: Weak<Mutex<Slot>>, mut due: Instant) {
    loop {
        tokio::time::sleep_until(due.into()).await;
        let Some(strong) = slot.upgrade() else {
            return;
        };
        let mut guard = strong.lock().expect("never poisoned");
        match &guard.kept {
            Some((_, since)) if since.elapsed() < PING_IDLE_AFTER => due = *since + PING_IDLE_AFTER,
            _ => {
                guard.kept = None;
                guard.timer = false;
                return;
            }
        }
    }
}

impl std::ops::Deref for Taken<'_> {
    type Target = PgConnection;

    fn deref(&self) -> &PgConnection {
        &self.connection
    }
}

impl std::ops::DerefMut for Taken<'_> {
    fn deref_mut(&mut self) -> &mut PgConnection {
        &mut self.connection
    }
}
