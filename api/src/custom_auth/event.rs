//! What the project's handlers are asked about: each action on a resource, with the value the
//! handler sees, keyed as the official server keys it (the `langgraph_sdk.auth.types` dicts).

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{Map, Value};
use uuid::Uuid;

use mostrador_queue::MultitaskStrategy;

use crate::runs::accept::{IfNotExists, RunCommand};

/// An action the project's handlers may allow, change or filter.
pub trait Event: Serialize {
    /// The resource (`threads`, `assistants`, `crons`, `store`) and the action on it.
    fn names(&self) -> (&'static str, &'static str);
}

/// Events whose resource and action their type says.
macro_rules! named {
    ($($event:ty: $resource:literal, $action:literal;)+) => {
        $(
            impl Event for $event {
                fn names(&self) -> (&'static str, &'static str) {
                    ($resource, $action)
                }
            }
        )+
    };
}

/// Events of one resource whose action the caller names (read, update, delete, search, ...).
macro_rules! of_resource {
    ($($event:ty: $resource:literal;)+) => {
        $(
            impl Event for $event {
                fn names(&self) -> (&'static str, &'static str) {
                    ($resource, self.action)
                }
            }
        )+
    };
}

named! {
    ThreadsCreate<'_>: "threads", "create";
    ThreadCopy: "threads", "create";
    ThreadsSearch<'_>: "threads", "search";
    AnyThreads: "threads", "search";
    ThreadsUpdate<'_>: "threads", "update";
    RunsCreate<'_>: "threads", "create_run";
    AssistantsCreate<'_>: "assistants", "create";
    AssistantsUpdate<'_>: "assistants", "update";
    AssistantsSearch<'_>: "assistants", "search";
    CronsCreate<'_>: "crons", "create";
    CronsUpdate<'_>: "crons", "update";
    CronsSearch<'_>: "crons", "search";
    StorePut<'_>: "store", "put";
    StoreGet<'_>: "store", "get";
    StoreDelete<'_>: "store", "delete";
    StoreSearch<'_>: "store", "search";
    StoreListNamespaces<'_>: "store", "list_namespaces";
}

of_resource! {
    OnThread<'_>: "threads";
    OnAssistant<'_>: "assistants";
    OnCron: "crons";
}

/// `threads.create`: a new thread, its id when the client chose one.
#[derive(Debug, Serialize)]
pub struct ThreadsCreate<'a> {
    pub thread_id: Option<Uuid>,
    pub metadata: Map<String, Value>,
    pub if_exists: Option<&'a str>,
}

/// `threads.create` of a copy: a thread the caller creates, with no id yet.
#[derive(Debug, Serialize)]
pub struct ThreadCopy {
    pub thread_id: Option<Uuid>,
}

/// `threads.search`.
#[derive(Debug, Serialize)]
pub struct ThreadsSearch<'a> {
    pub metadata: Map<String, Value>,
    pub values: Option<&'a Map<String, Value>>,
    pub status: Option<&'a str>,
    pub limit: i64,
    pub offset: i64,
}

/// `threads.search` of every thread the caller may see (the recent runs' list).
#[derive(Debug, Serialize)]
pub struct AnyThreads {}

/// `threads.update` of a thread's metadata.
#[derive(Debug, Serialize)]
pub struct ThreadsUpdate<'a> {
    pub thread_id: &'a str,
    pub metadata: Map<String, Value>,
}

/// An action on one thread, named by its id (`read`, `update`, `delete`).
#[derive(Debug, Serialize)]
pub struct OnThread<'a> {
    #[serde(skip)]
    pub action: &'static str,
    pub thread_id: &'a str,
}

/// `threads.create_run`: a run on a thread (none: a stateless run), as it will be queued.
#[derive(Debug, Serialize)]
pub struct RunsCreate<'a> {
    pub thread_id: Option<&'a str>,
    pub assistant_id: Option<&'a str>,
    /// Not chosen yet (null), as officially.
    pub run_id: Option<Uuid>,
    /// `pending`.
    pub status: &'static str,
    pub metadata: Map<String, Value>,
    pub prevent_insert_if_inflight: bool,
    pub multitask_strategy: Option<MultitaskStrategy>,
    pub if_not_exists: Option<IfNotExists>,
    pub after_seconds: Option<f64>,
    pub kwargs: RunKwargs<'a>,
}

/// What a run is asked to do, as [`RunsCreate`] shows it.
#[derive(Debug, Serialize)]
pub struct RunKwargs<'a> {
    pub input: Option<&'a Value>,
    pub command: Option<&'a RunCommand>,
    pub config: Option<&'a Value>,
    pub context: Option<&'a Map<String, Value>>,
    pub webhook: Option<&'a str>,
}

/// `assistants.create`.
#[derive(Debug, Serialize)]
pub struct AssistantsCreate<'a> {
    pub assistant_id: Uuid,
    pub graph_id: &'a str,
    pub config: Option<&'a Map<String, Value>>,
    pub context: Option<&'a Map<String, Value>>,
    pub metadata: Map<String, Value>,
    pub if_exists: Option<&'a str>,
    pub name: Option<&'a str>,
    pub description: Option<&'a str>,
}

/// `assistants.update`: a new version.
#[derive(Debug, Serialize)]
pub struct AssistantsUpdate<'a> {
    pub assistant_id: &'a str,
    pub graph_id: Option<&'a str>,
    pub config: Option<&'a Map<String, Value>>,
    pub context: Option<&'a Map<String, Value>>,
    pub metadata: Map<String, Value>,
    pub name: Option<&'a str>,
    pub description: Option<&'a str>,
}

/// `assistants.search`.
#[derive(Debug, Serialize)]
pub struct AssistantsSearch<'a> {
    pub graph_id: Option<&'a str>,
    pub metadata: Map<String, Value>,
    pub limit: i64,
    pub offset: i64,
}

/// An action on one assistant, named by its id (`read`, `delete`).
#[derive(Debug, Serialize)]
pub struct OnAssistant<'a> {
    #[serde(skip)]
    pub action: &'static str,
    pub assistant_id: &'a str,
}

/// `crons.create`: the runs it will make, and when.
#[derive(Debug, Serialize)]
pub struct CronsCreate<'a> {
    pub payload: Value,
    pub schedule: &'a str,
    /// Not chosen yet (null), as officially.
    pub cron_id: Option<Uuid>,
    pub thread_id: Option<Uuid>,
    pub user_id: &'a str,
    pub end_time: Option<DateTime<Utc>>,
    pub metadata: Map<String, Value>,
}

/// `crons.update`: the fields the patch sets.
#[derive(Debug, Serialize)]
pub struct CronsUpdate<'a> {
    pub cron_id: Uuid,
    pub payload: &'a Map<String, Value>,
    pub schedule: Option<&'a Value>,
}

/// `crons.search`.
#[derive(Debug, Serialize)]
pub struct CronsSearch<'a> {
    pub assistant_id: Option<&'a str>,
    pub thread_id: Option<&'a str>,
    pub limit: i64,
    pub offset: i64,
}

/// An action on one cron, named by its id (`read`, `delete`).
#[derive(Debug, Serialize)]
pub struct OnCron {
    #[serde(skip)]
    pub action: &'static str,
    pub cron_id: Uuid,
}

/// `store.put`.
#[derive(Debug, Serialize)]
pub struct StorePut<'a> {
    pub namespace: &'a [String],
    pub key: &'a str,
    pub value: &'a Map<String, Value>,
    pub index: Option<&'a Value>,
    pub ttl: Option<f64>,
}

/// `store.get`.
#[derive(Debug, Serialize)]
pub struct StoreGet<'a> {
    pub namespace: &'a [String],
    pub key: &'a str,
    pub refresh_ttl: bool,
}

/// `store.delete`.
#[derive(Debug, Serialize)]
pub struct StoreDelete<'a> {
    pub namespace: &'a [String],
    pub key: &'a str,
}

/// `store.search`, its limit and offset defaulted.
#[derive(Debug, Serialize)]
pub struct StoreSearch<'a> {
    pub namespace: &'a [String],
    pub filter: Option<&'a Map<String, Value>>,
    pub limit: i64,
    pub offset: i64,
    pub query: Option<&'a str>,
    pub refresh_ttl: Option<bool>,
}

/// `store.list_namespaces`, its limit and offset defaulted.
#[derive(Debug, Serialize)]
pub struct StoreListNamespaces<'a> {
    pub namespace: Option<&'a [String]>,
    pub suffix: Option<&'a [String]>,
    pub max_depth: Option<i32>,
    pub limit: i64,
    pub offset: i64,
}
