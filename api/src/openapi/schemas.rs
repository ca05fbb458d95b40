//! The second table of the document: what each route of [`ROUTES`](super::ROUTES) takes and
//! answers, in JSON Schema, and the schemas named in `components`.

use serde_json::{Value, json};

/// What a route takes besides its path parameters, and what its success answers carry.
pub(super) struct Io {
    /// Query and header parameters, as OpenAPI parameter objects.
    pub(super) parameters: Vec<Value>,
    /// The schema of its JSON body, for a route that reads one.
    pub(super) body: Option<Value>,
    /// The content of its 200: media types and their schemas.
    pub(super) ok: Value,
}

impl Io {
    fn json(schema: Value) -> Self {
        Self {
            parameters: Vec::new(),
            body: None,
            ok: json!({"application/json": {"schema": schema}}),
        }
    }

    /// Text of another media type.
    fn text(media_type: &str) -> Self {
        Self {
            ok: json!({media_type: {"schema": {"type": "string"}}}),
            ..Self::json(any())
        }
    }

    /// Server-sent events (`metadata` first, then the run's), each with JSON data and, but for
    /// `metadata`, its `seq` as `id`. Keep-alives are comments.
    fn events() -> Self {
        Self {
            ok: json!({"text/event-stream": {"itemSchema": {
                "type": "object",
                "required": ["event", "data"],
                "properties": {
                    "event": {"type": "string"},
                    "data": {"type": "string", "contentMediaType": "application/json"},
                    "id": {"type": "string", "pattern": "^[0-9]+$"},
                },
            }}}),
            ..Self::json(any())
        }
    }

    fn body(self, schema: Value) -> Self {
        Self {
            body: Some(schema),
            ..self
        }
    }

    fn parameters(self, parameters: Vec<Value>) -> Self {
        Self { parameters, ..self }
    }
}

/// The second table: what each route of [`ROUTES`](super::ROUTES) takes and answers, by method
/// and path.
pub(super) fn io(method: &str, path: &str) -> Io {
    let run_request = || reference("RunRequest");
    let final_state = || {
        json!({
            "type": "object",
            "description": "The thread's values once the run ended (with `__interrupt__` when it \
                waits for a decision), or `{\"__error__\": ...}` when it failed. Blank lines \
                precede it while the run goes on.",
        })
    };
    match (method, path) {
        ("post", "/assistants/search") => {
            Io::json(array(reference("Assistant"))).body(assistant_search())
        }
        ("get", "/assistants/{assistant_id}") => Io::json(reference("Assistant")),
        ("get", "/assistants/{assistant_id}/graph") => Io::json(json!({
            "type": "object",
            "required": ["nodes", "edges"],
            "properties": {
                "nodes": {"type": "array", "items": {"type": "object"}},
                "edges": {"type": "array", "items": {"type": "object"}},
            },
        })),
        ("get", "/assistants/{assistant_id}/schemas") => Io::json(json!({
            "type": "object",
            "required": ["graph_id", "input_schema", "output_schema", "state_schema"],
            "properties": {"graph_id": {"type": "string"}},
        })),
        ("post", "/threads") => Io::json(reference("Thread")).body(thread_create()),
        ("post", "/threads/search") => Io::json(array(reference("Thread"))).body(thread_search()),
        ("post", "/threads/prune") => Io::json(json!({
            "type": "object",
            "required": ["pruned_count"],
            "properties": {"pruned_count": {"type": "integer", "minimum": 0}},
        }))
        .body(json!({
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "thread_ids": {
                    "type": "array",
                    "maxItems": 1000,
                    "items": {"type": "string"},
                    "description": "Ids of threads the caller may not see are passed over.",
                },
                "strategy": nullable_enum(&["delete", "keep_latest"]),
            },
        })),
        ("post", "/threads/{thread_id}/copy") | ("get", "/threads/{thread_id}") => {
            Io::json(reference("Thread"))
        }
        ("patch", "/threads/{thread_id}") => Io::json(reference("Thread"))
            .parameters(vec![header(
                "Prefer",
                json!({"type": "string"}),
                "`return=minimal` answers 204 instead of the thread.",
            )])
            .body(json!({
                "type": "object",
                "additionalProperties": false,
                "required": ["metadata"],
                "properties": {
                    "metadata": {
                        "type": "object",
                        "description": "Merged into the thread's; `graph_id` may not change.",
                    },
                    "ttl": unsupported(),
                },
            })),
        ("get", "/threads/{thread_id}/state" | "/threads/{thread_id}/state/{checkpoint_id}") => {
            Io::json(reference("ThreadState"))
        }
        ("post", "/threads/{thread_id}/state") => Io::json(json!({
            "type": "object",
            "required": ["checkpoint", "checkpoint_id"],
            "properties": {
                "checkpoint": {"type": "object"},
                "configurable": {"type": "object"},
                "checkpoint_id": {"type": "string", "format": "uuid"},
            },
        }))
        .body(json!({
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "values": {"type": ["object", "null"]},
                "as_node": {"type": ["string", "null"]},
                "checkpoint_id": unsupported(),
                "checkpoint": unsupported(),
            },
        })),
        ("post", "/threads/{thread_id}/history") => Io::json(array(reference("ThreadState")))
            .body(json!({
                "type": "object",
                "additionalProperties": false,
                "properties": {
                    "limit": limit(10),
                    "before": {
                        "anyOf": [
                            {"type": "string", "format": "uuid"},
                            {
                                "type": "object",
                                "properties": {"checkpoint_id": {"type": "string", "format": "uuid"}},
                            },
                            {"type": "null"},
                        ],
                        "description": "A checkpoint id, or a checkpoint with one.",
                    },
                    "metadata": unsupported(),
                    "checkpoint": unsupported(),
                    "select": any(),
                },
            })),
        ("get", "/threads/{thread_id}/runs") => Io::json(array(reference("Run")))
            .parameters(vec![
                query("limit", limit(10)),
                query("offset", offset()),
                query("status", run_status_filter()),
            ]),
        ("post", "/threads/{thread_id}/runs" | "/runs") => {
            Io::json(reference("Run")).body(run_request())
        }
        ("post", "/threads/{thread_id}/runs/stream" | "/runs/stream") => {
            Io::events().body(run_request())
        }
        ("post", "/threads/{thread_id}/runs/wait" | "/runs/wait") => {
            Io::json(final_state()).body(run_request())
        }
        ("get", "/threads/{thread_id}/runs/{run_id}") => Io::json(reference("Run")),
        ("get", "/threads/{thread_id}/runs/{run_id}/stream") => Io::events()
            .parameters(vec![
                json!({
                    "name": "stream_mode",
                    "in": "query",
                    "required": false,
                    "style": "form",
                    "explode": true,
                    "schema": {"type": "array", "items": stream_mode_name()},
                    "description": "The modes to stream; all the run's when none.",
                }),
                header(
                    "Last-Event-ID",
                    json!({"type": "integer", "format": "int64", "minimum": 0}),
                    "The `id` of the last event received: the stream resumes after it.",
                ),
            ]),
        ("get", "/threads/{thread_id}/runs/{run_id}/join") => Io::json(final_state()),
        ("post", "/threads/{thread_id}/runs/{run_id}/cancel") => Io::json(final_state())
            .parameters(vec![
                query("action", json!({"type": "string", "enum": ["interrupt", "rollback"]})),
                query(
                    "wait",
                    json!({"type": "string", "enum": ["0", "1", "false", "true", ""]}),
                ),
            ]),
        ("get", "/approvals") => Io::json(array(reference("Approval"))).parameters(vec![
            query(
                "status",
                json!({"type": "string", "enum": ["pending", "approved", "rejected"]}),
            ),
            query("limit", limit(50)),
            query("offset", offset()),
        ]),
        ("get", "/approvals/{approval_id}") => Io::json(reference("Approval")),
        ("post", "/runs/crons" | "/threads/{thread_id}/runs/crons") => {
            Io::json(reference("Cron")).body(reference("CronRequest"))
        }
        ("post", "/runs/crons/search") => {
            Io::json(array(reference("Cron"))).body(reference("CronSearch"))
        }
        ("post", "/runs/crons/count") => {
            Io::json(json!({"type": "integer", "minimum": 0})).body(reference("CronSearch"))
        }
        ("post", "/runs/batch") => Io::json(array(reference("Run"))).body(json!({
            "type": "array",
            "minItems": 1,
            "maxItems": 1000,
            "items": run_request(),
        })),
        ("get", "/runs/recent") => Io::json(array(reference("Run"))).parameters(vec![
            query("limit", limit(20)),
            query("status", run_status_filter()),
        ]),
        ("get", "/queue") => Io::json(json!({
            "type": "object",
            "required": ["at", "depth", "workers"],
            "properties": {
                "at": {"type": "string", "format": "date-time"},
                "depth": array(json!({
                    "type": "object",
                    "required": ["graph_id", "status", "runs"],
                    "properties": {
                        "graph_id": {"type": "string"},
                        "status": {"type": "string", "enum": ["pending", "running"]},
                        "runs": {"type": "integer", "minimum": 1},
                    },
                })),
                "workers": array(json!({
                    "type": "object",
                    "required": ["worker_id", "name", "graphs", "started_at", "heartbeat_at", "running"],
                    "properties": {
                        "worker_id": {"type": "string", "format": "uuid"},
                        "name": {"type": "string"},
                        "graphs": array(json!({"type": "string"})),
                        "started_at": {"type": "string", "format": "date-time"},
                        "heartbeat_at": {"type": "string", "format": "date-time"},
                        "running": {"type": "integer", "minimum": 0},
                    },
                })),
            },
        })),
        ("get", "/") => Io::text("text/html"),
        ("get", "/ok") => Io::json(json!({
            "type": "object",
            "required": ["ok"],
            "properties": {"ok": {"type": "boolean"}},
        })),
        ("get", "/live" | "/ready") => Io::text("text/plain"),
        ("get", "/metrics") => Io::text("application/openmetrics-text"),
        // Answers nothing at 200.
        _ => Io::json(any()),
    }
}

/// Schemas named in `components`, referenced from [`io`].
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
                    "timezone": string(),
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
        (
            "Approval",
            json!({
                "type": "object",
                "required": [
                    "approval_id", "thread_id", "run_id", "store_id", "order_id", "amount",
                    "status", "created_at",
                ],
                "properties": {
                    "approval_id": uuid(),
                    "thread_id": uuid(),
                    "run_id": uuid(),
                    "store_id": string(),
                    "return_id": uuid(),
                    "order_id": string(),
                    "amount": {"type": "number"},
                    "reason": string(),
                    "status": {"type": "string", "enum": ["pending", "approved", "rejected"]},
                    "approved_amount": {"type": ["number", "null"]},
                    "note": {"type": ["string", "null"]},
                    "created_at": time(),
                    "decided_at": nullable_time(),
                },
            }),
        ),
        ("RunRequest", run_request()),
        ("CronRequest", cron_request()),
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
                "description": "Only `resume` (a manager's decision, on a thread that waits).",
                "properties": {"resume": any(), "goto": unsupported(), "update": unsupported()},
            },
            "stream_mode": stream_modes(),
            "stream_subgraphs": {"type": ["boolean", "null"], "enum": [false, null]},
            "metadata": {"type": ["object", "null"]},
            "config": {
                "type": ["object", "null"],
                "properties": {
                    "recursion_limit": {"type": "integer", "minimum": 1},
                    "max_concurrency": {"type": "integer", "minimum": 1},
                    "configurable": object_schema(),
                },
            },
            "context": {
                "type": ["object", "null"],
                "description": "`config.configurable`, when config has none (400 with both).",
            },
            "checkpoint": unsupported(),
            "checkpoint_id": unsupported(),
            "interrupt_before": unsupported(),
            "interrupt_after": unsupported(),
            "webhook": unsupported(),
            "multitask_strategy": nullable_enum(MULTITASK_STRATEGIES),
            "if_not_exists": nullable_enum(&["reject"]),
            "on_completion": nullable_enum(&["delete", "keep"]),
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
            "schedule": {"type": "string", "description": "Five fields, UTC.", "example": "*/5 * * * *"},
            "input": {"type": ["object", "null"]},
            "config": {"type": ["object", "null"]},
            "metadata": {"type": ["object", "null"]},
            "context": unsupported(),
            "end_time": {"type": ["string", "null"], "format": "date-time"},
            "enabled": {"type": ["boolean", "null"]},
            "timezone": nullable_enum(&["UTC", "Etc/UTC", "utc"]),
            "stream_mode": stream_modes(),
            "multitask_strategy": nullable_enum(MULTITASK_STRATEGIES),
            "on_run_completed": nullable_enum(&["keep"]),
            "webhook": unsupported(),
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

fn assistant_search() -> Value {
    json!({
        "type": "object",
        "properties": {
            "limit": limit(10),
            "offset": offset(),
            "graph_id": {"type": ["string", "null"]},
            "name": {"type": ["string", "null"]},
            "metadata": {"type": ["object", "null"]},
        },
    })
}

fn thread_create() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "properties": {
            "thread_id": unsupported(),
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

fn thread_search() -> Value {
    json!({
        "type": "object",
        "properties": {
            "limit": limit(10),
            "offset": offset(),
            "metadata": {"type": ["object", "null"]},
            "values": unsupported(),
            "ids": {"type": ["array", "null"], "items": {"type": "string", "format": "uuid"}},
            "status": nullable_enum(&["idle", "busy", "interrupted", "error"]),
            "sort_by": nullable_enum(&["created_at"]),
            "sort_order": nullable_enum(&["desc"]),
        },
    })
}

/// Any JSON value. (utoipa reads a schema without a type from `"type": null`.)
fn any() -> Value {
    json!({"type": null})
}

fn object_schema() -> Value {
    json!({"type": "object"})
}

/// A field the server refuses (422) unless it is missing or null.
fn unsupported() -> Value {
    json!({"type": "null", "description": "Not supported: omit it, or send null."})
}

fn nullable_enum(names: &[&str]) -> Value {
    let mut values: Vec<Value> = names.iter().map(|name| json!(name)).collect();
    values.push(Value::Null);
    json!({"type": ["string", "null"], "enum": values})
}

fn limit(default: i64) -> Value {
    json!({"type": "integer", "minimum": 1, "maximum": 1000, "default": default})
}

fn offset() -> Value {
    json!({"type": "integer", "format": "int64", "minimum": 0, "default": 0})
}

fn stream_mode_name() -> Value {
    json!({
        "type": "string",
        "enum": [
            "values", "updates", "messages", "messages-tuple", "custom", "tasks", "checkpoints",
            "debug",
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

fn run_status_filter() -> Value {
    let mut names: Vec<&str> = RUN_STATUSES.to_vec();
    names.push("");
    json!({"type": "string", "enum": names, "description": "Runs of this status only; all when empty."})
}

fn array(items: Value) -> Value {
    json!({"type": "array", "items": items})
}

pub(super) fn reference(name: &str) -> Value {
    json!({"$ref": format!("#/components/schemas/{name}")})
}

fn query(name: &str, schema: Value) -> Value {
    json!({"name": name, "in": "query", "required": false, "schema": schema})
}

fn header(name: &str, schema: Value, description: &str) -> Value {
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
    let schema = if name == "assistant_id" {
        json!({"type": "string"})
    } else {
        json!({"type": "string", "format": "uuid"})
    };
    json!({"name": name, "in": "path", "required": true, "schema": schema})
}
