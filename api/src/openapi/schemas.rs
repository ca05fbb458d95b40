//! JSON Schemas of the document: those named in `components`, the request bodies, and the small
//! builders the route table ([`io`](super::io)) is written with.

use serde_json::{Value, json};

/// Schemas named in `components`, referenced from [`io`](super::io::io).
pub(super) fn named_schemas() -> Vec<(&'static str, Value)> {
    let string = || json!({"type": "string"});
    let object = || json!({"type": "object"});
    let uuid = || json!({"type": "string", "format": "uuid"});
    let time = || json!({"type": "string", "format": "date-time"});
    let nullable_time = || json!({"type": ["string", "null"], "format": "date-time"});
    vec![
        (
            "Error",
            json!({
                "type": "object",
                "required": ["detail"],
                "properties": {"detail": string()},
            }),
        ),
        (
            "Assistant",
            json!({
                "type": "object",
                "required": [
                    "assistant_id", "graph_id", "config", "context", "metadata", "name",
                    "version", "created_at", "updated_at",
                ],
                "properties": {
                    "assistant_id": uuid(),
                    "graph_id": string(),
                    "config": object(),
                    "context": object(),
                    "metadata": object(),
                    "name": string(),
                    "description": {"type": ["string", "null"]},
                    "version": {"type": "integer"},
                    "created_at": time(),
                    "updated_at": time(),
                },
            }),
        ),
        (
            "Thread",
            json!({
                "type": "object",
                "required": [
                    "thread_id", "created_at", "updated_at", "metadata", "status", "values",
                    "interrupts",
                ],
                "properties": {
                    "thread_id": uuid(),
                    "created_at": time(),
                    "updated_at": time(),
                    "state_updated_at": time(),
                    "metadata": object(),
                    "status": {"type": "string", "enum": ["idle", "busy", "interrupted", "error"]},
                    "config": object(),
                    "values": {"type": ["object", "null"]},
                    "interrupts": {
                        "type": "object",
                        "description": "Pending interrupts by task id.",
                        "additionalProperties": {"type": "array", "items": object()},
                    },
                    "error": {"type": "null"},
                },
            }),
        ),
        (
            "ThreadState",
            json!({
                "type": "object",
                "required": ["values", "next", "tasks", "checkpoint", "interrupts"],
                "properties": {
                    "values": object(),
                    "next": {"type": "array", "items": string()},
                    "tasks": {"type": "array", "items": object()},
                    "metadata": any(),
                    "created_at": nullable_time(),
                    "checkpoint": {"type": ["object", "null"]},
                    "parent_checkpoint": {"type": ["object", "null"]},
                    "interrupts": {"type": "array", "items": object()},
                    "checkpoint_id": {"type": ["string", "null"], "format": "uuid"},
                    "parent_checkpoint_id": {"type": ["string", "null"], "format": "uuid"},
                },
            }),
        ),
        (
            "Run",
            json!({
                "type": "object",
                "required": [
                    "run_id", "thread_id", "assistant_id", "status", "metadata", "kwargs",
                    "multitask_strategy", "created_at", "updated_at",
                ],
                "properties": {
                    "run_id": uuid(),
                    "thread_id": uuid(),
                    "assistant_id": uuid(),
                    "metadata": object(),
                    "status": {"type": "string", "enum": RUN_STATUSES},
                    "kwargs": object(),
                    "multitask_strategy": {"type": "string", "enum": MULTITASK_STRATEGIES},
                    "created_at": time(),
                    "updated_at": time(),
                },
            }),
        ),
        (
            "Cron",
            json!({
                "type": "object",
                "required": [
                    "cron_id", "assistant_id", "user_id", "schedule", "payload", "enabled",
                    "created_at", "updated_at",
                ],
                "properties": {
                    "cron_id": uuid(),
                    "assistant_id": uuid(),
                    "thread_id": {"type": ["string", "null"], "format": "uuid"},
                    "user_id": string(),
                    "schedule": string(),
                    "timezone": {"type": ["string", "null"], "description": "IANA; null: UTC."},
                    "payload": object(),
                    "metadata": object(),
                    "enabled": {"type": "boolean"},
                    "end_time": nullable_time(),
                    "next_run_date": nullable_time(),
                    "on_run_completed": string(),
                    "created_at": time(),
                    "updated_at": time(),
                },
            }),
        ),
        ("RunRequest", run_request()),
        ("CronRequest", cron_request()),
        ("CronPatch", cron_patch()),
        ("CronSearch", cron_search()),
    ]
}

const RUN_STATUSES: &[&str] = &[
    "pending",
    "running",
    "success",
    "error",
    "timeout",
    "interrupted",
];

const MULTITASK_STRATEGIES: &[&str] = &["reject", "interrupt", "rollback", "enqueue"];

/// `POST /threads/{thread_id}/runs` and its stream, wait, stateless and batch forms.
fn run_request() -> Value {
    json!({
        "type": "object",
        "required": ["assistant_id"],
        "properties": {
            "assistant_id": {"type": "string", "description": "An assistant id or a graph id."},
            "input": any(),
            "command": {
                "type": ["object", "null"],
                "description": "`resume`, on a thread that waits (a manager's decision for the \
                    retail graphs); `goto` and `update` for Python graphs only (422 otherwise).",
                "properties": {"resume": any(), "goto": any(), "update": any()},
            },
            "stream_mode": stream_modes(),
            "stream_subgraphs": {
                "type": ["boolean", "null"],
                "description": "Namespaced events (`mode|<node>:<task id>`) from subgraphs.",
            },
            "metadata": {"type": ["object", "null"]},
            "config": {
                "type": ["object", "null"],
                "properties": {
                    "recursion_limit": {"type": "integer", "minimum": 1, "maximum": 10000},
                    "max_concurrency": {"type": "integer", "minimum": 1, "maximum": 4294967295_u64},
                    "configurable": object_schema(),
                },
            },
            "context": {
                "type": ["object", "null"],
                "description": "`config.configurable`, when config has none (400 with both).",
            },
            "checkpoint": {
                "type": ["object", "null"],
                "properties": {
                    "checkpoint_id": {"type": ["string", "null"], "format": "uuid"},
                    "checkpoint_ns": {"type": ["string", "null"], "enum": ["", null]},
                },
                "description": "Start from this checkpoint of the thread (Python graphs; 422 for the others when it names one).",
            },
            "checkpoint_id": {
                "type": ["string", "null"],
                "format": "uuid",
                "description": "The same, by id.",
            },
            "interrupt_before": interrupt_nodes(),
            "interrupt_after": interrupt_nodes(),
            "webhook": {"type": ["string", "null"], "format": "uri", "description": "POSTed the run and its final values once it ends; a host the operator allows (MOSTRADOR_WEBHOOK_HOSTS), else 422."},
            "multitask_strategy": nullable_enum(MULTITASK_STRATEGIES),
            "if_not_exists": nullable_enum(&["reject", "create"]),
            "on_completion": nullable_enum(&["delete", "keep"]),
            "on_disconnect": {
                "type": ["string", "null"],
                "enum": ["cancel", "continue", null],
                "description": "What a client that goes away before the run's end does to it, on the stream and wait forms: `cancel` cancels it (interrupt); `continue` (the default) lets it go on.",
            },
            "after_seconds": {"type": ["number", "null"], "minimum": 0},
            "durability": nullable_enum(&["sync", "async", "exit"]),
        },
    })
}

/// `POST /runs/crons` and `POST /threads/{thread_id}/runs/crons`.
fn cron_request() -> Value {
    json!({
        "type": "object",
        "required": ["assistant_id", "schedule"],
        "properties": {
            "assistant_id": {"type": "string", "description": "An assistant id or a graph id."},
            "schedule": {"type": "string", "description": "Five fields, read in `timezone`.", "example": "*/5 * * * *"},
            "input": {"type": ["object", "null"]},
            "config": {"type": ["object", "null"]},
            "metadata": {"type": ["object", "null"]},
            "context": unsupported(),
            "end_time": {"type": ["string", "null"], "format": "date-time"},
            "enabled": {"type": ["boolean", "null"]},
            "timezone": {"type": ["string", "null"], "description": "IANA (Europe/Madrid); null: UTC.", "example": "Europe/Madrid"},
            "stream_mode": stream_modes(),
            "multitask_strategy": nullable_enum(MULTITASK_STRATEGIES),
            "on_run_completed": nullable_enum(&["keep"]),
            "webhook": {"type": ["string", "null"], "format": "uri", "description": "POSTed the run and its final values once it ends; a host the operator allows (MOSTRADOR_WEBHOOK_HOSTS), else 422."},
            "interrupt_before": unsupported(),
            "interrupt_after": unsupported(),
        },
    })
}

/// `PATCH /runs/crons/{cron_id}`: what changes.
fn cron_patch() -> Value {
    json!({
        "type": "object",
        "minProperties": 1,
        "properties": {
            "schedule": {"type": ["string", "null"], "example": "0 9 * * mon-fri"},
            "timezone": {"type": ["string", "null"], "example": "Europe/Madrid"},
            "end_time": {"type": ["string", "null"], "format": "date-time", "description": "null clears it."},
            "input": {"type": ["object", "null"]},
            "config": {"type": ["object", "null"]},
            "metadata": {"type": ["object", "null"]},
            "enabled": {"type": ["boolean", "null"]},
            "stream_mode": stream_modes(),
            "on_run_completed": nullable_enum(&["keep"]),
            "context": unsupported(),
            "webhook": {"type": ["string", "null"], "format": "uri", "description": "POSTed the run and its final values once it ends; a host the operator allows (MOSTRADOR_WEBHOOK_HOSTS), else 422."},
            "interrupt_before": unsupported(),
            "interrupt_after": unsupported(),
        },
    })
}

/// `POST /runs/crons/search` and `/count`.
fn cron_search() -> Value {
    json!({
        "type": "object",
        "properties": {
            "assistant_id": {"type": ["string", "null"]},
            "thread_id": {"type": ["string", "null"]},
            "enabled": {"type": ["boolean", "null"]},
            "limit": limit(10),
            "offset": offset(),
            "sort_by": unsupported(),
            "sort_order": unsupported(),
            "select": unsupported(),
        },
    })
}

pub(super) fn assistant_search() -> Value {
    json!({
        "type": "object",
        "properties": {
            "limit": limit(10),
            "offset": offset(),
            "graph_id": {"type": ["string", "null"]},
            "name": {"type": ["string", "null"]},
            "metadata": {"type": ["object", "null"]},
            "sort_by": {
                "type": ["string", "null"],
                "enum": ["assistant_id", "graph_id", "name", "created_at", "updated_at", null],
            },
            "sort_order": {"type": ["string", "null"], "enum": ["asc", "desc", null]},
        },
    })
}

/// The body of `POST /assistants` (`create`) and, without `graph_id` required, of `PATCH`.
pub(super) fn assistant_body(create: bool) -> Value {
    let mut body = json!({
        "type": "object",
        "properties": {
            "graph_id": {"type": "string"},
            "config": {"type": ["object", "null"]},
            "context": {"type": ["object", "null"]},
            "metadata": {"type": ["object", "null"]},
            "name": {"type": ["string", "null"]},
            "description": {"type": ["string", "null"]},
        },
    });
    if create {
        body["required"] = json!(["graph_id"]);
        body["properties"]["assistant_id"] = json!({"type": ["string", "null"], "format": "uuid"});
        body["properties"]["if_exists"] =
            json!({"type": ["string", "null"], "enum": ["raise", "do_nothing", null]});
    } else {
        body["properties"]["graph_id"] = json!({"type": ["string", "null"]});
    }
    body
}

pub(super) fn thread_create() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "properties": {
            "thread_id": {
                "type": ["string", "null"],
                "format": "uuid",
                "description": "The client's choice of id; the server chooses one when absent. \
                    An id a thread has already, whoever's, is a 409.",
            },
            "metadata": {
                "type": ["object", "null"],
                "properties": {
                    "graph_id": {
                        "type": ["string", "null"],
                        "description": "Binds the thread to this graph (404 when there is none).",
                    },
                },
            },
            "if_exists": nullable_enum(&["raise", "do_nothing"]),
            "supersteps": unsupported(),
            "ttl": unsupported(),
        },
    })
}

pub(super) fn thread_search() -> Value {
    json!({
        "type": "object",
        "properties": {
            "limit": limit(10),
            "offset": offset(),
            "metadata": {"type": ["object", "null"]},
            "values": unsupported(),
            "ids": {"type": ["array", "null"], "items": {"type": "string", "format": "uuid"}},
            "status": nullable_enum(&["idle", "busy", "interrupted", "error"]),
            "sort_by": nullable_enum(&[
                "thread_id",
                "status",
                "created_at",
                "updated_at",
                "state_updated_at",
            ]),
            "sort_order": nullable_enum(&["asc", "desc"]),
            "select": {
                "type": ["array", "null"],
                "items": {"type": "string", "enum": [
                    "thread_id", "created_at", "updated_at", "state_updated_at", "metadata",
                    "status", "config", "values", "interrupts", "error",
                ]},
                "description": "The fields to answer (a search only; all when absent).",
            },
        },
    })
}

/// Any JSON value. (utoipa reads a schema without a type from `"type": null`.)
pub(super) fn any() -> Value {
    json!({"type": null})
}

fn object_schema() -> Value {
    json!({"type": "object"})
}

/// A field the server refuses (422) unless it is missing or null.
/// `interrupt_before` / `interrupt_after` of a run: Python graphs only (422 for the others).
fn interrupt_nodes() -> Value {
    json!({
        "description": "`\"*\"` or node names; Python graphs only (422 for the others).",
        "anyOf": [{"type": "null"}, {"type": "string"}, {"type": "array", "items": {"type": "string"}}],
    })
}

pub(super) fn unsupported() -> Value {
    json!({"type": "null", "description": "Not supported: omit it, or send null."})
}

pub(super) fn nullable_enum(names: &[&str]) -> Value {
    let mut values: Vec<Value> = names.iter().map(|name| json!(name)).collect();
    values.push(Value::Null);
    json!({"type": ["string", "null"], "enum": values})
}

pub fn limit(default: i64) -> Value {
    json!({"type": "integer", "minimum": 1, "maximum": 1000, "default": default})
}

pub fn offset() -> Value {
    json!({"type": "integer", "format": "int64", "minimum": 0, "default": 0})
}

pub(super) fn stream_mode_name() -> Value {
    json!({
        "type": "string",
        "enum": [
            "values", "updates", "messages", "messages-tuple", "custom", "tasks", "checkpoints",
            "debug", "events",
        ],
    })
}

/// One stream mode or a list of them.
fn stream_modes() -> Value {
    json!({
        "anyOf": [
            stream_mode_name(),
            {"type": "array", "items": stream_mode_name()},
            {"type": "null"},
        ],
    })
}

pub(super) fn run_status_filter() -> Value {
    let mut names: Vec<&str> = RUN_STATUSES.to_vec();
    names.push("");
    json!({"type": "string", "enum": names, "description": "Runs of this status only; all when empty."})
}

pub fn array(items: Value) -> Value {
    json!({"type": "array", "items": items})
}

pub fn reference(name: &str) -> Value {
    json!({"$ref": format!("#/components/schemas/{name}")})
}

pub fn query(name: &str, schema: Value) -> Value {
    json!({"name": name, "in": "query", "required": false, "schema": schema})
}

pub(super) fn header(name: &str, schema: Value, description: &str) -> Value {
    json!({
        "name": name,
        "in": "header",
        "required": false,
        "schema": schema,
        "description": description,
    })
}

/// A path parameter: an id the handler parses as a UUID (anything else is a 404), except an
/// assistant's, which may also be its graph id.
pub(super) fn path_parameter(name: &str) -> Value {
    let schema = if name == "assistant_id" || name == "namespace" {
        json!({"type": "string"})
    } else {
        json!({"type": "string", "format": "uuid"})
    };
    json!({"name": name, "in": "path", "required": true, "schema": schema})
}
