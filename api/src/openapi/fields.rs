//! Schemas of request fields that their Rust type cannot say alone: a string of a few names, a
//! field only null is accepted in, one stream mode or a list of them. The request types name
//! them with `#[schema(schema_with = ...)]`, beside the field they describe.

use mostrador_queue::thread::ThreadSortKey;
use mostrador_queue::{MultitaskStrategy, ThreadStatus};
use serde_json::{Value, json};
use utoipa::openapi::{RefOr, Schema};

use super::schema;

/// A string of one of `names`, or null.
fn one_of_or_null(names: &[&str]) -> RefOr<Schema> {
    schema(super::schemas::nullable_enum(names))
}

macro_rules! nullable_names {
    ($($(#[$doc:meta])* $name:ident: [$($value:literal),+ $(,)?];)+) => {
        $(
            $(#[$doc])*
            pub(crate) fn $name() -> RefOr<Schema> {
                one_of_or_null(&[$($value),+])
            }
        )+
    };
}

nullable_names! {
    if_exists: ["raise", "do_nothing"];
    sort_order: ["asc", "desc"];
    prune_strategy: ["delete", "keep_latest"];
    durability: ["sync", "async", "exit"];
    on_run_completed: ["delete", "keep"];
}

/// A thread's status, as a search filters by it.
pub(crate) fn thread_status() -> RefOr<Schema> {
    one_of_or_null(&ThreadStatus::ALL.map(ThreadStatus::as_str))
}

/// What a thread search sorts by.
pub(crate) fn thread_sort_by() -> RefOr<Schema> {
    one_of_or_null(&ThreadSortKey::ALL.map(ThreadSortKey::as_str))
}

/// What an assistant search sorts by.
pub(crate) fn assistant_sort_by() -> RefOr<Schema> {
    one_of_or_null(&mostrador_queue::data::assistants::SORTS)
}

pub(crate) fn multitask_strategy() -> RefOr<Schema> {
    one_of_or_null(&MultitaskStrategy::ALL.map(MultitaskStrategy::as_str))
}

/// A list of some of `names` (the fields a search answers with), or null.
pub(crate) fn names_or_null(names: &[&str]) -> RefOr<Schema> {
    schema(json!({
        "type": ["array", "null"],
        "items": {"type": "string", "enum": names},
    }))
}

/// A field the server refuses (422) unless it is missing or null.
pub(crate) fn unsupported() -> RefOr<Schema> {
    schema(super::schemas::unsupported())
}

/// One stream mode or a list of them.
pub(crate) fn stream_modes() -> RefOr<Schema> {
    schema(super::schemas::stream_modes())
}

/// `interrupt_before` / `interrupt_after` of a run: Python graphs only (422 for the others).
pub(crate) fn interrupt_nodes() -> RefOr<Schema> {
    schema(json!({
        "description": "`\"*\"` or node names; Python graphs only (422 for the others).",
        "anyOf": [{"type": "null"}, {"type": "string"}, {"type": "array", "items": {"type": "string"}}],
    }))
}

/// A checkpoint as a run, a state update or RemoteGraph names one: its id, in the graph's own
/// namespace (`''`).
pub(crate) fn checkpoint() -> RefOr<Schema> {
    schema(json!({
        "type": ["object", "null"],
        "properties": {
            "checkpoint_id": {"type": ["string", "null"], "format": "uuid"},
            "checkpoint_ns": {"type": ["string", "null"], "enum": ["", null]},
        },
    }))
}

/// A run's `config`.
pub(crate) fn run_config() -> RefOr<Schema> {
    schema(json!({
        "type": ["object", "null"],
        "properties": {
            "recursion_limit": {"type": "integer", "minimum": 1, "maximum": 10000},
            "max_concurrency": {"type": "integer", "minimum": 1, "maximum": 4294967295_u64},
            "configurable": {"type": "object"},
        },
    }))
}

/// A UUID, or null.
pub(crate) fn nullable_uuid() -> RefOr<Schema> {
    schema(json!({"type": ["string", "null"], "format": "uuid"}))
}

/// A URL the run's outcome is POSTed to.
pub(crate) fn webhook() -> RefOr<Schema> {
    schema(json!({
        "type": ["string", "null"],
        "format": "uri",
        "description": "POSTed the run and its final values once it ends; a host the operator \
            allows (MOSTRADOR_WEBHOOK_HOSTS), else 422.",
    }))
}

/// A Store namespace: labels that are non-empty and have no period, at least `min_items`.
fn namespace(min_items: u64, nullable: bool) -> RefOr<Schema> {
    let kind: Value = if nullable {
        json!(["array", "null"])
    } else {
        json!("array")
    };
    schema(json!({
        "type": kind,
        "minItems": min_items,
        "items": {"type": "string", "pattern": "^[^.]+$"},
    }))
}

/// The namespace of an item.
pub(crate) fn item_namespace() -> RefOr<Schema> {
    namespace(1, false)
}

/// A namespace's first labels (none: every namespace).
pub(crate) fn namespace_prefix() -> RefOr<Schema> {
    namespace(0, false)
}

/// The same, or null.
pub(crate) fn nullable_namespace_prefix() -> RefOr<Schema> {
    namespace(0, true)
}

/// Minutes an item of the Store lives: more than none, at most a century.
pub(crate) fn item_ttl() -> RefOr<Schema> {
    schema(json!({
        "type": ["number", "null"],
        "exclusiveMinimum": 0,
        "maximum": mostrador_queue::data::store::MAX_TTL_MINUTES,
    }))
}

/// A run status, or empty (every status).
pub(crate) fn run_status_filter() -> RefOr<Schema> {
    schema(super::schemas::run_status_filter())
}

/// What a cancel does to the run: stops it where it is (`interrupt`, the default) or deletes it
/// and its checkpoints (`rollback`).
pub(crate) fn cancel_action() -> RefOr<Schema> {
    schema(json!({"type": "string", "enum": ["interrupt", "rollback"]}))
}

/// Whether a cancel answers once the run has ended (`1`, `true`).
pub(crate) fn cancel_wait() -> RefOr<Schema> {
    schema(json!({"type": "string", "enum": ["0", "1", "false", "true", ""]}))
}
