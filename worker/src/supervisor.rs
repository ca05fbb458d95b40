//! The supervisor: one loop per worker process that claims runs while it has room, executes each
//! in a task of its own, heartbeats, sweeps expired leases, relays cancels, and drains on shutdown.
//!
//! Its `select!` reads as a table of contents; each arm calls one method. Claims are woken by
//! NOTIFY and, because notifications can be lost, by a poll interval too; a claim that comes back
//! full is followed by another at once.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use mostrador_graph::Graph;
use mostrador_queue::PgPool;
use mostrador_queue::db::{Connections, claimer};
use mostrador_queue::listener::{Control, Queued};
use mostrador_queue::run::ending::{End, Ending, end_many};
use mostrador_queue::run::lease::sweep;
use mostrador_queue::{
    ClaimedRun, Lease, Listener, QueueLimit, RunId, WorkerId, WorkerLease, claim, data::cron,
};
use tokio::sync::broadcast;
use tokio::task::{Id, JoinError, JoinSet};
use tokio::time::{Instant, MissedTickBehavior, interval, sleep_until};
use tracing::Instrument;

use crate::config::{Registry, WorkerConfig};
use crate::execute::{Executor, Finish, RunHandle};
use crate::runner::{Language, Runners};
use crate::telemetry::{RunLabels, Telemetry};

/// Runs the worker until `shutdown` resolves and its runs are drained (or, past the drain
/// timeout, cancelled and released).
///
/// # Errors
///
/// An invalid configuration, or a database that cannot be reached at start.
pub async fn run(
    pool: PgPool,
    config: WorkerConfig,
    registry: Arc<Registry>,
    telemetry: Arc<Telemetry>,
    shutdown: impl Future<Output = ()>,
) -> Result<(), crate::Error> {
    config.validate(&registry).map_err(crate::Error::Config)?;
    let runners = config
        .runners
        .iter()
        .map(|runners| Runners::new(runners.clone(), config.max_runs).map(Arc::new))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|err| crate::Error::Config(err.to_string()))?;
    for runners in &runners {
        // Before the worker is ready, its runner processes start, so that no run waits for one
        // to import the graphs. A worker whose graphs cannot load still serves its other graphs;
        // each run of one of these then fails retryably with the reason.
        let language = runners.language();
        if let Err(err) = runners.warm().await {
            tracing::error!(error = %err, ?language, "runners could not start");
        }
        match runners.describe(&pool, false).await {
            Ok(()) => tracing::info!(?language, "graphs described for the api"),
            Err(err) => tracing::error!(error = %err, ?language, "graphs could not be described"),
        }
    }
    // A TypeScript `Annotation` state's types take seconds to read: once the worker serves.
    for runners in runners
        .iter()
        .filter(|r| r.language() == Language::JavaScript)
    {
        let (runners, pool) = (Arc::clone(runners), pool.clone());
        tokio::spawn(async move {
            match runners.describe(&pool, true).await {
                Ok(()) => tracing::info!("graphs described with their TypeScript types"),
                Err(err) => tracing::warn!(error = %err, "TypeScript types could not be read"),
            }
        });
    }
    let lease = WorkerLease::new(&config.name, config.graphs.clone(), config.lease);
    lease.register(&pool).await?;
    take_back(&pool, &lease).await?;
    let (stop_listener, listener_stopped) = tokio::sync::oneshot::channel::<()>();
    let listener =
        Listener::start_for_worker(pool.clone(), async { listener_stopped.await.unwrap_or(()) })
            .await?;
    tracing::info!(worker_id = %lease.worker_id, graphs = ?config.graphs, "worker started");
    telemetry.set_ready(true);

    let executor =
        Executor::new(pool.clone(), Arc::clone(&telemetry)).max_concurrency(config.max_concurrency);
    let mut supervisor = Supervisor {
        runners,
        leaving: executor.publisher.leaving(),
        executor,
        queued: listener.queued(),
        control: listener.control(),
        claims: Connections::kept(claimer(&pool)),
        pool,
        config,
        registry,
        telemetry,
        lease,
        runs: JoinSet::new(),
        in_flight: HashMap::new(),
        tasks: HashMap::new(),
        stranded: Vec::new(),
        drain_deadline: None,
        cancelled_all: false,
        last_heartbeat: Instant::now(),
        more_queued: false,
    };
    // The scheduler ticks beside the supervisor (its own connection, its own cadence) until the
    // shutdown begins: a draining worker enqueues nothing new.
    let (stop_scheduler, scheduler_stopped) = tokio::sync::watch::channel(false);
    let scheduler = tokio::spawn(schedule_crons(
        supervisor.pool.clone(),
        supervisor.config.cron_interval,
        QueueLimit {
            max_pending: supervisor.config.max_pending,
            max_pending_per_caller: supervisor.config.max_pending_per_caller,
            retry_after: supervisor.config.cron_interval,
            ..QueueLimit::new(supervisor.config.max_pending)
        },
        scheduler_stopped,
    ));
    let failed = supervisor
        .run(async {
            shutdown.await;
            let _ = stop_scheduler.send(true);
        })
        .await;
    let _ = stop_scheduler.send(true);
    let _ = scheduler.await;

    let _ = stop_listener.send(());
    listener.join().await;
    supervisor.lease.deregister(&supervisor.pool).await?;
    supervisor.claims.close().await;
    if let Some(failed) = failed {
        tracing::error!(error = %failed, "worker stopped");
        return Err(failed);
    }
    tracing::info!("worker stopped");
    Ok(())
}

/// Makes a run's span part of the trace of the request that created it (no-op unless the process
/// exports traces). The remote parent's span id is derived from the run id: the request's own span
/// id is not stored.
fn continue_trace(span: &tracing::Span, trace_id: &str, run_id: RunId) {
    use opentelemetry::trace::{
        SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState,
    };
    use tracing_opentelemetry::OpenTelemetrySpanExt;
    let Ok(trace_id) = TraceId::from_hex(trace_id) else {
        return;
    };
    let tail: [u8; 8] = run_id.0.as_bytes()[8..]
        .try_into()
        .expect("a uuid has 16 bytes");
    let parent = SpanContext::new(
        trace_id,
        SpanId::from_bytes(tail),
        TraceFlags::SAMPLED,
        true,
        TraceState::default(),
    );
    let _ = span.set_parent(opentelemetry::Context::new().with_remote_span_context(parent));
}

/// Calls [`cron::tick`] every `interval` until `stopped`; the one worker that wins a tick's lock
/// enqueues the due crons' runs.
async fn schedule_crons(
    pool: PgPool,
    interval: Duration,
    limit: QueueLimit,
    mut stopped: tokio::sync::watch::Receiver<bool>,
) {
    let mut ticks = ticker(interval);
    loop {
        tokio::select! {
            _ = stopped.wait_for(|stop| *stop) => return,
            _ = ticks.tick() => {}
        }
        match cron::tick(&pool, Some(limit)).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(runs = n, "enqueued the runs of due crons"),
            Err(err) => {
                tracing::warn!(error = %err, "a scheduler tick failed; the next one retries")
            }
        }
    }
}

struct Supervisor {
    pool: PgPool,
    /// The claim's own connection (see [`claimer`]), kept from one claim to the next.
    claims: Connections,
    /// The runner processes of the project's graphs, a pool per language.
    runners: Vec<Arc<Runners>>,
    config: WorkerConfig,
    registry: Arc<Registry>,
    executor: Executor,
    telemetry: Arc<Telemetry>,
    lease: WorkerLease,
    queued: broadcast::Receiver<Queued>,
    control: broadcast::Receiver<Control>,
    runs: JoinSet<RunExit>,
    in_flight: HashMap<RunId, InFlight>,
    /// Runs that handed their ending to the publisher ([`Publisher::leaving`]).
    leaving: tokio::sync::mpsc::UnboundedReceiver<RunId>,
    /// Which run each task executes, to find the run of a task that panicked.
    tasks: HashMap<Id, RunId>,
    /// Runs whose end could not be recorded (the database failed, or the task panicked): still
    /// `running` and ours, so no sweeper takes them back while this worker lives. Each heartbeat
    /// tries to fail them (retryable), until it succeeds.
    stranded: Vec<End>,
    drain_deadline: Option<Instant>,
    cancelled_all: bool,
    /// When a heartbeat last reached the database.
    last_heartbeat: Instant,
    /// The last claim filled every free slot: more runs may wait, so a slot that frees up is
    /// filled at once rather than at the next notification or poll.
    more_queued: bool,
}

/// What a run's task returns.
type RunExit = (RunId, Result<Finish, crate::Error>);

/// A run this worker executes.
/// What executes a claimed run.
enum Served {
    Rust(Graph),
    Runner(Arc<Runners>),
}

struct InFlight {
    /// Its ending should the run's own not be recorded: a retryable failure.
    stranded: End,
    lease: Lease,
    handle: RunHandle,
    graph: String,
    began: Instant,
    /// It handed its ending to the publisher: done executing, it holds no slot.
    ending: bool,
}

impl Supervisor {
    /// Until `shutdown` and the drain; what failed if the worker stops for a failure of its own.
    async fn run(&mut self, shutdown: impl Future<Output = ()>) -> Option<crate::Error> {
        let mut shutdown = std::pin::pin!(shutdown);
        let mut failed = None;
        let publisher = self.executor.publisher.clone();
        let mut publisher_stopped = std::pin::pin!(publisher.stopped());
        let mut poll = ticker(self.config.poll_interval);
        let mut heartbeat = ticker(self.config.heartbeat);
        let mut sweeping = ticker(self.config.sweep_interval);
        loop {
            let draining = self.drain_deadline.is_some();
            if draining && self.in_flight.is_empty() {
                return failed;
            }
            let deadline = self.drain_deadline.unwrap_or_else(Instant::now);
            tokio::select! {
                biased;
                () = &mut shutdown, if !draining => self.start_drain(),
                // A bug: no run's events or end can be written any more. The worker stops
                // claiming, is not ready, hands back what it can and exits with the error.
                () = &mut publisher_stopped, if failed.is_none() => {
                    tracing::error!("the publisher of events stopped: the worker stops");
                    failed = Some(crate::Error::Publish {
                        message: "the publisher of events stopped".into(),
                        transient: false,
                    });
                    if !draining {
                        self.start_drain();
                    }
                }
                () = sleep_until(deadline), if draining && !self.cancelled_all => self.cancel_all(),
                Some(joined) = self.runs.join_next_with_id(), if !self.runs.is_empty() => {
                    self.reap(joined);
                    // Reap every run that ended meanwhile, then refill all their slots with one
                    // claim.
                    while let Some(joined) = self.runs.try_join_next_with_id() {
                        self.reap(joined);
                    }
                    if self.more_queued && !draining {
                        self.claim_while_full().await;
                    }
                }
                Some(run_id) = self.leaving.recv() => {
                    self.leave(run_id);
                    while let Ok(run_id) = self.leaving.try_recv() {
                        self.leave(run_id);
                    }
                    if self.more_queued && !draining {
                        self.claim_while_full().await;
                    }
                }
                signal = self.control.recv() => self.relay_control(signal),
                _ = heartbeat.tick() => {
                    self.heartbeat().await;
                    self.fail_stranded().await;
                }
                _ = self.queued.recv(), if !draining => self.claim_while_full().await,
                _ = poll.tick(), if !draining => {
                    // Endings the database did not take yet are tried again at each poll, so a
                    // run waits no longer than it must once the database is back.
                    self.fail_stranded().await;
                    self.claim_while_full().await;
                }
                _ = sweeping.tick() => self.sweep().await,
            }
        }
    }

    fn start_drain(&mut self) {
        self.telemetry.set_ready(false);
        tracing::info!(
            in_flight = self.in_flight.len(),
            "draining: runs stop at their next superstep boundary"
        );
        for run in self.in_flight.values() {
            run.handle.control.request_drain("worker shutting down");
        }
        self.drain_deadline = Some(Instant::now() + self.config.drain_timeout);
    }

    fn cancel_all(&mut self) {
        tracing::warn!(
            in_flight = self.in_flight.len(),
            "drain timeout: cancelling runs in flight; they are released"
        );
        for run in self.in_flight.values() {
            run.handle.control.cancel();
        }
        self.cancelled_all = true;
    }

    fn leave(&mut self, run_id: RunId) {
        if let Some(run) = self.in_flight.get_mut(&run_id) {
            run.ending = true;
        }
    }

    fn reap(&mut self, joined: Result<(Id, RunExit), JoinError>) {
        let (run_id, finish) = match joined {
            Ok((task_id, (run_id, finish))) => {
                self.tasks.remove(&task_id);
                (run_id, finish)
            }
            Err(err) => {
                let Some(run_id) = self.tasks.remove(&err.id()) else {
                    return;
                };
                tracing::error!(%run_id, error = %err, "run task panicked");
                (run_id, Err(crate::Error::Panicked(err.to_string())))
            }
        };
        let Some(run) = self.in_flight.remove(&run_id) else {
            return;
        };
        self.observe_exit(&run, &finish);
        match finish {
            Ok(Finish::LeaseLost) => {
                tracing::warn!(%run_id, "lease lost: the run stopped without writing more");
            }
            Ok(finish) => tracing::info!(%run_id, ?finish, "run left the worker"),
            Err(err) => {
                // With its final checkpoint, if it made one: the next attempt has nothing to
                // run again.
                let checkpoint = run.handle.final_checkpoint.get();
                let stranded = run.stranded.with_checkpoint(checkpoint);
                // The database failing for a while (out of disk, unreachable) costs the run
                // no attempt: it waits for it, its ending written at a poll once it can be.
                let stranded = if err.is_transient() {
                    tracing::warn!(%run_id, error = %err, "run transition failed: the database failed; postponing it once it can be written");
                    stranded.postponed(format!("the database failed: {err}"))
                } else {
                    tracing::error!(%run_id, error = %err, "run transition failed: failing it at the next poll");
                    stranded
                };
                self.stranded.push(stranded);
            }
        }
        self.telemetry
            .runs_in_flight
            .set(self.in_flight.len() as i64);
    }

    fn observe_exit(&self, run: &InFlight, finish: &Result<Finish, crate::Error>) {
        let outcome = match finish {
            Ok(Finish::Ended(status)) => status.as_str(),
            Ok(Finish::Retrying) => "retrying",
            Ok(Finish::Released) => {
                self.telemetry.runs_drained.inc();
                "released"
            }
            Ok(Finish::RolledBack) => "rolled_back",
            Ok(Finish::LeaseLost) => {
                self.telemetry.leases_lost.inc();
                "lease_lost"
            }
            Err(_) => "transition_failed",
        };
        self.telemetry
            .run_seconds
            .get_or_create(&RunLabels {
                graph: run.graph.clone(),
                outcome: outcome.to_owned(),
            })
            .observe(run.began.elapsed().as_secs_f64());
    }

    fn relay_control(&mut self, signal: Result<Control, broadcast::error::RecvError>) {
        match signal {
            Ok(Control::Cancel { run_id, action, .. }) => {
                if let Some(run) = self.in_flight.get(&run_id) {
                    tracing::info!(%run_id, ?action, "cancel requested");
                    run.handle.cancel(action);
                }
            }
            // A lost notification is covered by the next heartbeat, which reads the rows.
            Ok(Control::Reconnected) | Err(_) => {}
        }
    }

    /// Writes the endings of the stranded runs: failed retryably (another attempt, if any is
    /// left, resumes from the last checkpoint), or postponed when the database failed them.
    async fn fail_stranded(&mut self) {
        if self.stranded.is_empty() {
            return;
        }
        // A lost lease is as good as written: the run is no longer ours.
        let written = match self.pool.acquire().await {
            Ok(mut conn) => end_many(&mut conn, &self.stranded).await.map(drop),
            Err(err) => Err(err.into()),
        };
        match written {
            Ok(()) => self.stranded.clear(),
            Err(err) => {
                tracing::warn!(runs = self.stranded.len(), error = %err, "failing stranded runs failed");
            }
        }
    }

    async fn heartbeat(&mut self) {
        let held: Vec<Lease> = self.in_flight.values().map(|run| run.lease).collect();
        match self.lease.heartbeat(&self.pool, &held).await {
            Ok(report) => {
                for lease in report.lost {
                    // Also reported for a run that ended while the heartbeat ran: cancelling it
                    // then is a no-op, and `reap` reports real losses.
                    if let Some(run) = self.in_flight.get(&lease.run_id()) {
                        tracing::debug!(run_id = %lease.run_id(), "lease not held: stopping the run");
                        run.handle.control.cancel();
                    }
                }
                for (lease, action) in report.cancels {
                    if let Some(run) = self.in_flight.get(&lease.run_id()) {
                        run.handle.cancel(action);
                    }
                }
            }
            Err(err) => {
                tracing::warn!(error = %err, "heartbeat failed");
                // A whole lease without a heartbeat: the runs are another worker's by now (or
                // will be at its next sweep). Stop executing them; their writes would be refused
                // by the fence anyway, but their nodes' effects would not.
                if self.last_heartbeat.elapsed() >= self.config.lease && !self.in_flight.is_empty()
                {
                    tracing::warn!(
                        runs = self.in_flight.len(),
                        "no heartbeat for a whole lease: stopping this worker's runs"
                    );
                    for run in self.in_flight.values() {
                        run.handle.control.cancel();
                    }
                }
                return;
            }
        }
        self.last_heartbeat = Instant::now();
    }

    /// Slots to claim runs into: runs executing count, runs waiting for their ending's commit
    /// do not, up to as many as the slots (a publisher that cannot commit stops the claims there).
    fn free(&self) -> usize {
        let max_runs = self.config.max_runs;
        let executing = self.in_flight.values().filter(|run| !run.ending).count();
        max_runs
            .saturating_sub(executing)
            .min((2 * max_runs).saturating_sub(self.in_flight.len()))
    }

    async fn claim(&self, free: usize) -> mostrador_queue::Result<Vec<ClaimedRun>> {
        let mut connection = self.claims.take().await?;
        let claimed = claim(
            &mut *connection,
            self.lease.worker_id,
            &self.config.graphs,
            free as i64,
        )
        .await?;
        connection.done();
        Ok(claimed)
    }

    /// Claims up to the free slots, again and again while claims come back full.
    async fn claim_while_full(&mut self) {
        loop {
            let free = self.free();
            if free == 0 {
                return;
            }
            let claimed = match self.claim(free).await {
                Ok(claimed) => claimed,
                Err(err) => {
                    tracing::warn!(error = %err, "claim failed");
                    return;
                }
            };
            self.more_queued = claimed.len() == free;
            for run in claimed {
                self.start(run);
            }
            if !self.more_queued {
                return;
            }
        }
    }

    fn start(&mut self, claimed: ClaimedRun) {
        let graph = match self.registry.get(&claimed.graph_id) {
            Some(graph) => Served::Rust(graph.clone()),
            None => Served::Runner(Arc::clone(
                self.runners
                    .iter()
                    .find(|runners| runners.serves(&claimed.graph_id))
                    .expect("the worker only claims registered graphs"),
            )),
        };
        let handle = RunHandle::new();
        let stranded = claimed.ending(Ending::Failed {
            error: serde_json::json!({
                "error": "TransitionFailed",
                "message": "the worker could not record how this attempt ended",
            }),
            retryable: true,
        });
        self.in_flight.insert(
            claimed.run_id(),
            InFlight {
                stranded,
                lease: claimed.lease(),
                handle: handle.clone(),
                graph: claimed.graph_id.clone(),
                began: Instant::now(),
                ending: false,
            },
        );
        self.telemetry.runs_claimed.inc();
        self.telemetry
            .runs_in_flight
            .set(self.in_flight.len() as i64);
        let (executor, timeout) = (self.executor.clone(), self.config.run_timeout);
        let run_id = claimed.run_id();
        tracing::info!(%run_id, attempt = claimed.attempt(), graph = %claimed.graph_id, "run claimed");
        // The run's span names its trace: the one of the request that created it.
        let span = tracing::info_span!(
            "run",
            %run_id,
            graph = %claimed.graph_id,
            attempt = claimed.attempt(),
            trace_id = claimed.trace_id.as_deref().unwrap_or(""),
        );
        if let Some(trace_id) = &claimed.trace_id {
            continue_trace(&span, trace_id, run_id);
        }
        let task = self.runs.spawn(
            async move {
                let finish = match graph {
                    Served::Rust(graph) => {
                        executor.execute(claimed, &graph, &handle, timeout).await
                    }
                    Served::Runner(runners) => {
                        executor
                            .execute_in_runner(claimed, &runners, &handle, timeout)
                            .await
                    }
                };
                (run_id, finish)
            }
            .instrument(span),
        );
        self.tasks.insert(task.id(), run_id);
    }

    async fn sweep(&mut self) {
        match sweep(&self.pool).await {
            Ok(swept) if !swept.requeued.is_empty() || !swept.errored.is_empty() => {
                self.telemetry
                    .leases_swept
                    .inc_by((swept.requeued.len() + swept.errored.len()) as u64);
                tracing::warn!(
                    requeued = swept.requeued.len(),
                    errored = swept.errored.len(),
                    "swept expired leases"
                );
            }
            Ok(_) => {}
            Err(err) => tracing::warn!(error = %err, "sweep failed"),
        }
        // Threads whose time to live expired (`ttl`): a bounded batch a sweep.
        match mostrador_queue::data::retention::expire(&self.pool, TTL_BATCH).await {
            Ok(expired) if expired != mostrador_queue::data::retention::Expired::default() => {
                tracing::info!(
                    deleted = expired.deleted,
                    pruned = expired.pruned,
                    "applied expired threads' time to live"
                );
            }
            Ok(_) => {}
            Err(err) => tracing::warn!(error = %err, "time-to-live sweep failed"),
        }
        // Store items past their time to live (reads already leave them out).
        if let Err(err) = mostrador_queue::data::store::delete_expired(&self.pool, TTL_BATCH).await
        {
            tracing::warn!(error = %err, "expired store items sweep failed");
        }
    }
}

/// The most threads whose time to live expired, and store items, that one sweep deletes (the next
/// takes the rest).
const TTL_BATCH: i64 = 100;

/// Records which process this worker is, and ends the lease of the previous incarnations of its
/// name whose process is surely gone (a container restarted in its pod, `dev` started again after
/// a crash): the first sweep, at once, gives their runs back, rather than after their lease.
async fn take_back(pool: &PgPool, lease: &WorkerLease) -> Result<(), crate::Error> {
    let Some(me) = crate::incarnation::current() else {
        return Ok(());
    };
    lease.record_incarnation(pool, &me).await?;
    let gone: Vec<WorkerId> = lease
        .previous_incarnations(pool)
        .await?
        .into_iter()
        .filter(|(_, recorded)| recorded.as_deref().is_some_and(crate::incarnation::is_gone))
        .map(|(worker_id, _)| worker_id)
        .collect();
    if !gone.is_empty() {
        WorkerLease::expire(pool, &gone).await?;
        tracing::info!(previous = ?gone, name = lease.name, "took back the runs of this worker's previous incarnation");
    }
    Ok(())
}

fn ticker(period: Duration) -> tokio::time::Interval {
    let mut ticker = interval(period);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    ticker
}
