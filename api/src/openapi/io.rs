//! The second table of the document: what each route of [`ROUTES`](super::ROUTES) takes and
//! answers.

use serde_json::{Value, json};
use utoipa::openapi::path::ParameterIn;
use utoipa::openapi::{RefOr, Schema};
use utoipa::{IntoParams, ToSchema};

use super::schemas::{
    any, array, header, limit, offset, query, reference, run_status_filter, stream_mode_name,
};
use crate::stream::protocol;
use crate::{a2a, assistants, crons, files, probes, runs, state, store, threads, wire};

/// A schema named in the document's components.
pub type Named = (String, RefOr<Schema>);

/// What a route takes besides its path parameters, and what its success answers carry.
#[derive(Clone)]
pub struct Io {
    /// Query and header parameters, as OpenAPI parameter objects.
    pub(super) parameters: Vec<Value>,
    /// The schema of its JSON body, for a route that reads one.
    pub(super) body: Option<Value>,
    /// The content of its 200: media types and their schemas.
    pub(super) ok: Value,
    /// The content of its 400, when it is not the api's error body (MCP's `{"error"}`).
    pub(super) refused: Option<Value>,
    /// The named schemas its body and answer refer to, and those they refer to in turn.
    pub(super) schemas: Vec<Named>,
}

/// `T`'s schema under its name, and those it refers to.
pub(super) fn named<T: ToSchema>() -> Vec<Named> {
    let mut schemas = vec![(T::name().into_owned(), T::schema())];
    T::schemas(&mut schemas);
    for (_, schema) in &mut schemas {
        without_null_defaults(schema);
    }
    schemas
}

/// The derive gives every field of a `#[serde(default)]` struct its `Default` as its default,
/// `null` for an `Option`: which says nothing an absent field does not, and of a required field
/// something false.
fn without_null_defaults(schema: &mut RefOr<Schema>) {
    if let RefOr::T(Schema::Object(object)) = schema {
        for property in object.properties.values_mut() {
            match property {
                RefOr::T(Schema::Object(field)) if field.default == Some(Value::Null) => {
                    field.default = None;
                }
                RefOr::T(Schema::Array(field)) if field.default == Some(Value::Null) => {
                    field.default = None;
                }
                RefOr::T(Schema::OneOf(field)) if field.default == Some(Value::Null) => {
                    field.default = None;
                }
                _ => {}
            }
        }
    }
}

impl std::fmt::Debug for Io {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Io")
            .field("parameters", &self.parameters)
            .field("body", &self.body)
            .field("ok", &self.ok)
            .field(
                "schemas",
                &self
                    .schemas
                    .iter()
                    .map(|(name, _)| name)
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl Io {
    /// A route that answers JSON of this schema.
    pub fn json(schema: Value) -> Self {
        Self {
            parameters: Vec::new(),
            body: None,
            ok: json!({"application/json": {"schema": schema}}),
            refused: None,
            schemas: Vec::new(),
        }
    }

    /// A route whose success has no content (a 204).
    pub fn nothing() -> Self {
        Self {
            ok: json!({}),
            ..Self::json(any())
        }
    }

    /// A route that answers `T`, in the shape `shape` makes of a reference to it (a list of
    /// them, or one or null).
    pub fn answers_as<T: ToSchema>(shape: impl FnOnce(Value) -> Value) -> Self {
        Self {
            schemas: named::<T>(),
            ..Self::json(shape(reference(&T::name())))
        }
    }

    /// A route that answers `T`.
    pub fn answers<T: ToSchema>() -> Self {
        Self::answers_as::<T>(|schema| schema)
    }

    /// With a JSON body of `T`, in the shape `shape` makes of a reference to it.
    #[must_use]
    pub fn takes_as<T: ToSchema>(mut self, shape: impl FnOnce(Value) -> Value) -> Self {
        self.schemas.extend(named::<T>());
        self.body(shape(reference(&T::name())))
    }

    /// With a JSON body of `T`.
    #[must_use]
    pub fn takes<T: ToSchema>(self) -> Self {
        self.takes_as::<T>(|schema| schema)
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

    /// A JSON-RPC route (MCP, A2A): a request in, its response out; a 400 `{"error"}` for a
    /// message that is none.
    fn json_rpc() -> Self {
        // Whatever the request's `id` was, echoed (A2A takes a boolean, as Python's `int`).
        let id = json!({"type": ["string", "number", "boolean", "null"]});
        Self::json(json!({
            "type": "object",
            "description": "A JSON-RPC 2.0 response: `result` or `error`, with the request's `id`.",
            "required": ["jsonrpc", "id"],
            "properties": {
                "jsonrpc": {"type": "string", "enum": ["2.0"]},
                // A message refused before its `id` is looked at has it echoed as it came.
                "id": {
                    "type": ["string", "number", "boolean", "null", "array", "object"],
                    "description": "The request's `id`, as it came.",
                },
                "result": {"type": "object"},
                "error": {"type": "object"},
            },
        }))
        .body(json!({
            "type": "object",
            "description": "A JSON-RPC 2.0 request, notification or response.",
            "required": ["jsonrpc"],
            "properties": {
                "jsonrpc": {"type": "string", "enum": ["2.0"]},
                "id": id,
                "method": {"type": "string"},
                "params": {"type": "object"},
            },
        }))
        .refused_as(json!({
            "type": "object",
            "description": "Why the message is no JSON-RPC message the route takes.",
            "required": ["error"],
            "properties": {"error": {"type": "string"}},
        }))
    }

    /// Its 400 answers a JSON body of this schema.
    #[must_use]
    fn refused_as(self, schema: Value) -> Self {
        Self {
            refused: Some(json!({"application/json": {"schema": schema}})),
            ..self
        }
    }

    /// With a JSON body of this schema.
    #[must_use]
    fn body(self, schema: Value) -> Self {
        Self {
            body: Some(schema),
            ..self
        }
    }

    /// With these query and header parameters.
    #[must_use]
    pub fn parameters(mut self, parameters: Vec<Value>) -> Self {
        self.parameters.extend(parameters);
        self
    }

    /// With the query parameters of `T`, the query type the handler reads.
    #[must_use]
    pub fn query<T: IntoParams>(self) -> Self {
        let parameters = T::into_params(|| Some(ParameterIn::Query))
            .iter()
            .map(|parameter| serde_json::to_value(parameter).expect("a parameter is JSON"))
            .collect();
        self.parameters(parameters)
    }
}

/// The second table: what each route of [`ROUTES`](super::ROUTES) takes and answers, by method
/// and path. Bodies, answers and query parameters are the types the handlers read and write
/// (`ToSchema`, `IntoParams`); what a handler reads from the raw query or headers is written here.
pub(super) fn io(method: &str, path: &str) -> Option<Io> {
    let final_state = || {
        json!({
            "type": "object",
            "description": "The thread's values once the run ended (with `__interrupt__` when it \
                waits for a decision), or `{\"__error__\": ...}` when it failed. Blank lines \
                precede it while the run goes on.",
        })
    };
    let count = || json!({"type": "integer", "minimum": 0});
    let io = match (method, path) {
        ("post", "/assistants/search") => Io::answers_as::<assistants::Assistant>(|assistant| {
            array(json!({
                "description": "An assistant, or the fields of it that `select` named.",
                "anyOf": [assistant, {"type": "object"}],
            }))
        })
        .takes::<assistants::Search>(),
        ("get", "/assistants/{assistant_id}") => Io::answers::<assistants::Assistant>(),
        ("post", "/assistants") => Io::answers::<assistants::Assistant>()
            .takes::<assistants::configured::Create>(),
        ("patch", "/assistants/{assistant_id}") => Io::answers::<assistants::Assistant>()
            .takes::<assistants::configured::Update>(),
        ("post", "/assistants/count") => Io::json(count()).takes::<assistants::Search>(),
        ("post", "/assistants/{assistant_id}/versions") => {
            Io::answers_as::<assistants::configured::AssistantVersion>(array)
                .takes::<assistants::configured::Versions>()
        }
        ("post", "/assistants/{assistant_id}/latest") => Io::answers::<assistants::Assistant>()
            .takes::<assistants::configured::Latest>(),
        ("get", "/assistants/{assistant_id}/graph") => {
            Io::answers::<wire::GraphDrawing>().query::<assistants::GraphQuery>()
        }
        ("get", "/assistants/{assistant_id}/schemas") => Io::answers::<wire::GraphSchemas>(),
        ("get", "/assistants/{assistant_id}/subgraphs" | "/assistants/{assistant_id}/subgraphs/{namespace}") => {
            Io::answers_as::<wire::Schemas>(|schemas| {
                json!({
                    "type": "object",
                    "description": "The schemas of each subgraph, by namespace (`parent|child`).",
                    "additionalProperties": schemas,
                })
            })
            .query::<assistants::SubgraphsQuery>()
        }
        ("post", "/threads") => Io::answers::<wire::Thread>().takes::<threads::Create>(),
        ("post", "/threads/search") => Io::answers_as::<wire::Thread>(|thread| {
            array(json!({
                "description": "A thread, or the fields of it that `select` named.",
                "anyOf": [thread, {"type": "object"}],
            }))
        })
        .takes::<threads::Search>(),
        ("post", "/threads/count") => Io::json(count()).takes::<threads::Search>(),
        ("post", "/threads/prune") => Io::answers::<threads::Pruned>().takes::<threads::Prune>(),
        ("get", "/threads/{thread_id}/files") => {
            Io::answers_as::<wire::FileEntry>(array).query::<files::ListQuery>()
        }
        ("get", "/threads/{thread_id}/files/content") => {
            Io::answers::<wire::FileContent>().query::<files::ReadQuery>()
        }
        ("post", "/threads/{thread_id}/copy") | ("get", "/threads/{thread_id}") => {
            Io::answers::<wire::Thread>()
        }
        ("patch", "/threads/{thread_id}") => Io::answers::<wire::Thread>()
            .parameters(vec![header(
                "Prefer",
                json!({"type": "string"}),
                "`return=minimal` answers 204 instead of the thread.",
            )])
            .takes::<threads::Patch>(),
        ("get", "/threads/{thread_id}/state" | "/threads/{thread_id}/state/{checkpoint_id}") => {
            Io::answers::<wire::ThreadState>().query::<state::StateQuery>()
        }
        ("post", "/threads/{thread_id}/state") => Io::answers::<state::Updated>()
            .takes::<state::Update>(),
        ("post", "/threads/{thread_id}/history") => Io::answers_as::<wire::ThreadState>(array)
            .takes::<state::History>(),
        ("get", "/threads/{thread_id}/history") => {
            Io::answers_as::<wire::ThreadState>(array).query::<state::HistoryQuery>()
        }
        ("post", "/threads/{thread_id}/state/checkpoint") => Io::answers::<wire::ThreadState>()
            .takes::<state::AtCheckpoint>(),
        ("get", "/threads/{thread_id}/runs") => Io::answers_as::<wire::Run>(array)
            .parameters(vec![
                query("limit", limit(10)),
                query("offset", offset()),
                query("status", run_status_filter()),
            ]),
        ("post", "/threads/{thread_id}/runs" | "/runs") => {
            Io::answers::<wire::Run>().takes::<runs::accept::CreateRun>()
        }
        ("post", "/threads/{thread_id}/runs/stream" | "/runs/stream") => {
            Io::events().takes::<runs::accept::CreateRun>()
        }
        ("post", "/threads/{thread_id}/runs/wait" | "/runs/wait") => {
            Io::json(final_state()).takes::<runs::accept::CreateRun>()
        }
        ("get", "/threads/{thread_id}/runs/{run_id}") => Io::answers::<wire::Run>(),
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
        ("put", "/store/items") => Io::json(any()).takes::<store::Put>(),
        ("get", "/store/items") => Io::answers_as::<wire::Item>(|item| {
            json!({"oneOf": [item, {"type": "null"}]})
        })
        .query::<store::Get>(),
        ("delete", "/store/items") => Io::json(any()).takes::<store::Delete>(),
        ("post", "/store/items/search") => {
            Io::answers::<wire::SearchItems>().takes::<store::SearchBody>()
        }
        ("post", "/store/namespaces") => {
            Io::answers::<wire::NamespaceList>().takes::<store::NamespacesBody>()
        }
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
        ("post", "/threads/{thread_id}/runs/{run_id}/cancel") => {
            Io::json(final_state()).query::<runs::CancelQuery>()
        }
        ("post", "/runs/crons" | "/threads/{thread_id}/runs/crons") => {
            Io::answers::<wire::Cron>().takes::<crons::CreateCron>()
        }
        ("get", "/runs/crons/{cron_id}") => Io::answers::<wire::Cron>(),
        ("patch", "/runs/crons/{cron_id}") => {
            Io::answers::<wire::Cron>().takes::<crons::PatchCron>()
        }
        ("post", "/runs/crons/search") => {
            Io::answers_as::<wire::Cron>(array).takes::<crons::SearchCrons>()
        }
        ("post", "/runs/crons/count") => Io::json(count()).takes::<crons::SearchCrons>(),
        ("post", "/runs/batch") => Io::answers_as::<wire::Run>(array).takes_as::<runs::accept::CreateRun>(
            |run| json!({"type": "array", "minItems": 1, "maxItems": 1000, "items": run}),
        ),
        ("post", "/runs/cancel") => Io::json(any())
            .query::<runs::CancelManyQuery>()
            .takes::<runs::CancelMany>(),
        ("get", "/runs/recent") => {
            Io::answers_as::<wire::RecentRun>(array).query::<runs::RecentQuery>()
        }
        ("get", "/queue") => Io::answers::<wire::Queue>(),
        ("get", "/dashboard") => Io::text("text/html"),
        ("post", "/mcp") => Io::json_rpc(),
        ("get" | "delete", "/mcp") => Io::nothing(),
        ("post", "/a2a/{assistant_id}") => {
            let mut io = Io::json_rpc();
            io.ok["text/event-stream"] = json!({"itemSchema": {
                "type": "object",
                "description": "`message/stream`: each event a JSON-RPC response, named `message`.",
                "required": ["event", "data"],
                "properties": {
                    "event": {"type": "string", "enum": ["message"]},
                    "data": {"type": "string", "contentMediaType": "application/json"},
                },
            }});
            io
        }
        (
            "get",
            "/a2a/{assistant_id}"
            | "/a2a/{assistant_id}/.well-known/agent-card.json"
            | "/a2a/{assistant_id}/.well-known/agent.json",
        ) => card(),
        ("get", "/.well-known/agent-card.json") => card().query::<a2a::CardQuery>(),
        ("delete", "/a2a/{assistant_id}") => Io::nothing(),
        ("post", "/threads/{thread_id}/commands") => Io::answers::<protocol::Answer>()
            .takes::<protocol::ProtocolCommand>()
            .refused_as(json!({"oneOf": [
                {"type": "object", "required": ["detail"], "properties": {"detail": {"type": "string"}}},
                reference("Answer"),
            ]})),
        ("post", "/threads/{thread_id}/stream/events") => {
            Io::events().takes::<protocol::EventsRequest>()
        }
        ("get", "/threads/{thread_id}/stream/events") => Io::nothing(),
        ("get", "/threads/{thread_id}/storage") => Io::answers::<wire::ThreadStorage>(),
        ("get", "/" | "/ok") => Io::answers::<wire::Health>().query::<probes::OkQuery>(),
        ("get", "/info") => Io::answers::<wire::Info>(),
        ("get", "/live" | "/ready") => Io::text("text/plain"),
        (
            "delete",
            "/threads/{thread_id}"
            | "/threads/{thread_id}/runs/{run_id}"
            | "/runs/crons/{cron_id}",
        ) => Io::nothing(),
        ("delete", "/assistants/{assistant_id}") => {
            Io::nothing().query::<assistants::configured::DeleteQuery>()
        }
        _ => return None,
    };
    Some(io)
}

/// An A2A agent card, or why there is none.
fn card() -> Io {
    Io::json(json!({
        "type": "object",
        "description": "An A2A agent card: the assistant's name, address, skills and modes.",
        "required": ["name", "url", "capabilities", "skills", "version"],
    }))
    .refused_as(json!({
        "type": "object",
        "description": "No such assistant: a JSON-RPC error.",
        "required": ["error"],
        "properties": {"error": {"type": "object"}},
    }))
}

/// `cancel_on_disconnect` of a join: `true`, `yes` or `1` cancels the run when the client goes
/// away; anything else does not.
fn cancel_on_disconnect() -> Value {
    query("cancel_on_disconnect", json!({"type": "string"}))
}
