//! The second table of the document: what each route of [`ROUTES`](super::ROUTES) takes and
//! answers.

use serde_json::{Value, json};

use super::schemas::{
    any, array, assistant_body, assistant_search, header, limit, nullable_enum, offset, query,
    reference, run_status_filter, stream_mode_name, thread_create, thread_search, unsupported,
};

/// What a route takes besides its path parameters, and what its success answers carry.
#[derive(Debug, Clone)]
pub struct Io {
    /// Query and header parameters, as OpenAPI parameter objects.
    pub(super) parameters: Vec<Value>,
    /// The schema of its JSON body, for a route that reads one.
    pub(super) body: Option<Value>,
    /// The content of its 200: media types and their schemas.
    pub(super) ok: Value,
}

impl Io {
    /// A route that answers JSON of this schema.
    pub fn json(schema: Value) -> Self {
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

    /// With a JSON body of this schema.
    #[must_use]
    pub fn body(self, schema: Value) -> Self {
        Self {
            body: Some(schema),
            ..self
        }
    }

    /// With these query and header parameters.
    #[must_use]
    pub fn parameters(self, parameters: Vec<Value>) -> Self {
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
        ("post", "/assistants") => Io::json(reference("Assistant")).body(assistant_body(true)),
        ("patch", "/assistants/{assistant_id}") => {
            Io::json(reference("Assistant")).body(assistant_body(false))
        }
        ("post", "/assistants/count") => Io::json(json!({"type": "integer"})).body(assistant_search()),
        ("post", "/assistants/{assistant_id}/versions") => Io::json(array(json!({
            "type": "object",
            "description": "An assistant as it was at a version (no `updated_at`: a version is made once).",
            "required": [
                "assistant_id", "graph_id", "config", "context", "metadata", "name", "version",
                "created_at",
            ],
        })))
            .body(json!({
                "type": "object",
                "properties": {
                    "metadata": {"type": ["object", "null"]},
                    "limit": limit(10),
                    "offset": offset(),
                },
            })),
        ("post", "/assistants/{assistant_id}/latest") => Io::json(reference("Assistant")).body(json!({
            "type": "object",
            "required": ["version"],
            "properties": {"version": {"type": "integer", "minimum": -2147483648, "maximum": 2147483647}},
        })),
        ("get", "/assistants/{assistant_id}/graph") => Io::json(json!({
            "type": "object",
            "required": ["nodes", "edges"],
            "properties": {
                "nodes": {"type": "array", "items": {"type": "object"}},
                "edges": {"type": "array", "items": {"type": "object"}},
            },
        }))
        .parameters(vec![json!({
            "name": "xray",
            "in": "query",
            "required": false,
            "schema": {"type": "string", "pattern": "^(true|True|false|False|[1-9][0-9]{0,8})$"},
            "description": "Draw subgraphs (Python graphs): `true`, or how many levels deep.",
        })]),
        ("get", "/assistants/{assistant_id}/schemas") => Io::json(json!({
            "type": "object",
            "required": ["graph_id", "input_schema", "output_schema", "state_schema"],
            "properties": {"graph_id": {"type": "string"}},
        })),
        ("get", "/assistants/{assistant_id}/subgraphs" | "/assistants/{assistant_id}/subgraphs/{namespace}") => {
            Io::json(json!({
                "type": "object",
                "description": "The schemas of each subgraph, by namespace (`parent|child`).",
                "additionalProperties": {"type": "object"},
            }))
            .parameters(vec![json!({
                "name": "recurse",
                "in": "query",
                "required": false,
                "schema": {"type": "boolean"},
                "description": "Nested subgraphs too, not only the immediate ones.",
            })])
        }
        ("post", "/threads") => Io::json(reference("Thread")).body(thread_create()),
        ("post", "/threads/search") => Io::json(array(json!({
            "description": "A thread, or the fields of it that `select` named.",
            "anyOf": [reference("Thread"), {"type": "object"}],
        })))
        .body(thread_search()),
        ("post", "/threads/count") => {
            Io::json(json!({"type": "integer", "minimum": 0})).body(thread_search())
        }
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
        ("get", "/threads/{thread_id}/files") => Io::json(array(thread_file("size", json!({"type": "integer"}))))
            .parameters(vec![file_path(
                false,
                "A folder or file: what is at it or below it (`/`, every file, by default).",
            )]),
        ("get", "/threads/{thread_id}/files/content") => Io::json(thread_file(
            "content",
            json!({"type": "string", "description": "Text, or base64 when `encoding` is `base64`."}),
        ))
        .parameters(vec![file_path(true, "The file's absolute path, as the agent named it.")]),
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
            Io::json(reference("ThreadState")).parameters(vec![json!({
                "name": "subgraphs",
                "in": "query",
                "required": false,
                "schema": {"type": "boolean"},
                "description": "The states of waiting subgraphs in their tasks' `state` (Python graphs).",
            })])
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
                "checkpoint_id": {
                    "type": ["string", "null"],
                    "format": "uuid",
                    "description": "Update from this checkpoint (Python graphs; 422 for the others).",
                },
                "checkpoint": {
                    "type": ["object", "null"],
                    "properties": {
                        "checkpoint_id": {"type": ["string", "null"], "format": "uuid"},
                        "checkpoint_ns": {"type": ["string", "null"], "enum": ["", null]},
                    },
                    "description": "The same, as RemoteGraph sends it (the latest without an id).",
                },
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
        ("get", "/threads/{thread_id}/history") => Io::json(array(reference("ThreadState")))
            .parameters(vec![
                query("limit", limit(10)),
                query(
                    "before",
                    json!({"type": "string", "format": "uuid", "description": "A checkpoint id."}),
                ),
            ]),
        ("post", "/threads/{thread_id}/state/checkpoint") => Io::json(reference("ThreadState"))
            .body(json!({
                "type": "object",
                "additionalProperties": false,
                "properties": {
                    "checkpoint": {
                        "type": ["object", "null"],
                        "properties": {
                            "checkpoint_id": {"type": ["string", "null"], "format": "uuid"},
                            "checkpoint_ns": {"type": ["string", "null"], "enum": ["", null]},
                        },
                        "description": "Which state: the latest without a checkpoint_id.",
                    },
                    "subgraphs": {"type": ["boolean", "null"]},
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
                cancel_on_disconnect(),
                header(
                    "Last-Event-ID",
                    json!({"type": "integer", "format": "int64", "minimum": -1}),
                    "The `id` of the last event received: the stream resumes after it (`-1`: from the start).",
                ),
            ]),
        ("put", "/store/items") => Io::json(any()).body(json!({
            "type": "object",
            "required": ["namespace", "key", "value"],
            "properties": {
                "namespace": store_namespace(1),
                "key": {"type": "string"},
                "value": {"type": "object"},
                "ttl": {"type": ["number", "null"], "exclusiveMinimum": 0, "maximum": mostrador_queue::store::MAX_TTL_MINUTES},
                "index": any(),
            },
        })),
        ("get", "/store/items") => Io::json(nullable(store_item()))
            .parameters(vec![
                query(
                    "namespace",
                    json!({"type": "string", "pattern": "^[^.]+([.][^.]+)*$"}),
                ),
                query("key", json!({"type": "string"})),
                query("refresh_ttl", json!({"type": "string"})),
            ]),
        ("delete", "/store/items") => Io::json(any()).body(json!({
            "type": "object",
            "required": ["namespace", "key"],
            "properties": {"namespace": store_namespace(0), "key": {"type": "string"}},
        })),
        ("post", "/store/items/search") => Io::json(json!({
            "type": "object",
            "required": ["items"],
            "properties": {"items": {"type": "array", "items": scored(store_item())}},
        }))
        .body(json!({
            "type": "object",
            "properties": {
                "namespace_prefix": store_namespace(0),
                "filter": {"type": ["object", "null"]},
                "limit": {"type": ["integer", "null"], "minimum": 1, "maximum": 1000},
                "offset": {"type": ["integer", "null"], "minimum": 0},
                "query": {"type": ["string", "null"]},
                "refresh_ttl": {"type": ["boolean", "null"]},
            },
        })),
        ("post", "/store/namespaces") => Io::json(json!({
            "type": "object",
            "required": ["namespaces"],
            "properties": {"namespaces": {"type": "array", "items": store_namespace(1)}},
        }))
        .body(json!({
            "type": "object",
            "properties": {
                "prefix": nullable(store_namespace(0)),
                "suffix": nullable(store_namespace(0)),
                "max_depth": {"type": ["integer", "null"], "minimum": 1, "maximum": 1000},
                "limit": {"type": ["integer", "null"], "minimum": 1, "maximum": 1000},
                "offset": {"type": ["integer", "null"], "minimum": 0},
            },
        })),
        ("get", "/threads/{thread_id}/stream") => Io::events().parameters(vec![
            query(
                "stream_modes",
                json!({"type": "string", "pattern": "^(run_modes|lifecycle|state_update)(,(run_modes|lifecycle|state_update))*$"}),
            ),
            header(
                "Last-Event-ID",
                json!({"type": "string", "pattern": "^(-|[0-9]+(-([0-9]+|\\*))?)$"}),
                "The `id` of the last event received: the stream resumes after it (`-`: from the start).",
            ),
        ]),
        ("get", "/threads/{thread_id}/runs/{run_id}/join") => {
            Io::json(final_state()).parameters(vec![cancel_on_disconnect()])
        }
        ("post", "/threads/{thread_id}/runs/{run_id}/cancel") => Io::json(final_state())
            .parameters(vec![
                query("action", json!({"type": "string", "enum": ["interrupt", "rollback"]})),
                query(
                    "wait",
                    json!({"type": "string", "enum": ["0", "1", "false", "true", ""]}),
                ),
            ]),
        ("post", "/runs/crons" | "/threads/{thread_id}/runs/crons") => {
            Io::json(reference("Cron")).body(reference("CronRequest"))
        }
        ("get", "/runs/crons/{cron_id}") => Io::json(reference("Cron")),
        ("patch", "/runs/crons/{cron_id}") => {
            Io::json(reference("Cron")).body(reference("CronPatch"))
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
        ("post", "/runs/cancel") => Io::json(any())
            .parameters(vec![query(
                "action",
                json!({"type": "string", "enum": ["interrupt", "rollback"]}),
            )])
            .body(json!({
                "type": "object",
                "description": "`status`, or `thread_id` and `run_ids` (a 422 otherwise).",
                "properties": {
                    "status": {"type": "string", "enum": ["pending", "running", "all"]},
                    "thread_id": {"type": "string", "format": "uuid"},
                    "run_ids": {"type": "array", "items": {"type": "string", "format": "uuid"}},
                },
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
        ("get", "/info") => Io::json(json!({
            "type": "object",
            "required": ["version", "flags"],
            "properties": {
                "version": {"type": "string"},
                "flags": {"type": "object", "additionalProperties": {"type": "boolean"}},
                "host": {"type": "object"},
            },
        })),
        ("get", "/live" | "/ready") => Io::text("text/plain"),
        // Answers nothing at 200.
        _ => Io::json(any()),
    }
}

/// A Store namespace: labels that are non-empty and have no period.
/// A thread's file as the files routes answer it: its `path`, `encoding` and times, and `field`
/// (its size, or its content).
fn thread_file(field: &str, schema: Value) -> Value {
    json!({
        "type": "object",
        "required": ["path", field, "encoding", "created_at", "modified_at"],
        "properties": {
            "path": {"type": "string"},
            field: schema,
            "encoding": {"type": "string", "enum": ["utf-8", "base64"]},
            "created_at": {"type": "string", "format": "date-time"},
            "modified_at": {"type": "string", "format": "date-time"},
        },
    })
}

/// The `path` query parameter of the files routes: absolute, without NUL.
fn file_path(required: bool, description: &str) -> Value {
    json!({
        "name": "path",
        "in": "query",
        "required": required,
        "schema": {"type": "string", "pattern": "^/[^\\u0000]*$"},
        "description": description,
    })
}

fn store_namespace(min_items: u64) -> Value {
    json!({"type": "array", "minItems": min_items, "items": {"type": "string", "pattern": "^[^.]+$"}})
}

/// `schema`, or null.
fn nullable(mut schema: Value) -> Value {
    let kind = schema["type"].clone();
    schema["type"] = json!([kind, "null"]);
    schema
}

/// An item found by a search: with its relevance score (null without a semantic query).
fn scored(mut item: Value) -> Value {
    item["properties"]["score"] = json!({"type": ["number", "null"]});
    item
}

/// An item of the Store.
fn store_item() -> Value {
    json!({
        "type": "object",
        "required": ["namespace", "key", "value", "created_at", "updated_at"],
        "properties": {
            "namespace": store_namespace(1),
            "key": {"type": "string"},
            "value": {"type": "object"},
            "created_at": {"type": "string", "format": "date-time"},
            "updated_at": {"type": "string", "format": "date-time"},
        },
    })
}

/// `cancel_on_disconnect` of a join: `true`, `yes` or `1` cancels the run when the client goes
/// away; anything else does not.
fn cancel_on_disconnect() -> Value {
    query("cancel_on_disconnect", json!({"type": "string"}))
}
