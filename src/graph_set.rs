//! The graphs a binary serves, who starts them and who answers their interrupts.

use std::collections::BTreeSet;

use clap::Args;
use mostrador_agents::Model;
use mostrador_worker::Registry;
use sqlx::PgPool;

/// The graphs a binary serves.
#[derive(Debug, Clone, Copy)]
pub struct GraphSet {
    /// Builds them; their nodes may use the database and the model.
    pub build: fn(&PgPool, &Model) -> Registry,
    /// Those whose interrupts the managers of a thread's store decide, not its owner
    /// (`ApiConfig::decided_by_managers`).
    pub decided_by_managers: &'static [&'static str],
    /// Those only a store's staff start (`ApiConfig::started_by_staff`).
    pub started_by_staff: &'static [&'static str],
}

impl GraphSet {
    /// The retail app's four graphs.
    pub const RETAIL: Self = Self {
        build: mostrador_agents::graphs::all,
        decided_by_managers: mostrador_agents::graphs::DECIDED_BY_MANAGERS,
        started_by_staff: mostrador_agents::graphs::STARTED_BY_STAFF,
    };

    /// The binary's graphs only a store's staff start.
    pub(crate) fn started_by_staff(&self) -> BTreeSet<String> {
        self.started_by_staff
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    /// The binary's graphs decided by managers, and those `args` name.
    pub(crate) fn decided_by_managers(&self, args: &DecidersArgs) -> BTreeSet<String> {
        self.decided_by_managers
            .iter()
            .map(ToString::to_string)
            .chain(args.decided_by_managers.iter().cloned())
            .filter(|graph_id| !graph_id.is_empty())
            .collect()
    }
}

/// Who answers a thread's interrupts, beyond the binary's own rule.
#[derive(Debug, Clone, Args)]
pub(crate) struct DecidersArgs {
    /// Graphs (the binary's or the langgraph.json's) whose interrupts the managers of the
    /// thread's store decide instead of its owner; comma-separated.
    #[arg(long, env = "MOSTRADOR_DECIDED_BY_MANAGERS", value_delimiter = ',')]
    decided_by_managers: Vec<String>,
}
