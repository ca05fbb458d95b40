//! The app a binary serves: its Rust graphs and what comes with them (policy, routes, tables).

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;

use anyhow::Context as _;
use clap::Args;
use mostrador_api::policy::PolicyFile;
use mostrador_api::{AppRoutes, Policy};
use mostrador_model::{Model, Offline, offline};
use mostrador_worker::Registry;
use sqlx::PgPool;
use sqlx::migrate::Migrator;

/// An app: the Rust graphs a binary serves, with their policy, routes, tables, demo data and
/// offline answers. The platform knows none; a binary names its own (`mostrador_retail::APP`).
#[derive(Debug, Clone, Copy)]
pub struct App {
    /// Builds them; their nodes may use the database and the model.
    pub build: fn(&PgPool, &Model) -> Registry,
    /// Their authorization policy (a policy file's text, see `mostrador_api::policy`), unless the
    /// operator names another (`--policy`); `None`: owner-only.
    pub policy: Option<&'static str>,
    /// Routes their app serves beside the api's (an approvals queue, say).
    pub routes: &'static [AppRoutes],
    /// Their app's migrations, run after the platform's, and the schemas they create (granted to
    /// the runtime role).
    pub migrations: &'static [&'static Migrator],
    pub schemas: &'static [&'static str],
    /// Loads their app's demo data (`mostrador seed`, `dev --demo-data`).
    pub demo_data: Option<DemoData>,
    /// What the built-in offline model answers their nodes, when no model server is configured.
    pub offline: offline::Script,
    /// An example app's graphs, served beside a project's `langgraph.json` only when asked
    /// (`--example-graphs`).
    pub example: bool,
}

/// Loads an app's demo data.
pub type DemoData =
    for<'a> fn(&'a PgPool) -> Pin<Box<dyn Future<Output = sqlx::Result<()>> + Send + 'a>>;

impl App {
    /// No Rust graph and no app: the platform alone, serving the Python graphs of a
    /// `langgraph.json`, owner-only unless `--policy` says otherwise.
    pub const NONE: Self = Self {
        build: |_, _| Registry::new(),
        policy: None,
        routes: &[],
        migrations: &[],
        schemas: &[],
        demo_data: None,
        offline: Offline::default_script,
        example: false,
    };
}

/// Which authorization policy the api follows.
#[derive(Debug, Clone, Args)]
pub(crate) struct PolicyArgs {
    /// The authorization policy file (TOML): where a token's subject, tenant and roles are, and
    /// per graph who starts runs, reads threads, answers interrupts and schedules crons; an empty
    /// file is owner-only [default: the policy of the binary's graphs].
    #[arg(long, env = "MOSTRADOR_POLICY", value_name = "FILE")]
    policy: Option<PathBuf>,
}

impl PolicyArgs {
    /// Whether a policy file is named.
    pub(crate) fn is_set(&self) -> bool {
        self.policy.is_some()
    }

    /// The policy file named, or the graphs' own, or owner-only.
    pub(crate) fn load(&self, graphs: &App) -> anyhow::Result<PolicyFile> {
        let (text, source) = match (&self.policy, graphs.policy) {
            (Some(path), _) => (
                std::fs::read_to_string(path)
                    .with_context(|| format!("failed to read the policy {}", path.display()))?,
                path.display().to_string(),
            ),
            (None, Some(text)) => (text.to_owned(), "of the binary's graphs".to_owned()),
            (None, None) => (String::new(), String::new()),
        };
        Policy::parse(&text).map_err(|err| anyhow::anyhow!("the policy {source}: {err}"))
    }
}
