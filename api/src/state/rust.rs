//! The subgraphs of a Rust graph's state: each next task that is a subgraph says where its
//! checkpoints are (`checkpoint`, its namespace) or, with `subgraphs`, carries its own state,
//! as LangGraph shows them.

use mostrador_graph::checkpoint::nested;
use mostrador_graph::run::task_namespace;
use mostrador_graph::{Checkpointer, Graph};
use mostrador_queue::{PgCheckpointer, Thread};
use serde_json::json;

use super::{graph_error, snapshot_answer};
use crate::app::AppState;
use crate::error::ApiError;
use crate::wire;

/// Fills in the subgraph tasks of `answer`, a state of `graph` in `namespace`.
pub(super) async fn with_subgraphs(
    state: &AppState,
    thread: &Thread,
    graph: &Graph,
    answer: &mut wire::ThreadState,
    namespace: &str,
    subgraphs: bool,
) -> Result<(), ApiError> {
    let Some(checkpoint_id) = answer.checkpoint_id else {
        return Ok(());
    };
    for task in &mut answer.tasks {
        let Some((_, subgraph)) = graph.subgraphs().find(|(node, _)| *node == task.name) else {
            continue;
        };
        let task_namespace = nested(
            namespace,
            &task_namespace(&task.name, checkpoint_id, &task.id),
        );
        let where_it_is = json!({"thread_id": thread.thread_id.0, "checkpoint_ns": task_namespace});
        if !subgraphs {
            task.checkpoint = where_it_is;
            continue;
        }
        let checkpointer = PgCheckpointer::new(state.pool().clone()).scoped(&task_namespace);
        let own = subgraph
            .get_state(&checkpointer, thread.thread_id.0, None)
            .await
            .map_err(graph_error)?;
        if own.checkpoint_id.is_none() {
            task.checkpoint = where_it_is;
            continue;
        }
        let mut nested_state = snapshot_answer(thread, &own, &task_namespace);
        Box::pin(with_subgraphs(
            state,
            thread,
            subgraph,
            &mut nested_state,
            &task_namespace,
            true,
        ))
        .await?;
        task.state = serde_json::to_value(nested_state).map_err(ApiError::failed)?;
    }
    Ok(())
}
