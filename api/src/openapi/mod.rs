//! `/openapi.json` and `/docs` (Swagger UI, served from the binary: no CDN).
//!
//! The document is built from one table of the routes, so it cannot name a route the router
//! lacks without the test `openapi_names_every_route_and_docs_are_served_offline` noticing. A
//! second table, [`io::io`], says what each route takes (query and header parameters, its
//! JSON body) and what it answers with, in JSON Schema: `tests/schemathesis/run` fuzzes the api
//! from this document, so a schema there must say what the handler accepts and answers, no more
//! and no less.

use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use utoipa::openapi::path::{HttpMethod, Operation, OperationBuilder, Parameter, Paths};
use utoipa::openapi::request_body::RequestBody;
use utoipa::openapi::response::Response;
use utoipa::openapi::security::{
    ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme,
};
use utoipa::openapi::{ComponentsBuilder, InfoBuilder, OpenApi, OpenApiBuilder, RefOr, Schema};

pub use io::Io;
use io::io;
pub use schemas::{array, limit, offset, query, reference};
use schemas::{named_schemas, path_parameter};

mod io;
mod schemas;

/// Every route: method, path, tag, summary, and the status codes it answers with.
pub const ROUTES: &[(&str, &str, &str, &str, &[u16])] = &[
    (
        "post",
        "/assistants",
        "assistants",
        "Create an assistant of the caller's: a configured instance of a graph",
        &[200, 400, 401, 404, 409, 422],
    ),
    (
        "post",
        "/assistants/search",
        "assistants",
        "Search the graphs' own assistants and the caller's",
        &[200, 401, 422],
    ),
    (
        "post",
        "/assistants/count",
        "assistants",
        "Count the graphs' own assistants and the caller's",
        &[200, 401, 422],
    ),
    (
        "patch",
        "/assistants/{assistant_id}",
        "assistants",
        "Update one of the caller's assistants: a new version, the latest",
        &[200, 400, 401, 404, 409, 422],
    ),
    (
        "delete",
        "/assistants/{assistant_id}",
        "assistants",
        "Delete one of the caller's assistants",
        &[204, 401, 404, 409],
    ),
    (
        "post",
        "/assistants/{assistant_id}/versions",
        "assistants",
        "An assistant's versions, newest first",
        &[200, 401, 404, 422],
    ),
    (
        "post",
        "/assistants/{assistant_id}/latest",
        "assistants",
        "Make a version of one of the caller's assistants its latest",
        &[200, 401, 404, 409, 422],
    ),
    (
        "get",
        "/assistants/{assistant_id}",
        "assistants",
        "An assistant, by its id or its graph id",
        &[200, 401, 404],
    ),
    (
        "get",
        "/assistants/{assistant_id}/graph",
        "assistants",
        "The graph's nodes and edges",
        &[200, 401, 404, 422, 503],
    ),
    (
        "get",
        "/assistants/{assistant_id}/schemas",
        "assistants",
        "JSON Schemas of the graph's input, output, state, config and context",
        &[200, 401, 404, 422, 503],
    ),
    (
        "get",
        "/assistants/{assistant_id}/subgraphs",
        "assistants",
        "The schemas of the graph's subgraphs, by namespace",
        &[200, 401, 404, 422, 503],
    ),
    (
        "get",
        "/assistants/{assistant_id}/subgraphs/{namespace}",
        "assistants",
        "The schemas of the subgraph at a namespace",
        &[200, 401, 404, 422, 503],
    ),
    (
        "post",
        "/threads",
        "threads",
        "Create a thread (with the client's id, or one the server chooses)",
        &[200, 401, 404, 409, 422],
    ),
    (
        "post",
        "/threads/search",
        "threads",
        "The caller's visible threads (newest first unless sorted otherwise)",
        &[200, 401, 413, 422, 503],
    ),
    (
        "post",
        "/threads/count",
        "threads",
        "How many of the caller's visible threads a search finds",
        &[200, 401, 422],
    ),
    (
        "post",
        "/threads/prune",
        "threads",
        "Delete threads, or keep only their latest checkpoint",
        &[200, 401, 422],
    ),
    (
        "post",
        "/threads/{thread_id}/copy",
        "threads",
        "A new thread of the caller's with the same state",
        &[200, 401, 404],
    ),
    (
        "get",
        "/threads/{thread_id}",
        "threads",
        "A thread",
        &[200, 401, 404],
    ),
    (
        "patch",
        "/threads/{thread_id}",
        "threads",
        "Merge metadata into a thread",
        &[200, 204, 401, 403, 404, 422],
    ),
    (
        "delete",
        "/threads/{thread_id}",
        "threads",
        "Delete a thread, its pending runs and its state",
        &[204, 401, 403, 404],
    ),
    (
        "get",
        "/threads/{thread_id}/files",
        "threads",
        "The thread's files (its deep agent's), for its owner",
        &[200, 401, 404, 422],
    ),
    (
        "get",
        "/threads/{thread_id}/files/content",
        "threads",
        "One of the thread's files, for its owner",
        &[200, 401, 404, 422],
    ),
    (
        "get",
        "/threads/{thread_id}/state",
        "state",
        "The thread's latest state",
        &[200, 401, 404, 422],
    ),
    (
        "post",
        "/threads/{thread_id}/state",
        "state",
        "Update the thread's state with the graph's reducers (of a retail thread that waits: managers only)",
        &[200, 400, 401, 403, 404, 409, 422, 503],
    ),
    (
        "get",
        "/threads/{thread_id}/state/{checkpoint_id}",
        "state",
        "The thread's state at a checkpoint",
        &[200, 401, 404, 422],
    ),
    (
        "post",
        "/threads/{thread_id}/history",
        "state",
        "The thread's states, newest first",
        &[200, 401, 404, 422],
    ),
    (
        "get",
        "/threads/{thread_id}/history",
        "state",
        "The thread's states, newest first (as the JS SDK fetches them)",
        &[200, 401, 404, 422],
    ),
    (
        "post",
        "/threads/{thread_id}/state/checkpoint",
        "state",
        "The thread's state at a checkpoint, or its latest (as RemoteGraph reads it)",
        &[200, 401, 404, 422],
    ),
    (
        "get",
        "/threads/{thread_id}/runs",
        "runs",
        "The thread's runs, newest first",
        &[200, 401, 404, 422],
    ),
    (
        "post",
        "/threads/{thread_id}/runs",
        "runs",
        "Enqueue a background run",
        &[200, 400, 401, 403, 404, 409, 422, 429, 503],
    ),
    (
        "post",
        "/threads/{thread_id}/runs/stream",
        "runs",
        "Enqueue a run and stream its events (SSE)",
        &[200, 400, 401, 403, 404, 409, 422, 429, 503],
    ),
    (
        "post",
        "/threads/{thread_id}/runs/wait",
        "runs",
        "Enqueue a run and answer its final state",
        &[200, 400, 401, 403, 404, 409, 422, 429, 503],
    ),
    (
        "get",
        "/threads/{thread_id}/runs/{run_id}",
        "runs",
        "A run",
        &[200, 401, 404],
    ),
    (
        "delete",
        "/threads/{thread_id}/runs/{run_id}",
        "runs",
        "Delete a finished run",
        &[204, 401, 403, 404, 409],
    ),
    (
        "get",
        "/threads/{thread_id}/runs/{run_id}/stream",
        "runs",
        "A run's events after Last-Event-ID (SSE)",
        &[200, 401, 404, 422, 429, 503],
    ),
    (
        "put",
        "/store/items",
        "store",
        "Write one of the caller's items (namespace, key, value; ttl in minutes)",
        &[204, 401, 422],
    ),
    (
        "get",
        "/store/items",
        "store",
        "One of the caller's items (namespace labels joined with periods), or null",
        &[200, 400, 401, 422],
    ),
    (
        "delete",
        "/store/items",
        "store",
        "Delete one of the caller's items",
        &[204, 401, 422],
    ),
    (
        "post",
        "/store/items/search",
        "store",
        "The caller's items under a namespace prefix that hold a filter, newest first",
        &[200, 401, 422],
    ),
    (
        "post",
        "/store/namespaces",
        "store",
        "The namespaces of the caller's items (prefix, suffix, max_depth)",
        &[200, 401, 422],
    ),
    (
        "get",
        "/threads/{thread_id}/stream",
        "threads",
        "The events of the thread's runs, one run after another (SSE; it does not end)",
        &[200, 401, 404, 422, 429, 503],
    ),
    (
        "get",
        "/threads/{thread_id}/runs/{run_id}/join",
        "runs",
        "Wait for a run; its final state",
        &[200, 401, 404, 429, 503],
    ),
    (
        "post",
        "/threads/{thread_id}/runs/{run_id}/cancel",
        "runs",
        "Cancel a run (action=interrupt|rollback, wait=0|1)",
        &[200, 202, 204, 401, 403, 404, 422, 429, 503],
    ),
    (
        "post",
        "/runs/crons",
        "crons",
        "Schedule runs, each on a new thread (five-field cron, UTC)",
        &[200, 401, 403, 404, 422, 503],
    ),
    (
        "post",
        "/threads/{thread_id}/runs/crons",
        "crons",
        "Schedule runs on a thread",
        &[200, 401, 403, 404, 409, 422, 503],
    ),
    (
        "post",
        "/runs/crons/search",
        "crons",
        "The caller's crons, oldest first",
        &[200, 401, 422, 503],
    ),
    (
        "post",
        "/runs/crons/count",
        "crons",
        "How many crons the caller has",
        &[200, 401, 422, 503],
    ),
    (
        "get",
        "/runs/crons/{cron_id}",
        "crons",
        "One of the caller's crons",
        &[200, 401, 404, 503],
    ),
    (
        "patch",
        "/runs/crons/{cron_id}",
        "crons",
        "Change one of the caller's crons: what the body names",
        &[200, 400, 401, 404, 422, 503],
    ),
    (
        "delete",
        "/runs/crons/{cron_id}",
        "crons",
        "Delete one of the caller's crons",
        &[204, 401, 404, 503],
    ),
    (
        "post",
        "/runs",
        "stateless runs",
        "A background run on a new thread",
        &[200, 400, 401, 403, 404, 422, 429, 503],
    ),
    (
        "post",
        "/runs/batch",
        "stateless runs",
        "Background runs on new threads, all or nothing",
        &[200, 400, 401, 403, 404, 422, 429, 503],
    ),
    (
        "post",
        "/runs/cancel",
        "runs",
        "Cancel runs of the caller's threads: by thread and ids, or every one in a status",
        &[204, 401, 403, 404, 422, 503],
    ),
    (
        "post",
        "/runs/stream",
        "stateless runs",
        "A run on a new thread, streamed (SSE)",
        &[200, 400, 401, 403, 404, 422, 429, 503],
    ),
    (
        "post",
        "/runs/wait",
        "stateless runs",
        "A run on a new thread; its final state",
        &[200, 400, 401, 403, 404, 422, 429, 503],
    ),
    (
        "get",
        "/runs/recent",
        "runs",
        "The newest runs of the caller's visible threads (status filter optional)",
        &[200, 401, 422, 503],
    ),
    (
        "get",
        "/queue",
        "operations",
        "Queue depth per graph and status; live workers and their runs in flight (managers)",
        &[200, 401, 403, 503],
    ),
    (
        "get",
        "/",
        "dashboard",
        "The dashboard (an HTML page that asks for a token)",
        &[200],
    ),
    ("get", "/ok", "probes", "The process answers", &[200]),
    (
        "get",
        "/info",
        "probes",
        "The server and what it serves, as the official server answers",
        &[200],
    ),
    (
        "get",
        "/live",
        "probes",
        "Liveness: touches nothing external",
        &[200],
    ),
    (
        "get",
        "/ready",
        "probes",
        "Readiness: database, schema, not draining",
        &[200, 503],
    ),
];

fn method(name: &str) -> HttpMethod {
    match name {
        "post" => HttpMethod::Post,
        "put" => HttpMethod::Put,
        "patch" => HttpMethod::Patch,
        "delete" => HttpMethod::Delete,
        _ => HttpMethod::Get,
    }
}

fn describe(status: u16) -> &'static str {
    match status {
        200 => "OK",
        202 => "Accepted",
        204 => "No content",
        400 => "Bad request: {\"detail\": ...}",
        401 => "Missing, expired or invalid token",
        403 => "Only a manager may do this",
        404 => "Not found, or not visible to the caller",
        409 => "Conflict with the thread's runs or state",
        413 => "Too large: the request's body, or the page of results it asks for",
        415 => "The body is not declared as JSON (Content-Type: application/json)",
        422 => "Invalid request: {\"detail\": ...}",
        503 => "Over a limit or draining: retry after Retry-After",
        _ => "",
    }
}

/// The statuses `route` answers with: those of [`ROUTES`], and those every route of its kind
/// may answer with: 413 and 415 for a JSON body (the extractor's), and 503 behind a token (the
/// pod drains, or the database is away).
fn statuses(listed: &[u16], authenticated: bool, takes_body: bool) -> Vec<u16> {
    let mut statuses = listed.to_vec();
    if takes_body {
        statuses.extend([413, 415]);
    }
    if authenticated {
        statuses.push(503);
    }
    statuses.sort_unstable();
    statuses.dedup();
    statuses
}

/// An OpenAPI object from its JSON.
///
/// # Panics
///
/// On JSON utoipa cannot read: a bug of this module's tables, which its tests catch.
fn from_json<T: DeserializeOwned>(value: Value) -> T {
    serde_json::from_value(value).expect("the tables of this module are OpenAPI utoipa reads")
}

fn schema(value: Value) -> RefOr<Schema> {
    from_json(value)
}

/// A route an app of the binary adds ([`crate::AppRoutes`]), as [`ROUTES`] names the api's own,
/// with what it takes and answers.
#[derive(Debug, Clone, Copy)]
pub struct AppRoute {
    pub method: &'static str,
    pub path: &'static str,
    pub tag: &'static str,
    pub summary: &'static str,
    pub statuses: &'static [u16],
    pub io: fn() -> Io,
}

fn operation(path: &str, tag: &str, summary: &str, listed: &[u16], io: Io) -> Operation {
    let Io {
        parameters,
        body,
        ok,
    } = io;
    let authenticated = !matches!(tag, "probes" | "dashboard");
    let mut operation = OperationBuilder::new()
        .tag(tag)
        .summary(Some(summary))
        .parameters(Some(
            path.split('/')
                .filter_map(|segment| segment.strip_prefix('{')?.strip_suffix('}'))
                .map(path_parameter)
                .chain(parameters)
                .map(from_json::<Parameter>),
        ));
    if let Some(body) = &body {
        operation = operation.request_body(Some(from_json::<RequestBody>(json!({
            "required": true,
            "content": {"application/json": {"schema": body}},
        }))));
    }
    for status in statuses(listed, authenticated, body.is_some()) {
        let content = match status {
            200 => ok.clone(),
            202 | 204 => json!({}),
            // The probes answer in plain text.
            _ if !authenticated => json!({"text/plain": {"schema": {"type": "string"}}}),
            _ => json!({"application/json": {"schema": reference("Error")}}),
        };
        let response: Response = from_json(json!({
            "description": describe(status),
            "content": content,
        }));
        operation = operation.response(status.to_string(), response);
    }
    if authenticated {
        // Either one: a JWT or an API key as a bearer token, or an API key as `x-api-key`.
        operation = operation
            .security(SecurityRequirement::new::<_, _, &str>("bearer", []))
            .security(SecurityRequirement::new::<_, _, &str>("apiKey", []));
    }
    operation.build()
}

/// The OpenAPI document of the api.
/// The document: the api's routes, and those of the apps the binary registers.
pub fn document(apps: &[crate::AppRoutes]) -> OpenApi {
    let mut paths = Paths::new();
    for (name, path, tag, summary, statuses) in ROUTES {
        paths.add_path_operation(
            path,
            vec![method(name)],
            operation(path, tag, summary, statuses, io(name, path)),
        );
    }
    for route in apps.iter().flat_map(|app| app.routes) {
        paths.add_path_operation(
            route.path,
            vec![method(route.method)],
            operation(
                route.path,
                route.tag,
                route.summary,
                route.statuses,
                (route.io)(),
            ),
        );
    }
    let mut components = ComponentsBuilder::new()
        .security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format("JWT")
                    .description(Some(
                        "A JWT, or an API key (`mostrador_…`, from `mostrador api-key create`).",
                    ))
                    .build(),
            ),
        )
        .security_scheme(
            "apiKey",
            SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::with_description(
                crate::auth::API_KEY_HEADER,
                "An API key (`mostrador_…`), as the langgraph-sdk sends LANGGRAPH_API_KEY.",
            ))),
        );
    for (name, value) in named_schemas()
        .into_iter()
        .chain(apps.iter().flat_map(|app| (app.schemas)()))
    {
        components = components.schema(name, schema(value));
    }
    OpenApiBuilder::new()
        .info(
            InfoBuilder::new()
                .title("mostrador")
                .version(env!("CARGO_PKG_VERSION"))
                .description(Some(
                    "LangGraph-style agent graphs served from PostgreSQL, speaking the langgraph-sdk wire protocol.",
                ))
                .build(),
        )
        .paths(paths)
        .components(Some(components.build()))
        .build()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde::Serialize;
    use utoipa::openapi::content::Content;

    use super::*;

    /// `value` as utoipa writes it back: without the `"type": null` of [`any`].
    fn written(value: &Value) -> Value {
        match value {
            Value::Object(map) => Value::Object(
                map.iter()
                    .filter(|(key, value)| !(*key == "type" && value.is_null()))
                    .map(|(key, value)| (key.clone(), written(value)))
                    .collect(),
            ),
            Value::Array(items) => Value::Array(items.iter().map(written).collect()),
            other => other.clone(),
        }
    }

    fn round_trip<T: DeserializeOwned + Serialize>(value: &Value) -> Value {
        serde_json::to_value(from_json::<T>(value.clone())).expect("serializes")
    }

    /// utoipa reads schemas through untagged enums, which drop what they do not know: a schema
    /// of the tables that it read differently would silently say something else.
    #[test]
    fn every_schema_of_the_tables_reads_without_loss() {
        let mut schemas: Vec<Value> = named_schemas()
            .into_iter()
            .map(|(_, value)| value)
            .collect();
        for (name, path, ..) in ROUTES {
            let io = io(name, path);
            schemas.extend(io.body);
            assert_eq!(
                round_trip::<BTreeMap<String, Content>>(&io.ok),
                written(&io.ok),
                "{name} {path}"
            );
            for parameter in io.parameters {
                assert_eq!(
                    round_trip::<Parameter>(&parameter),
                    written(&parameter),
                    "{name} {path}"
                );
            }
        }
        for value in &schemas {
            assert_eq!(round_trip::<RefOr<Schema>>(value), written(value));
        }
    }

    #[test]
    fn every_path_parameter_is_declared() {
        let document = serde_json::to_value(document(&[])).expect("serializes");
        for (name, path, ..) in ROUTES {
            let declared: Vec<&str> = document["paths"][path][name]["parameters"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|parameter| parameter["in"] == "path")
                .filter_map(|parameter| parameter["name"].as_str())
                .collect();
            let templated: Vec<&str> = path
                .split('/')
                .filter_map(|segment| segment.strip_prefix('{')?.strip_suffix('}'))
                .collect();
            assert_eq!(declared, templated, "{name} {path}");
        }
    }
}
