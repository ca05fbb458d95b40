//! How a worker process behaves ([`WorkerConfig`], its defaults and their validation), and the
//! graphs it serves ([`Registry`]).

use std::collections::HashMap;
use std::time::Duration;

use mostrador_graph::Graph;

use crate::runner::RunnerConfig;

/// How long a run may take before it ends `timeout`: a day, as on the official server.
pub const RUN_TIMEOUT_DEFAULT: Duration = Duration::from_secs(24 * 3600);
/// Runs in flight per process when none is configured.
pub const MAX_RUNS_DEFAULT: usize = 16;
/// How long a worker's runs stay its own without a heartbeat.
pub const LEASE_DEFAULT: Duration = Duration::from_secs(60);
/// How often claimers look for work when no notification woke them.
pub const POLL_INTERVAL_DEFAULT: Duration = Duration::from_secs(1);
/// How often expired leases are swept.
pub const SWEEP_INTERVAL_DEFAULT: Duration = Duration::from_secs(10);
/// How long a drain waits for runs to reach a superstep boundary before cancelling them.
pub const DRAIN_TIMEOUT_DEFAULT: Duration = Duration::from_secs(25);
/// Kubernetes' default `terminationGracePeriodSeconds`.
pub const GRACE_PERIOD_DEFAULT: Duration = Duration::from_secs(30);
/// Pending runs per graph when no limit is configured (the api's default too).
pub const MAX_PENDING_DEFAULT: i64 = 10_000;
/// How often a worker tries to be the scheduler of due crons (schedules have minute resolution).
pub const CRON_INTERVAL_DEFAULT: Duration = Duration::from_secs(5);

/// Compiled graphs by graph (assistant) id.
pub type Registry = HashMap<String, Graph>;

/// How a worker process behaves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerConfig {
    /// For people: the pod or host name.
    pub name: String,
    /// The graphs this worker claims runs of.
    pub graphs: Vec<String>,
    pub max_runs: usize,
    pub lease: Duration,
    /// A third of the lease unless set otherwise.
    pub heartbeat: Duration,
    pub poll_interval: Duration,
    pub sweep_interval: Duration,
    /// Must stay below `grace_period`.
    pub drain_timeout: Duration,
    /// How long the platform waits after SIGTERM before it kills the process (the pod's
    /// `terminationGracePeriodSeconds`).
    pub grace_period: Duration,
    /// Ends a run `timeout` when it runs longer ([`RUN_TIMEOUT_DEFAULT`] unless set; `None`:
    /// no limit).
    pub run_timeout: Option<Duration>,
    /// Tasks of one superstep at once, for runs whose configuration sets none, and the most a
    /// run's configuration may ask for.
    pub max_concurrency: Option<usize>,
    /// How often the worker tries to be the scheduler of due crons.
    pub cron_interval: Duration,
    /// Pending runs per graph above which the scheduler holds a cron's run to its next tick, as
    /// the api refuses clients' runs past it.
    pub max_pending: i64,
    /// Pending runs of one owner above which the scheduler holds their cron's run to its next
    /// tick, as the api refuses a caller's runs past their share.
    pub max_pending_per_caller: i64,
    /// The graphs of a `langgraph.json`, executed by LangGraph in runner processes: one pool of
    /// runners per language.
    pub runners: Vec<RunnerConfig>,
}

impl WorkerConfig {
    pub fn new(name: impl Into<String>, graphs: Vec<String>) -> Self {
        Self {
            name: name.into(),
            graphs,
            max_runs: MAX_RUNS_DEFAULT,
            lease: LEASE_DEFAULT,
            heartbeat: LEASE_DEFAULT / 3,
            poll_interval: POLL_INTERVAL_DEFAULT,
            sweep_interval: SWEEP_INTERVAL_DEFAULT,
            drain_timeout: DRAIN_TIMEOUT_DEFAULT,
            grace_period: GRACE_PERIOD_DEFAULT,
            run_timeout: Some(RUN_TIMEOUT_DEFAULT),
            max_concurrency: None,
            cron_interval: CRON_INTERVAL_DEFAULT,
            max_pending: MAX_PENDING_DEFAULT,
            max_pending_per_caller: mostrador_queue::run::MAX_PENDING_PER_CALLER_DEFAULT,
            runners: Vec::new(),
        }
    }

    /// Checks the settings against each other and against the registry.
    ///
    /// # Errors
    ///
    /// A message naming the setting and what it must be.
    pub fn validate(&self, registry: &Registry) -> Result<(), String> {
        if self.graphs.is_empty() {
            return Err("the worker serves no graph".into());
        }
        if let Some(unknown) = self.graphs.iter().find(|graph| {
            !registry.contains_key(*graph)
                && !self
                    .runners
                    .iter()
                    .any(|runners| runners.graphs.contains(graph))
        }) {
            return Err(format!("graph {unknown:?} is not registered"));
        }
        if self.max_runs == 0 {
            return Err("max runs must be at least 1".into());
        }
        if self.cron_interval < Duration::from_millis(10) {
            return Err("the cron interval must be at least 10ms".into());
        }
        if self.max_concurrency == Some(0) {
            return Err("max concurrency must be at least 1".into());
        }
        if self.lease < Duration::from_secs(1) {
            return Err("the lease must be at least one second".into());
        }
        if self.lease < self.heartbeat * 3 {
            return Err(format!(
                "the lease ({:?}) must be at least three heartbeats ({:?}), or one slow heartbeat loses every run",
                self.lease, self.heartbeat
            ));
        }
        if self.drain_timeout >= self.grace_period {
            return Err(format!(
                "the drain timeout ({:?}) must be below the grace period ({:?}), or runs are killed before they are handed back",
                self.drain_timeout, self.grace_period
            ));
        }
        if self.poll_interval.is_zero() || self.sweep_interval.is_zero() || self.heartbeat.is_zero()
        {
            return Err("intervals must be above zero".into());
        }
        Ok(())
    }
}
