//! The runner's protocol, on the worker's side: one JSON object per line, each message one of
//! these types. The Python runner's side is `python/mostrador_runner/protocol.py`, the same
//! messages as `TypedDict`s; the JavaScript runner's, `js/channel.mjs` (`js/contract.mjs` checks it
//! against the same examples). `python/protocol-examples.json` holds an example of every message, which the
//! contract tests of both sides read: each must be one of that side's types, field for field, and
//! this side writes it back unchanged. A field one side sends and the other does not know is a
//! failing test, not a silent bug.

use mostrador_graph::{Breakpoints, Durability, StreamMode};
use mostrador_queue::run::RunCommand;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use uuid::Uuid;

/// The protocol's version: a runner says which it speaks when it is ready, and a runner that
/// speaks another is not used.
pub const VERSION: u32 = 2;

/// A message to a runner process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case", deny_unknown_fields)]
pub enum ToRunner {
    /// Starts a run, numbered `run` in this process.
    Start {
        run: u64,
        spec: Box<RunSpec>,
    },
    /// The answer to the call `id`: its result, or why it failed (`error`).
    Reply {
        id: u64,
        result: Value,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// LangGraph's `RunControl.request_drain`: the run stops at its next superstep boundary.
    Drain {
        run: u64,
        reason: String,
    },
    Cancel {
        run: u64,
    },
    /// Describe the graphs for the api; with `types`, a JavaScript runner reads an `Annotation`
    /// state's TypeScript types too (seconds: asked again once the worker serves).
    Describe {
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        types: bool,
    },
}

/// A run as its runner executes it: one typed value from the claim.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunSpec {
    pub run_id: Uuid,
    pub thread_id: Uuid,
    pub graph_id: String,
    pub assistant_id: String,
    pub attempt: i32,
    pub input: Value,
    /// A resume, an update, a goto, or `update_state`.
    pub command: Option<RunCommand>,
    /// The run's config (`configurable`, `context`, `recursion_limit`, `tags`,
    /// `max_concurrency`).
    pub config: Value,
    pub metadata: Value,
    pub stream_mode: Vec<StreamMode>,
    pub stream_subgraphs: bool,
    pub interrupt_before: Breakpoints,
    pub interrupt_after: Breakpoints,
    pub durability: Option<Durability>,
    /// A past checkpoint to run from.
    pub checkpoint_id: Option<Uuid>,
    /// The runtime context: the assistant's with the run's own over it.
    pub context: Map<String, Value>,
    /// The thread's latest checkpoint, when the worker read it with the claim.
    pub latest: Option<Latest>,
}

/// What the worker read of the thread's latest checkpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Latest {
    /// `None`: the thread has none.
    pub checkpoint: Option<SavedJson>,
}

/// A message from a runner process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case", deny_unknown_fields)]
pub enum FromRunner {
    /// Loaded: the protocol it speaks, its process, its graphs.
    Ready {
        protocol: u32,
        pid: u32,
        graphs: Vec<String>,
    },
    /// What LangGraph says of each graph, or why it could not.
    Described { graphs: Map<String, Value> },
    /// A task of `run` (unknown: `None`) has held the event loop for `seconds`.
    Blocked { run: Option<u64>, seconds: f64 },
    /// A call of `run` that waits for its [`ToRunner::Reply`].
    Call { run: u64, id: u64, call: Call },
    /// What needs no answer.
    Cast { run: u64, cast: Cast },
    /// An event for the run's stream.
    Event {
        run: u64,
        event: String,
        data: Value,
    },
    /// The run ended.
    Done { run: u64, outcome: Outcome },
}

impl FromRunner {
    /// The run it concerns, if any.
    pub fn run(&self) -> Option<u64> {
        match self {
            Self::Ready { .. } | Self::Described { .. } => None,
            Self::Blocked { run, .. } => *run,
            Self::Call { run, .. }
            | Self::Cast { run, .. }
            | Self::Event { run, .. }
            | Self::Done { run, .. } => Some(*run),
        }
    }
}

/// What a run asks of the worker and waits for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum Call {
    /// A checkpoint of the thread: `checkpoint_id`, or the latest of the namespace.
    Get {
        ns: String,
        checkpoint_id: Option<Uuid>,
    },
    /// The namespace's checkpoints, newest first, before `before`.
    List {
        ns: String,
        before: Option<Uuid>,
        limit: i64,
    },
    /// A checkpoint whose tasks wait for it to be saved.
    Put(PutCheckpoint),
    /// LangGraph's store operations, on the items of the thread's owner.
    Store { ops: Vec<StoreOp> },
    /// The thread's files (deep agents).
    Files(FilesCall),
    /// A command in a sandbox over the thread's files.
    Execute {
        command: String,
        timeout: Option<u64>,
        span_parent: Option<String>,
    },
    /// A slot for a subagent delegation.
    Subagent {},
}

/// One of LangGraph's store operations (`BaseStore.batch`'s `GetOp`, `PutOp`, `SearchOp`,
/// `ListNamespacesOp`), as a runner sends them and as a Rust node's store asks them, on the items
/// of the run's thread's owner.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum StoreOp {
    Get {
        namespace: Vec<String>,
        key: String,
        #[serde(default = "refreshes")]
        refresh_ttl: bool,
    },
    /// A `value` of `null` deletes the item.
    Put {
        namespace: Vec<String>,
        key: String,
        value: Value,
        /// Minutes; none: the item keeps no time to live.
        #[serde(default)]
        ttl: Option<f64>,
        /// The fields to embed (LangGraph's `index`: a list of paths, or `false`); none: the
        /// project's `store.index` fields.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        index: Option<Value>,
        /// The vectors of its embedded fields, when the runner embedded them itself (a project's
        /// `store.index`); none: the worker embeds it, if the project has an index.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        embedded: Option<Vec<mostrador_queue::data::store::Embedded>>,
    },
    Search {
        namespace_prefix: Vec<String>,
        #[serde(default)]
        filter: Option<Value>,
        limit: i64,
        offset: i64,
        #[serde(default = "refreshes")]
        refresh_ttl: bool,
        /// A query to rank by meaning, embedded by the worker.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        query: Option<String>,
        /// The query's embedding, when the runner embedded it itself.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        query_vector: Option<Vec<f32>>,
    },
    ListNamespaces {
        #[serde(default)]
        prefix: Vec<String>,
        #[serde(default)]
        suffix: Vec<String>,
        #[serde(default)]
        max_depth: Option<i32>,
        limit: i64,
        offset: i64,
    },
}

/// LangGraph's default: reading an item refreshes its time to live.
fn refreshes() -> bool {
    true
}

/// An operation on the thread's files.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case", deny_unknown_fields)]
pub enum FilesCall {
    List {
        path: String,
    },
    Read {
        path: String,
    },
    ReadUnder {
        path: String,
    },
    Write {
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        files: Vec<FileJson>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        deleted: Vec<String>,
    },
}

/// A file written: its content as text, or base64 (`encoding`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileJson {
    pub path: String,
    pub content: String,
    pub encoding: String,
}

/// What a run tells the worker without waiting.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum Cast {
    /// The input's checkpoint: written with the next one.
    Put(PutCheckpoint),
    /// A task's writes: written with the checkpoint that follows them.
    PutWrites(PutWrites),
    /// A checkpoint described with the graph, for the api.
    Describe {
        checkpoint_id: Uuid,
        snapshot: Value,
    },
    /// A subagent's slot is free again.
    SubagentDone { slot: u64 },
    /// A span of a model call, a tool call or a delegation opens or closes.
    Span(SpanJson),
}

/// A checkpoint as LangGraph saved it: its channels' new values as LangGraph serialized them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PutCheckpoint {
    pub ns: String,
    pub checkpoint_id: Uuid,
    pub parent_checkpoint_id: Option<Uuid>,
    /// The checkpoint without its values.
    pub saved: Value,
    pub metadata: Value,
    pub blobs: Vec<BlobJson>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BlobJson {
    pub channel: String,
    pub version: i64,
    /// LangGraph's serializer's type (`empty`: the channel has no value).
    #[serde(rename = "type")]
    pub kind: String,
    /// Base64.
    pub bytes: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PutWrites {
    pub ns: String,
    pub checkpoint_id: Uuid,
    pub writes: Vec<WriteJson>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WriteJson {
    pub task_id: String,
    pub task_path: String,
    pub idx: i32,
    pub channel: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub bytes: String,
}

/// A span's start (its parent, name, kind and what it calls) or end (its error).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "phase", rename_all = "snake_case", deny_unknown_fields)]
pub enum SpanJson {
    Start {
        id: String,
        parent: Option<String>,
        name: String,
        kind: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        subagent: Option<String>,
    },
    End {
        id: String,
        error: Option<String>,
    },
}

/// A checkpoint read back for the runner.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SavedJson {
    pub ns: String,
    pub checkpoint_id: Uuid,
    pub parent_checkpoint_id: Option<Uuid>,
    pub saved: Value,
    pub metadata: Value,
    pub blobs: Vec<BlobJson>,
    pub writes: Vec<SavedWriteJson>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SavedWriteJson {
    pub task_id: String,
    pub channel: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub bytes: String,
}

/// How a run ended in its runner.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Outcome {
    Success,
    /// It stopped at an interrupt.
    Interrupted,
    Cancelled,
    /// It stopped at a superstep boundary for a drain.
    Drained {
        reason: String,
    },
    /// It raised: `retryable` when the next attempt may succeed (its checkpointer failed, it ran
    /// out of memory); `retire` when its process should take no new run.
    Error {
        error: String,
        message: String,
        retryable: bool,
        retire: bool,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLES: &str = include_str!("../../python/protocol-examples.json");

    /// Every example of `direction`, parsed as `T` and written back.
    fn round_trips<T: Serialize + for<'de> Deserialize<'de>>(direction: &str) -> Vec<String> {
        let examples: Value = serde_json::from_str(EXAMPLES).expect("the examples are JSON");
        let mut kinds = Vec::new();
        for example in examples[direction]
            .as_array()
            .expect("a list per direction")
        {
            let parsed: T = serde_json::from_value(example.clone())
                .unwrap_or_else(|err| panic!("{direction}: {example} is no message here: {err}"));
            let written = serde_json::to_value(&parsed).expect("a message serializes");
            assert_eq!(&written, example, "{direction}: written back otherwise");
            let op = ["call", "cast"]
                .iter()
                .find_map(|key| example[key]["op"].as_str())
                .map_or(String::new(), |op| format!(".{op}"));
            kinds.push(format!("{}{op}", example["t"].as_str().unwrap_or_default()));
        }
        kinds
    }

    #[test]
    fn every_message_of_the_protocol_is_one_of_the_workers_types_field_for_field() {
        let to = round_trips::<ToRunner>("to_runner");
        let from = round_trips::<FromRunner>("from_runner");
        for kind in ["start", "reply", "drain", "cancel", "describe"] {
            assert!(to.iter().any(|k| k == kind), "no example of {kind}");
        }
        for kind in [
            "ready",
            "described",
            "blocked",
            "call.get",
            "call.list",
            "call.put",
            "call.store",
            "call.files",
            "call.execute",
            "call.subagent",
            "cast.put",
            "cast.put_writes",
            "cast.describe",
            "cast.subagent_done",
            "cast.span",
            "event",
            "done",
        ] {
            assert!(from.iter().any(|k| k == kind), "no example of {kind}");
        }
    }

    #[test]
    fn a_field_the_worker_does_not_know_is_refused() {
        let unknown = serde_json::json!({"t": "cancel", "run": 1, "why": "no such field"});
        assert!(serde_json::from_value::<ToRunner>(unknown).is_err());
        let unknown = serde_json::json!({"t": "call", "run": 1, "id": 2, "call": {"op": "get", "ns": "", "checkpoint_id": null, "at": 3}});
        assert!(serde_json::from_value::<FromRunner>(unknown).is_err());
    }
}
