//! Assistants: one per graph (compiled into the binary, or Python from a `langgraph.json`),
//! which is code: its id is derived from its graph id as the official server derives it, so ids
//! are stable across processes and releases, and routes accept the graph id in its place. And
//! those callers create (`assistants/configured`): configured instances of a graph, versioned,
//! each its creator's own.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use mostrador_graph::{END, Graph, START};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use crate::app::AppState;
use crate::auth::Caller;
use crate::custom_auth::event::OnAssistant;
use crate::error::ApiError;
use crate::extract::{Body, Params};
use crate::openapi::fields;
use crate::wire;

pub mod configured;

/// The namespace the official server derives system assistant ids in.
const ASSISTANT_NAMESPACE: Uuid = Uuid::from_u128(0x6ba7b821_9dad_11d1_80b4_00c04fd430c8);

/// An assistant as the `langgraph-sdk` reads it.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct Assistant {
    pub assistant_id: Uuid,
    pub graph_id: String,
    #[schema(value_type = Object)]
    pub config: Value,
    #[schema(value_type = Object)]
    pub context: Value,
    #[schema(value_type = Object)]
    pub metadata: Value,
    pub name: String,
    pub description: Option<String>,
    pub version: i32,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl Assistant {
    pub fn for_graph(graph_id: &str) -> Self {
        // Assistants are code: they exist since the epoch of the binary, not of a database.
        let created_at = DateTime::<Utc>::UNIX_EPOCH;
        Self {
            assistant_id: Uuid::new_v5(&ASSISTANT_NAMESPACE, graph_id.as_bytes()),
            graph_id: graph_id.to_owned(),
            config: json!({}),
            context: json!({}),
            metadata: json!({"created_by": "system"}),
            name: graph_id.to_owned(),
            description: None,
            version: 1,
            created_at,
            updated_at: created_at,
        }
    }
}

impl From<mostrador_queue::data::assistants::Assistant> for Assistant {
    fn from(row: mostrador_queue::data::assistants::Assistant) -> Self {
        Self {
            assistant_id: row.assistant_id,
            graph_id: row.graph_id,
            config: row.config,
            context: row.context,
            metadata: row.metadata,
            name: row.name,
            description: row.description,
            version: row.version,
            created_at: row.created_at,
            updated_at: row.updated_at,
        }
    }
}

/// `POST /assistants/search`: the graphs' own assistants and the caller's, sorted (newest first
/// by default), at most `limit` after `offset`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(default)]
#[schema(as = AssistantSearch)]
pub struct Search {
    #[schema(minimum = 1, maximum = 1000, default = 10)]
    limit: i64,
    #[schema(minimum = 0, default = 0)]
    offset: i64,
    graph_id: Option<String>,
    name: Option<String>,
    #[schema(value_type = Option<Object>)]
    metadata: Option<serde_json::Map<String, Value>>,
    #[schema(schema_with = fields::assistant_sort_by)]
    sort_by: Option<String>,
    #[schema(schema_with = fields::sort_order)]
    sort_order: Option<String>,
    /// The fields of each assistant to answer (a search only; all when absent).
    #[schema(schema_with = assistant_fields)]
    select: Option<Vec<String>>,
}

/// The fields of an assistant a search may select.
const ASSISTANT_FIELDS: [&str; 10] = [
    "assistant_id",
    "graph_id",
    "config",
    "context",
    "metadata",
    "name",
    "description",
    "version",
    "created_at",
    "updated_at",
];

fn assistant_fields() -> utoipa::openapi::RefOr<utoipa::openapi::Schema> {
    fields::names_or_null(&ASSISTANT_FIELDS)
}

impl Default for Search {
    fn default() -> Self {
        Self {
            limit: 10,
            offset: 0,
            graph_id: None,
            name: None,
            metadata: None,
            sort_by: None,
            sort_order: None,
            select: None,
        }
    }
}

/// Answers the assistants, or the fields of them `select` names.
pub async fn search(
    State(state): State<AppState>,
    caller: Caller,
    Body(mut search): Body<Search>,
) -> Result<(axum::http::HeaderMap, Json<Vec<Value>>), ApiError> {
    let select = search.select.take();
    if let Some(unknown) = select
        .iter()
        .flatten()
        .find(|field| !ASSISTANT_FIELDS.contains(&field.as_str()))
    {
        return Err(ApiError::unprocessable(format!(
            "select: {unknown:?} is not a field of an assistant"
        )));
    }
    let offset = search.offset;
    let (found, more) = configured::search(&state, &caller, search).await?;
    let headers = wire::pagination(offset, found.len(), more);
    let mut answers = Vec::with_capacity(found.len());
    for assistant in found {
        let mut answer = serde_json::to_value(assistant).map_err(ApiError::failed)?;
        if let (Some(select), Value::Object(fields)) = (&select, &mut answer) {
            fields.retain(|field, _| select.contains(field));
        }
        answers.push(answer);
    }
    Ok((headers, Json(answers)))
}

/// The assistant `id` names for `caller`: a graph's own (by its id or its graph id), or one the
/// caller created. Anyone else's is not found.
///
/// # Errors
///
/// 404 for an assistant the caller does not have; 503 when the database failed.
pub async fn found(state: &AppState, caller: &Caller, id: &str) -> Result<Assistant, ApiError> {
    found_for(state, caller, id, Some("read")).await
}

/// [`found`], where a project's auth handler for `action` on assistants (`auth.path`; none:
/// not asked) allows it and its filter passes the assistant's metadata.
///
/// # Errors
///
/// As [`found`], and the handler's refusal.
pub async fn found_for(
    state: &AppState,
    caller: &Caller,
    id: &str,
    action: Option<&'static str>,
) -> Result<Assistant, ApiError> {
    let grant = match action.filter(|_| state.custom_auth().is_some()) {
        Some(action) => Some(
            crate::authorize::grant(
                state,
                caller,
                &OnAssistant {
                    action,
                    assistant_id: id,
                },
            )
            .await?,
        ),
        None => None,
    };
    let not_found = || ApiError::not_found(format!("Assistant {id} not found"));
    let assistant = if let Some(assistant) = state.assistant(id) {
        let assistant = assistant.clone();
        state.learn_names().await;
        state.named(assistant)
    } else {
        let Ok(assistant_id) = Uuid::parse_str(id) else {
            return Err(not_found());
        };
        mostrador_queue::data::assistants::get(
            state.pool(),
            owner_scope(state, caller),
            assistant_id,
        )
        .await
        .map_err(ApiError::failed)?
        .map(Assistant::from)
        .ok_or_else(not_found)?
    };
    match grant {
        Some(grant) if !grant.admits(&assistant.metadata) => Err(not_found()),
        _ => Ok(assistant),
    }
}

/// The assistant a run or a cron runs: a graph's own without asking a project's handlers, one
/// created by a caller where its read handler allows it, as officially.
///
/// # Errors
///
/// As [`found_for`].
pub async fn runnable(state: &AppState, caller: &Caller, id: &str) -> Result<Assistant, ApiError> {
    let ask = state.assistant(id).is_none().then_some("read");
    found_for(state, caller, id, ask).await
}

/// Whose created assistants a caller reaches: their own, or, under a project's auth handlers,
/// anyone's that the handlers' filters pass (as officially).
pub(crate) fn owner_scope<'a>(state: &AppState, caller: &'a Caller) -> Option<&'a str> {
    state
        .custom_auth()
        .is_none()
        .then_some(caller.subject.as_str())
}

/// `GET /assistants/{assistant_id}`.
pub async fn get(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<Assistant>, ApiError> {
    found(&state, &caller, &id).await.map(Json)
}

/// `GET /assistants/{assistant_id}/graph?xray=`: the graph's nodes and edges. A Python graph's
/// drawing is LangGraph's own (`xray` true or a depth draws its subgraphs), as its workers
/// described it. A Rust graph's routes chosen at run time have no fixed targets; their source
/// nodes are marked `{"conditional": true}`.
pub async fn graph(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    Params(query): Params<GraphQuery>,
) -> Result<Json<wire::GraphDrawing>, ApiError> {
    let assistant = found(&state, &caller, &id).await?;
    let xray = xray(query.xray.as_deref())?;
    if state.is_python(&assistant.graph_id) {
        let described = described(&state, &assistant.graph_id).await?;
        let drawings = &described["graph"];
        let drawing = match xray {
            Xray::Off => &drawings["false"],
            Xray::All => &drawings["true"],
            Xray::Depth(depth) => drawings.get(depth.to_string()).unwrap_or(&drawings["true"]),
        };
        if drawing.is_null() {
            return Err(ApiError::unprocessable(
                "The graph does not support visualization",
            ));
        }
        return serde_json::from_value(drawing.clone())
            .map(Json)
            .map_err(ApiError::failed);
    }
    let graph = state
        .graph(&assistant.graph_id)
        .ok_or_else(|| ApiError::not_found("graph not found"))?;
    let routed = graph.routed();
    let mut nodes = vec![json!({"id": START, "type": "schema", "data": START})];
    nodes.extend(graph.nodes().map(|node| {
        json!({
            "id": node,
            "type": "runnable",
            "data": {"name": node},
            "metadata": {"conditional": routed.contains(&node)},
        })
    }));
    nodes.push(json!({"id": END, "type": "schema", "data": END}));
    let edges: Vec<Value> = graph
        .edges()
        .into_iter()
        .map(|(source, target)| json!({"source": source, "target": target, "conditional": false}))
        .collect();
    Ok(Json(wire::GraphDrawing { nodes, edges }))
}

/// The query of `GET /assistants/{assistant_id}/graph`.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(default)]
pub struct GraphQuery {
    /// Draw subgraphs (Python graphs): `true`, or how many levels deep.
    #[param(
        pattern = "^(true|True|false|False|[1-9][0-9]{0,8})$",
        nullable = false
    )]
    xray: Option<String>,
}

/// How deep a drawing shows subgraphs.
enum Xray {
    Off,
    Depth(u32),
    All,
}

/// `xray` as the official server reads it: true, false, or a depth of at least 1.
fn xray(raw: Option<&str>) -> Result<Xray, ApiError> {
    match raw {
        None | Some("" | "false" | "False") => Ok(Xray::Off),
        Some("true" | "True") => Ok(Xray::All),
        Some(depth) => match depth.parse::<u32>() {
            Ok(depth) if depth > 0 => Ok(Xray::Depth(depth)),
            _ => Err(ApiError::unprocessable("Invalid xray value")),
        },
    }
}

/// What the workers recorded of a Python graph with LangGraph (the api runs no Python).
async fn described(state: &AppState, graph_id: &str) -> Result<Value, ApiError> {
    let described = mostrador_queue::data::graphs::description(state.pool(), graph_id)
        .await
        .map_err(ApiError::failed)?
        .ok_or_else(|| ApiError {
            // Until a worker with this graph has started: soon, in a deployment that has one.
            retry_after: Some(5),
            ..ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("no worker has described graph {graph_id} yet"),
            )
        })?;
    if let Some(error) = described.get("error") {
        return Err(ApiError::unprocessable(format!(
            "graph {graph_id} could not be described: {error}"
        )));
    }
    Ok(described)
}

/// `GET /assistants/{assistant_id}/schemas`: JSON Schemas of the graph's input, output, state,
/// config and context. A Python graph's are LangGraph's own, as the official server derives
/// them; a Rust graph's state has its channels (values are any JSON).
pub async fn schemas(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<wire::GraphSchemas>, ApiError> {
    let assistant = found(&state, &caller, &id).await?;
    let schemas = if state.is_python(&assistant.graph_id) {
        let mut described = described(&state, &assistant.graph_id).await?;
        serde_json::from_value(described["schemas"].take()).map_err(ApiError::failed)?
    } else {
        let graph = state
            .graph(&assistant.graph_id)
            .ok_or_else(|| ApiError::not_found("graph not found"))?;
        rust_schemas(&assistant.graph_id, graph)
    };
    Ok(Json(wire::GraphSchemas {
        graph_id: assistant.graph_id,
        schemas,
    }))
}

/// A Rust graph's schemas: its state has its channels (values are any JSON).
fn rust_schemas(title: &str, graph: &Graph) -> wire::Schemas {
    let properties: serde_json::Map<String, Value> = graph
        .channels()
        .map(|channel| (channel.to_owned(), json!({})))
        .collect();
    let state_schema = json!({"title": title, "type": "object", "properties": properties});
    wire::Schemas {
        input_schema: Some(state_schema.clone()),
        output_schema: Some(state_schema.clone()),
        state_schema: Some(state_schema),
        config_schema: Some(json!({"type": "object", "properties": {}})),
        context_schema: Some(Value::Null),
    }
}

/// The schemas of a Rust graph's subgraphs and theirs, by namespace (`parent|child`).
fn rust_subgraphs(graph: &Graph, outer: &str, found: &mut BTreeMap<String, wire::Schemas>) {
    for (node, subgraph) in graph.subgraphs() {
        let namespace = mostrador_graph::checkpoint::nested(outer, node);
        found.insert(namespace.clone(), rust_schemas(node, subgraph));
        rust_subgraphs(subgraph, &namespace, found);
    }
}

/// The query of `GET /assistants/{assistant_id}/subgraphs[/{namespace}]`.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(default)]
pub struct SubgraphsQuery {
    /// Nested subgraphs too, not only the immediate ones.
    #[param(value_type = Option<bool>, nullable = false)]
    recurse: Option<String>,
}

/// `GET /assistants/{assistant_id}/subgraphs`: the schemas of the graph's subgraphs by namespace
/// (`parent|child`); only the immediate ones unless `recurse`.
pub async fn subgraphs(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    Params(query): Params<SubgraphsQuery>,
) -> Result<Json<BTreeMap<String, wire::Schemas>>, ApiError> {
    subgraphs_at(&state, &caller, &id, None, &query)
        .await
        .map(Json)
}

/// `GET /assistants/{assistant_id}/subgraphs/{namespace}`: the subgraph at that namespace (a
/// nested one needs `recurse`).
pub async fn subgraph(
    State(state): State<AppState>,
    caller: Caller,
    Path((id, namespace)): Path<(String, String)>,
    Params(query): Params<SubgraphsQuery>,
) -> Result<Json<BTreeMap<String, wire::Schemas>>, ApiError> {
    subgraphs_at(&state, &caller, &id, Some(&namespace), &query)
        .await
        .map(Json)
}

async fn subgraphs_at(
    state: &AppState,
    caller: &Caller,
    id: &str,
    namespace: Option<&str>,
    query: &SubgraphsQuery,
) -> Result<BTreeMap<String, wire::Schemas>, ApiError> {
    let assistant = found(state, caller, id).await?;
    let recurse = matches!(query.recurse.as_deref(), Some("true" | "True"));
    let all = match state.graph(&assistant.graph_id) {
        Some(graph) => {
            let mut all = BTreeMap::new();
            rust_subgraphs(graph, "", &mut all);
            all
        }
        None => {
            let mut described = described(state, &assistant.graph_id).await?;
            serde_json::from_value::<Option<_>>(described["subgraphs"].take())
                .map_err(ApiError::failed)?
                .unwrap_or_default()
        }
    };
    Ok(all
        .into_iter()
        .filter(|(ns, _)| recurse || !ns.contains('|'))
        .filter(|(ns, _)| namespace.is_none_or(|wanted| wanted == ns))
        .collect())
}
