//! The one LISTEN connection of a process, fanned out to in-process subscribers.
//!
//! NOTIFY is a wake-up hint, never the truth: notifications sent while the connection is down are
//! lost. So after every reconnect the listener tells every subscriber to re-read what it follows
//! from the tables ([`Queued::Reconnected`], [`Control::Reconnected`], [`RunSignal::Reread`]), and
//! it signals that only once LISTEN is active again, so a re-read then misses nothing.
//!
//! Any error of the connection ends it, including `ConnectionReset` and the `FATAL` of
//! `pg_terminate_backend`, which sqlx's own listener returns as errors rather than reconnecting.
//! The listener then reconnects with exponential backoff until it succeeds or shuts down.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};
use serde::Deserialize;
use serde_json::Value;
use sqlx::PgPool;
use sqlx::postgres::PgListener;
use tokio::sync::broadcast;
use tokio::task::JoinHandle;
use uuid::Uuid;

use crate::Result;
use crate::run::event::RunEvent;
use crate::run::lease::WorkerId;
use crate::run::{CancelAction, RunId};

/// Runs were queued (or released) for the graph named in the payload.
pub const RUNS_CHANNEL: &str = "mostrador_runs";
/// A running run was asked to cancel; the payload names the run, the action and the holder.
pub const CONTROL_CHANNEL: &str = "mostrador_run_control";
/// An event was appended to a run's log (the `run_events` trigger sends these).
pub const EVENTS_CHANNEL: &str = "mostrador_run_events";

/// Wake-ups buffered per queue or control subscriber; a subscriber that lags behind is told to
/// re-read rather than given stale wake-ups.
const BROADCAST_CAPACITY: usize = 1024;
/// What the api listens to: runs' events, queue wake-ups (a thread's stream waits for its next
/// run) and cancels.
const EVERY_CHANNEL: &[&str] = &[RUNS_CHANNEL, CONTROL_CHANNEL, EVENTS_CHANNEL];
/// What a worker listens to. It follows no run's events; listening to them, it would be sent
/// every event of every run in the database, and parse each.
const WORKER_CHANNELS: &[&str] = &[RUNS_CHANNEL, CONTROL_CHANNEL];
/// Live events buffered per followed run before its subscribers are told to re-read the log.
const RUN_CAPACITY: usize = 256;
const RECONNECT_MIN_DELAY: Duration = Duration::from_millis(50);
const RECONNECT_MAX_DELAY: Duration = Duration::from_secs(5);

/// A wake-up for claimers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Queued {
    /// Runs of this graph may be claimable.
    Graph(String),
    /// Wake-ups may have been lost: claim as if every graph had work.
    Reconnected,
}

/// A signal for the workers holding runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Control {
    Cancel {
        run_id: RunId,
        action: CancelAction,
        holder: Option<WorkerId>,
    },
    /// Cancels may have been lost: re-read `cancel_action` of the held runs (a heartbeat does).
    Reconnected,
}

/// What a run's subscriber receives.
#[derive(Debug, Clone, PartialEq)]
pub enum RunSignal {
    Event(RunEvent),
    /// Something may have been missed: re-read the log after the last `seq` seen.
    Reread,
}

/// A handle on the process's listener. Clones share the connection.
#[derive(Debug, Clone)]
pub struct Listener {
    shared: Arc<Shared>,
}

/// A subscription to one run's events. Dropping the last one for a run stops the fan-out to it.
#[derive(Debug)]
pub struct RunSubscription {
    run_id: RunId,
    receiver: broadcast::Receiver<RunSignal>,
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    queued: broadcast::Sender<Queued>,
    control: broadcast::Sender<Control>,
    runs: Mutex<HashMap<RunId, broadcast::Sender<RunSignal>>>,
    backend_pid: AtomicI32,
    task: Mutex<Option<JoinHandle<()>>>,
    channels: &'static [&'static str],
}

impl Listener {
    /// Connects, LISTENs on every channel, and keeps doing so in a task until `shutdown`
    /// resolves. Returns once the first LISTEN is active, so a caller that subscribes next misses
    /// nothing sent after this returns.
    ///
    /// # Errors
    ///
    /// The first connection failed (later failures are retried for ever).
    pub async fn start(
        pool: PgPool,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<Listener> {
        Self::start_on(pool, EVERY_CHANNEL, shutdown).await
    }

    /// A worker's listener, as [`Listener::start`] but for queue wake-ups and cancels only: it
    /// cannot follow a run's events ([`Listener::subscribe_run`] panics).
    ///
    /// # Errors
    ///
    /// The first connection failed (later failures are retried for ever).
    pub async fn start_for_worker(
        pool: PgPool,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<Listener> {
        Self::start_on(pool, WORKER_CHANNELS, shutdown).await
    }

    async fn start_on(
        pool: PgPool,
        channels: &'static [&'static str],
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<Listener> {
        let shared = Arc::new(Shared {
            queued: broadcast::channel(BROADCAST_CAPACITY).0,
            control: broadcast::channel(BROADCAST_CAPACITY).0,
            runs: Mutex::new(HashMap::new()),
            backend_pid: AtomicI32::new(0),
            task: Mutex::new(None),
            channels,
        });
        let connection = connect(&pool, &shared).await?;
        let task = tokio::spawn(listen(Arc::clone(&shared), pool, connection, shutdown));
        *shared
            .task
            .lock()
            .expect("listener task lock is never poisoned") = Some(task);
        Ok(Listener { shared })
    }

    /// Wake-ups for claimers.
    pub fn queued(&self) -> broadcast::Receiver<Queued> {
        self.shared.queued.subscribe()
    }

    /// Cancel signals for workers.
    pub fn control(&self) -> broadcast::Receiver<Control> {
        self.shared.control.subscribe()
    }

    /// Live events of one run. Prefer [`crate::run::event::EventFollower`], which adds the replay and
    /// the de-duplication that make the stream exact.
    ///
    /// # Panics
    ///
    /// On a worker's listener ([`Listener::start_for_worker`]), which hears no run's events.
    pub fn subscribe_run(&self, run_id: RunId) -> RunSubscription {
        assert!(
            self.shared.channels.contains(&EVENTS_CHANNEL),
            "a worker's listener hears no run's events"
        );
        let mut runs = self
            .shared
            .runs
            .lock()
            .expect("run subscriptions lock is never poisoned");
        let sender = runs
            .entry(run_id)
            .or_insert_with(|| broadcast::channel(RUN_CAPACITY).0);
        RunSubscription {
            run_id,
            receiver: sender.subscribe(),
            shared: Arc::clone(&self.shared),
        }
    }

    /// The Postgres backend pid of the current LISTEN connection (for diagnostics and tests).
    pub fn backend_pid(&self) -> i32 {
        self.shared.backend_pid.load(Ordering::Relaxed)
    }

    /// Waits for the listening task to end, after the `shutdown` given to [`Listener::start`].
    pub async fn join(&self) {
        let task = self
            .shared
            .task
            .lock()
            .expect("listener task lock is never poisoned")
            .take();
        if let Some(task) = task {
            // A panic in the task has already been reported by the runtime; nothing to add.
            let _ = task.await;
        }
    }
}

impl RunSubscription {
    pub fn run_id(&self) -> RunId {
        self.run_id
    }

    /// The next signal; `None` once the listener has shut down. A subscriber that fell behind gets
    /// [`RunSignal::Reread`] instead of the events it missed.
    pub async fn recv(&mut self) -> Option<RunSignal> {
        match self.receiver.recv().await {
            Ok(signal) => Some(signal),
            Err(broadcast::error::RecvError::Lagged(_)) => Some(RunSignal::Reread),
            Err(broadcast::error::RecvError::Closed) => None,
        }
    }
}

impl Drop for RunSubscription {
    fn drop(&mut self) {
        let mut runs = self
            .shared
            .runs
            .lock()
            .expect("run subscriptions lock is never poisoned");
        // This subscription's receiver still counts until the end of `drop`.
        if runs
            .get(&self.run_id)
            .is_some_and(|sender| sender.receiver_count() <= 1)
        {
            runs.remove(&self.run_id);
        }
    }
}

/// The notification payload on [`EVENTS_CHANNEL`]: the whole event, or a marker without `event`
/// when it did not fit (or without `seq` when the run was deleted).
#[derive(Deserialize)]
struct EventNotice {
    run_id: Uuid,
    seq: Option<i64>,
    event: Option<String>,
    #[serde(default)]
    data: Value,
}

#[derive(Deserialize)]
struct ControlNotice {
    run_id: Uuid,
    action: CancelAction,
    worker: Option<Uuid>,
}

impl Shared {
    fn dispatch(&self, channel: &str, payload: &str) {
        // Send errors mean nobody is subscribed right now, which is fine for a hint.
        match channel {
            RUNS_CHANNEL => {
                let _ = self.queued.send(Queued::Graph(payload.to_owned()));
            }
            CONTROL_CHANNEL => match serde_json::from_str::<ControlNotice>(payload) {
                Ok(notice) => {
                    let _ = self.control.send(Control::Cancel {
                        run_id: RunId(notice.run_id),
                        action: notice.action,
                        holder: notice.worker.map(WorkerId),
                    });
                }
                Err(err) => tracing::warn!(error = %err, payload, "malformed control notification"),
            },
            EVENTS_CHANNEL => match serde_json::from_str::<EventNotice>(payload) {
                Ok(notice) => self.dispatch_event(notice),
                Err(err) => tracing::warn!(error = %err, payload, "malformed event notification"),
            },
            _ => {}
        }
    }

    fn dispatch_event(&self, notice: EventNotice) {
        let run_id = RunId(notice.run_id);
        let runs = self
            .runs
            .lock()
            .expect("run subscriptions lock is never poisoned");
        let Some(sender) = runs.get(&run_id) else {
            return;
        };
        let signal = match (notice.seq, notice.event) {
            (Some(seq), Some(event)) => RunSignal::Event(RunEvent {
                run_id,
                seq,
                event,
                data: notice.data,
            }),
            _ => RunSignal::Reread,
        };
        let _ = sender.send(signal);
    }

    fn reconnected(&self) {
        let _ = self.queued.send(Queued::Reconnected);
        let _ = self.control.send(Control::Reconnected);
        let runs = self
            .runs
            .lock()
            .expect("run subscriptions lock is never poisoned");
        for sender in runs.values() {
            let _ = sender.send(RunSignal::Reread);
        }
    }
}

async fn connect(pool: &PgPool, shared: &Shared) -> Result<PgListener> {
    let mut connection = PgListener::connect_with(pool).await?;
    // Reconnection is ours: it must be followed by the re-read signals.
    connection.eager_reconnect(false);
    connection
        .listen_all(shared.channels.iter().copied())
        .await?;
    let pid = sqlx::query_scalar!(r#"select pg_backend_pid() as "pid!""#)
        .fetch_one(&mut connection)
        .await?;
    shared.backend_pid.store(pid, Ordering::Relaxed);
    Ok(connection)
}

async fn listen(
    shared: Arc<Shared>,
    pool: PgPool,
    mut connection: PgListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let received = tokio::select! {
            biased;
            () = &mut shutdown => return,
            received = connection.try_recv() => received,
        };
        match received {
            Ok(Some(notification)) => {
                shared.dispatch(notification.channel(), notification.payload())
            }
            Ok(None) | Err(_) => {
                match received {
                    Err(err) => {
                        tracing::warn!(error = %err, "listener connection failed; reconnecting")
                    }
                    _ => tracing::warn!("listener connection closed; reconnecting"),
                }
                drop(connection);
                let reconnect = (|| connect(&pool, &shared))
                    .retry(
                        ExponentialBuilder::default()
                            .with_min_delay(RECONNECT_MIN_DELAY)
                            .with_max_delay(RECONNECT_MAX_DELAY)
                            .without_max_times(),
                    )
                    .notify(|err, delay| {
                        tracing::warn!(error = %err, ?delay, "listener reconnect failed; retrying");
                    });
                connection = tokio::select! {
                    biased;
                    () = &mut shutdown => return,
                    connected = reconnect => match connected {
                        Ok(connection) => connection,
                        Err(err) => unreachable!("retries without a limit never give up: {err}"),
                    },
                };
                tracing::info!("listener reconnected");
                shared.reconnected();
            }
        }
    }
}
