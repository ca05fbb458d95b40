//! Assistants: one per graph compiled into the binary, read-only. An assistant's id is derived
//! from its graph id as the official server derives it, so ids are stable across processes and
//! releases; routes accept the graph id in its place.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use mostrador_graph::{END, START};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::app::AppState;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::extract::Body;

/// The namespace the official server derives system assistant ids in.
const ASSISTANT_NAMESPACE: Uuid = Uuid::from_u128(0x6ba7b821_9dad_11d1_80b4_00c04fd430c8);

/// An assistant as the `langgraph-sdk` reads it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Assistant {
    pub assistant_id: Uuid,
    pub graph_id: String,
    pub config: Value,
    pub context: Value,
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

/// `POST /assistants/search`.
#[derive(Debug, Deserialize)]
#[serde(default)]
pub struct Search {
    limit: i64,
    offset: i64,
    graph_id: Option<String>,
    name: Option<String>,
    metadata: Option<serde_json::Map<String, Value>>,
}

impl Default for Search {
    fn default() -> Self {
        Self {
            limit: 10,
            offset: 0,
            graph_id: None,
            name: None,
            metadata: None,
        }
    }
}

pub async fn search(
    State(state): State<AppState>,
    _caller: Caller,
    Body(search): Body<Search>,
) -> Result<Json<Vec<Assistant>>, ApiError> {
    if !(1..=1000).contains(&search.limit) || search.offset < 0 {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "limit must be between 1 and 1000 and offset at least 0",
        ));
    }
    let found = state
        .assistants()
        .filter(|a| search.graph_id.as_ref().is_none_or(|g| *g == a.graph_id))
        .filter(|a| search.name.as_ref().is_none_or(|n| *n == a.name))
        .filter(|a| {
            search.metadata.as_ref().is_none_or(|wanted| {
                wanted
                    .iter()
                    .all(|(key, value)| a.metadata.get(key) == Some(value))
            })
        })
        .skip(usize::try_from(search.offset).unwrap_or(usize::MAX))
        .take(usize::try_from(search.limit).unwrap_or(0))
        .cloned()
        .collect();
    Ok(Json(found))
}

fn found<'a>(state: &'a AppState, id: &str) -> Result<&'a Assistant, ApiError> {
    state
        .assistant(id)
        .ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, format!("Assistant {id} not found")))
}

/// `GET /assistants/{assistant_id}`.
pub async fn get(
    State(state): State<AppState>,
    _caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<Assistant>, ApiError> {
    found(&state, &id).cloned().map(Json)
}

/// `GET /assistants/{assistant_id}/graph`: the nodes and the fixed edges. Routes chosen at run
/// time have no fixed targets; their source nodes are marked `{"conditional": true}`.
pub async fn graph(
    State(state): State<AppState>,
    _caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let assistant = found(&state, &id)?;
    let graph = state
        .graph(&assistant.graph_id)
        .ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, "graph not found"))?;
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
    Ok(Json(json!({"nodes": nodes, "edges": edges})))
}

/// `GET /assistants/{assistant_id}/schemas`: the state's channels (values are any JSON).
pub async fn schemas(
    State(state): State<AppState>,
    _caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let assistant = found(&state, &id)?;
    let graph = state
        .graph(&assistant.graph_id)
        .ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, "graph not found"))?;
    let properties: serde_json::Map<String, Value> = graph
        .channels()
        .map(|channel| (channel.to_owned(), json!({})))
        .collect();
    let state_schema =
        json!({"title": assistant.graph_id, "type": "object", "properties": properties});
    Ok(Json(json!({
        "graph_id": assistant.graph_id,
        "input_schema": state_schema,
        "output_schema": state_schema,
        "state_schema": state_schema,
        "config_schema": {"type": "object", "properties": {}},
        "context_schema": null,
    })))
}
