//! What the api answers, as the `langgraph-sdk` reads it: one type per shape. The handlers
//! serialize these, and the OpenAPI document ([`openapi`](crate::openapi)) describes them from
//! the same types, so an answer and its schema cannot drift apart. (The requests' types are
//! beside their handlers: each route's body is the struct it deserializes.)

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use mostrador_queue::{MultitaskStrategy, RunStatus, ThreadStatus, state::files};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;
use utoipa::openapi::{ObjectBuilder, RefOr, Schema, Type};
use uuid::Uuid;

/// The body of every error: `{"detail": ...}`, and a 500's correlation id (in its log line too).
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Error)]
pub struct ErrorBody {
    pub detail: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub correlation_id: Option<Uuid>,
}

/// What a thread's checkpoints occupy, per table and per channel
/// (`GET /threads/{thread_id}/storage`), as officially.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ThreadStorage {
    pub thread_id: Uuid,
    pub total_bytes: i64,
    pub checkpoints: StorageTally,
    pub channel_values: ChannelValues,
    pub pending_writes: StorageTally,
}

/// Rows and their bytes.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub struct StorageTally {
    pub count: i64,
    pub bytes: i64,
}

/// The channels' values: a row per version written, and per channel.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ChannelValues {
    pub count: i64,
    pub bytes: i64,
    pub by_channel: BTreeMap<String, ChannelTally>,
}

/// One channel's versions and the bytes of their values.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub struct ChannelTally {
    pub versions: i64,
    pub bytes: i64,
}

impl ThreadStorage {
    pub fn of(thread_id: Uuid, storage: &mostrador_queue::state::storage::Storage) -> Self {
        let tally = |t: mostrador_queue::state::storage::Tally| StorageTally {
            count: t.count,
            bytes: t.bytes,
        };
        Self {
            thread_id,
            total_bytes: storage.total_bytes(),
            checkpoints: tally(storage.checkpoints),
            channel_values: ChannelValues {
                count: storage.channel_values.count,
                bytes: storage.channel_values.bytes,
                by_channel: storage
                    .by_channel
                    .iter()
                    .map(|(channel, t)| {
                        let versions = ChannelTally {
                            versions: t.count,
                            bytes: t.bytes,
                        };
                        (channel.clone(), versions)
                    })
                    .collect(),
            },
            pending_writes: tally(storage.pending_writes),
        }
    }
}

/// A thread, with the values and pending interrupts of its latest checkpoint.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Thread {
    pub thread_id: Uuid,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub state_updated_at: DateTime<Utc>,
    #[schema(value_type = Object)]
    pub metadata: Value,
    #[schema(schema_with = thread_status)]
    pub status: &'static str,
    #[schema(value_type = Object)]
    pub config: Map<String, Value>,
    #[schema(value_type = Option<Object>)]
    pub values: Option<Map<String, Value>>,
    /// Pending interrupts by task id.
    #[schema(value_type = BTreeMap<String, Vec<Object>>)]
    pub interrupts: BTreeMap<String, Vec<Value>>,
    /// Always null: a failed run's error is in its run and its stream.
    #[schema(schema_with = null)]
    pub error: (),
}

/// A thread's state at a checkpoint (the graph's, or a subgraph task's).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ThreadState {
    #[schema(value_type = Object)]
    pub values: Map<String, Value>,
    /// The nodes of the next superstep; empty once the graph has finished.
    pub next: Vec<String>,
    pub tasks: Vec<Task>,
    #[schema(value_type = Value)]
    pub metadata: Value,
    pub created_at: Option<DateTime<Utc>>,
    pub checkpoint: Option<CheckpointRef>,
    pub parent_checkpoint: Option<CheckpointRef>,
    pub interrupts: Vec<Interrupt>,
    pub checkpoint_id: Option<Uuid>,
    pub parent_checkpoint_id: Option<Uuid>,
}

/// Which checkpoint: of a thread, in a namespace (`''`: the graph's own).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct CheckpointRef {
    pub checkpoint_id: Uuid,
    pub thread_id: Uuid,
    pub checkpoint_ns: String,
}

/// A task of the next superstep.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Task {
    pub id: String,
    pub name: String,
    #[schema(value_type = Vec<Value>)]
    pub path: Vec<Value>,
    #[schema(value_type = Value)]
    pub error: Value,
    pub interrupts: Vec<Interrupt>,
    #[schema(value_type = Value)]
    pub checkpoint: Value,
    /// A waiting subgraph's state, when it was asked for (`subgraphs=true`).
    #[schema(value_type = Value)]
    pub state: Value,
    #[schema(value_type = Value)]
    pub result: Value,
}

/// What an interrupt asks, under its id: the id a resume answers.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Interrupt {
    pub id: String,
    #[schema(value_type = Value)]
    pub value: Value,
}

/// A run.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Run {
    pub run_id: Uuid,
    pub thread_id: Uuid,
    /// The assistant the run was created on.
    #[schema(value_type = String, format = Uuid)]
    pub assistant_id: Value,
    #[schema(value_type = Object)]
    pub metadata: Value,
    #[schema(schema_with = run_status)]
    pub status: &'static str,
    pub kwargs: RunKwargs,
    #[schema(schema_with = multitask_strategy)]
    pub multitask_strategy: &'static str,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// A run as the dashboard lists it: with its graph, attempts, error, worker and times.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct RecentRun {
    #[serde(flatten)]
    pub run: Run,
    pub graph_id: String,
    /// Claims so far.
    pub attempt: i32,
    #[schema(value_type = Value)]
    pub error: Option<Value>,
    /// The worker that holds it now.
    pub worker_id: Option<Uuid>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
}

/// What a run was asked to do.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct RunKwargs {
    #[schema(value_type = Value)]
    pub input: Option<Value>,
    #[schema(value_type = Option<Object>)]
    pub command: Option<Value>,
    #[schema(value_type = Object)]
    pub config: Value,
    /// What the graph reads as `runtime.context`: the assistant's, with the run's over it.
    #[schema(value_type = Object)]
    pub context: Value,
    pub stream_mode: Vec<String>,
    #[schema(value_type = String)]
    pub durability: Value,
}

/// A cron: a schedule of runs.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Cron {
    pub cron_id: Uuid,
    /// The assistant its runs start on.
    #[schema(value_type = String, format = Uuid)]
    pub assistant_id: Value,
    /// Its thread; none: each run on a thread of its own.
    pub thread_id: Option<Uuid>,
    pub user_id: String,
    /// Five fields, read in `timezone`.
    pub schedule: String,
    /// IANA; null: UTC.
    pub timezone: Option<String>,
    /// What each run is given (`input`, `config`, `metadata`, `stream_mode`, ...).
    #[schema(value_type = Object)]
    pub payload: Value,
    #[schema(value_type = Object)]
    pub metadata: Value,
    pub enabled: bool,
    pub end_time: Option<DateTime<Utc>>,
    /// When its next run starts; null once disabled.
    pub next_run_date: Option<DateTime<Utc>>,
    pub on_run_completed: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// An item of the Store, as LangGraph's `Item.dict()` writes it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Item {
    #[schema(min_items = 1)]
    pub namespace: Vec<String>,
    pub key: String,
    #[schema(value_type = Object)]
    pub value: Value,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl From<mostrador_queue::data::store::Item> for Item {
    fn from(item: mostrador_queue::data::store::Item) -> Self {
        Self {
            namespace: item.namespace,
            key: item.key,
            value: item.value,
            created_at: item.created_at,
            updated_at: item.updated_at,
        }
    }
}

/// An item a search found, with its relevance (null without a semantic query).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SearchItem {
    #[serde(flatten)]
    pub item: Item,
    pub score: Option<f64>,
}

/// The answer of `POST /store/items/search`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SearchItems {
    pub items: Vec<SearchItem>,
}

/// The answer of `POST /store/namespaces`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct NamespaceList {
    pub namespaces: Vec<Vec<String>>,
}

/// JSON's `null`, and nothing else.
fn null() -> RefOr<Schema> {
    ObjectBuilder::new().schema_type(Type::Null).into()
}

/// A thread's file, without its content (a file of a deep agent's, as deepagents lists it).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct FileEntry {
    pub path: String,
    pub size: i64,
    #[schema(schema_with = file_encoding)]
    pub encoding: &'static str,
    pub created_at: DateTime<Utc>,
    pub modified_at: DateTime<Utc>,
}

impl From<&files::FileInfo> for FileEntry {
    fn from(file: &files::FileInfo) -> Self {
        Self {
            path: file.path.clone(),
            size: file.size,
            encoding: files::encoding(file.is_binary),
            created_at: file.created_at,
            modified_at: file.modified_at,
        }
    }
}

/// A thread's file with its content, as deepagents' `FileData` holds it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct FileContent {
    pub path: String,
    /// Text, or base64 when `encoding` is `base64`.
    pub content: String,
    #[schema(schema_with = file_encoding)]
    pub encoding: &'static str,
    pub created_at: DateTime<Utc>,
    pub modified_at: DateTime<Utc>,
}

impl From<files::File> for FileContent {
    fn from(file: files::File) -> Self {
        Self {
            content: file.text(),
            path: file.path,
            encoding: files::encoding(file.is_binary),
            created_at: file.created_at,
            modified_at: file.modified_at,
        }
    }
}

fn file_encoding() -> RefOr<Schema> {
    names([files::encoding(false), files::encoding(true)])
}

/// A string of one of these names.
fn names(names: impl IntoIterator<Item = &'static str>) -> RefOr<Schema> {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(names))
        .into()
}

fn thread_status() -> RefOr<Schema> {
    names(ThreadStatus::ALL.map(ThreadStatus::as_str))
}

fn run_status() -> RefOr<Schema> {
    names(RunStatus::ALL.map(RunStatus::as_str))
}

fn multitask_strategy() -> RefOr<Schema> {
    names(MultitaskStrategy::ALL.map(MultitaskStrategy::as_str))
}

/// A JSON page of items written as they come, at most a number of bytes: past it the answer is
/// a 413 asking for fewer (`limit`), never a page cut short, and the api holds no more of it
/// ([`crate::app::AppState::max_page_bytes`]).
pub(crate) struct Page {
    bytes: Vec<u8>,
    max: usize,
    first: bool,
}

impl Page {
    /// A page that opens with `prefix` (`[`, or `{"items": [`).
    pub(crate) fn new(prefix: &[u8], max: usize) -> Self {
        Self {
            bytes: prefix.to_vec(),
            max,
            first: true,
        }
    }

    /// Adds an item.
    ///
    /// # Errors
    ///
    /// The 413 past the page's bytes; a 500 for what does not serialize (a bug).
    pub(crate) fn push(&mut self, item: &impl Serialize) -> Result<(), crate::ApiError> {
        if !std::mem::take(&mut self.first) {
            self.bytes.push(b',');
        }
        serde_json::to_writer(&mut self.bytes, item).map_err(crate::ApiError::failed)?;
        if self.bytes.len() > self.max {
            return Err(crate::ApiError::new(
                axum::http::StatusCode::PAYLOAD_TOO_LARGE,
                format!(
                    "the page holds more than {} bytes: ask for fewer (limit), or fewer fields \
                     where a route selects them",
                    self.max
                ),
            ));
        }
        Ok(())
    }

    /// The page, closed with `suffix`, as a JSON answer.
    pub(crate) fn answer(mut self, suffix: &[u8]) -> axum::response::Response {
        use axum::response::IntoResponse;
        self.bytes.extend_from_slice(suffix);
        (
            [(axum::http::header::CONTENT_TYPE, "application/json")],
            self.bytes,
        )
            .into_response()
    }
}

/// `X-Pagination-Total` and, when more follow, `X-Pagination-Next`, as the official server sets
/// them (it counts no further than the page: with more to come, the total is the next offset
/// plus one).
pub(crate) fn pagination(offset: i64, found: usize, more: bool) -> axum::http::HeaderMap {
    let mut headers = axum::http::HeaderMap::new();
    let end = offset.saturating_add(i64::try_from(found).unwrap_or(i64::MAX));
    let total = if more { end.saturating_add(1) } else { end };
    headers.insert("x-pagination-total", total.into());
    if more {
        headers.insert("x-pagination-next", end.into());
    }
    headers
}

/// `GET /info`: the server, in the official server's shape, with mostrador's version.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Info {
    pub version: String,
    pub flags: InfoFlags,
    pub host: InfoHost,
}

/// What the server offers: assistants and crons, no LangSmith.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct InfoFlags {
    pub assistants: bool,
    pub crons: bool,
    pub langsmith: bool,
    pub langsmith_tracing_replicas: bool,
    pub langsmith_tracing_session_on_runs: bool,
}

/// Where the server runs: `kind` mostrador, no LangSmith project.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct InfoHost {
    pub kind: String,
    pub project_id: Option<String>,
    pub host_revision_id: Option<String>,
    pub revision_id: Option<String>,
    pub tenant_id: Option<String>,
}

/// `GET /queue`: the queue's depth by graph and status, and the live workers.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Queue {
    pub at: DateTime<Utc>,
    pub depth: Vec<QueueDepth>,
    pub workers: Vec<Worker>,
}

/// The runs of a graph in one status.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct QueueDepth {
    pub graph_id: String,
    #[schema(value_type = String, pattern = "^(pending|running)$")]
    pub status: &'static str,
    #[schema(minimum = 1)]
    pub runs: i64,
}

/// A worker whose lease holds, with its runs in flight.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Worker {
    pub worker_id: Uuid,
    pub name: String,
    pub graphs: Vec<String>,
    pub started_at: DateTime<Utc>,
    pub heartbeat_at: DateTime<Utc>,
    #[schema(minimum = 0)]
    pub running: i64,
}

/// `GET /ok` and `GET /`: a health check, as the official server answers one.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Health {
    pub ok: bool,
    pub services: HealthServices,
}

/// What a health check found of each service.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct HealthServices {
    pub database: DatabaseHealth,
}

/// The database, as a health check found it: not asked (`skipped`, unless `check_db`),
/// `healthy` or `unhealthy`.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum DatabaseHealth {
    Skipped,
    Healthy,
    Unhealthy,
}

/// `GET /assistants/{assistant_id}/graph`: the graph's nodes and edges, as LangGraph's
/// `Graph.to_json` writes them.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct GraphDrawing {
    #[schema(value_type = Vec<Object>)]
    pub nodes: Vec<Value>,
    #[schema(value_type = Vec<Object>)]
    pub edges: Vec<Value>,
}

/// A graph's JSON Schemas, as LangGraph derives them: null where it could not derive one, and
/// absent where the graph has none (a JavaScript graph's, as the official JS server leaves it
/// out).
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
pub struct Schemas {
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<Object>)]
    pub input_schema: Option<Value>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<Object>)]
    pub output_schema: Option<Value>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<Object>)]
    pub state_schema: Option<Value>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<Object>)]
    pub config_schema: Option<Value>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<Object>)]
    pub context_schema: Option<Value>,
}

/// A field that is there, null or not (absent: `None`, by `default`).
fn present<'de, D: serde::Deserializer<'de>>(field: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(field).map(Some)
}

/// `GET /assistants/{assistant_id}/schemas`: the graph's schemas, and which graph.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct GraphSchemas {
    pub graph_id: String,
    #[serde(flatten)]
    pub schemas: Schemas,
}
