//! The subgraphs of a Rust graph's state: each next task that is a subgraph says where its
//! checkpoints are (`checkpoint`, its namespace) or, with `subgraphs`, carries its own state,
//! as LangGraph shows them.

use mostrador_graph::checkpoint::nested;
use mostrador_graph::run::task_namespace;
use mostrador_graph::{Checkpointer, Graph};
use mostrador_queue::{PgCheckpointer, Thread};
use serde_json::{Value, json};
use uuid::Uuid;

use super::{graph_error, snapshot_json};
use crate::app::AppState;
use crate::error::ApiError;

/// Fills in the subgraph tasks of `answer`, a state of `graph` in `namespace`.
pub(super) async fn with_subgraphs(
    state: &AppState,
    thread: &Thread,
    graph: &Graph,
    answer: &mut Value,
    namespace: &str,
    subgraphs: bool,
) -> Result<(), ApiError> {
    let Some(checkpoint_id) = answer["checkpoint_id"]
        .as_str()
        .and_then(|id| Uuid::parse_str(id).ok())
    else {
        return Ok(());
    };
    let Some(tasks) = answer["tasks"].as_array_mut() else {
        return Ok(());
    };
    for task in tasks {
        let (Some(id), Some(name)) = (task["id"].as_str(), task["name"].as_str()) else {
            continue;
        };
        let Some((_, subgraph)) = graph.subgraphs().find(|(node, _)| *node == name) else {
            continue;
        };
        let task_namespace = nested(namespace, &task_namespace(name, checkpoint_id, id));
        let where_it_is = json!({"thread_id": thread.thread_id.0, "checkpoint_ns": task_namespace});
        if !subgraphs {
            task["checkpoint"] = where_it_is;
            continue;
        }
        let checkpointer = PgCheckpointer::new(state.pool().clone()).scoped(&task_namespace);
        let own = subgraph
            .get_state(&checkpointer, thread.thread_id.0, None)
            .await
            .map_err(graph_error)?;
        if own.checkpoint_id.is_none() {
            task["checkpoint"] = where_it_is;
            continue;
        }
        let mut nested_state = snapshot_json(thread, &own, &task_namespace);
        Box::pin(with_subgraphs(
            state,
            thread,
            subgraph,
            &mut nested_state,
            &task_namespace,
            true,
        ))
        .await?;
        task["state"] = nested_state;
    }
    Ok(())
}
