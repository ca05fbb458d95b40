//! The engine's guarantees as scenarios that run against any [`Checkpointer`], so the in-memory
//! and the Postgres checkpointers are held to the same behaviour. Each crate's tests call every
//! scenario through [`conformance_tests!`](crate::conformance_tests).
//!
//! * `execution`: supersteps, pending writes, concurrency, limits, retries, durability.
//! * `drain`: drain and cancel.
//! * `stream`: the events a run sends, by stream mode.
//! * `interrupt`: interrupts and resume, breakpoints, commands, subgraphs.
//! * `state`: state, history, updates, prune and copy.
//! * `random`: the property test over random graphs.
//!
//! Compiled only with the `conformance` feature (a dev-dependency feature of the crates that test
//! a checkpointer).

#![allow(clippy::unwrap_used, clippy::missing_panics_doc)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::checkpoint::Checkpointer;
use crate::stream::discard;
use crate::{
    Command, Durability, END, Error, EventSink, Graph, MemoryCheckpointer, NodeError, Outcome,
    Reducer, Resume, RetryPolicy, RunControl, RunInput, RunOptions, START, Send, StateGraph,
    StreamEvent, StreamMode, StreamModes,
};
use serde_json::{Value, json};
use tokio::sync::{Notify, mpsc};
use uuid::Uuid;

/// How many times each node started.
#[derive(Clone, Default)]
struct Starts(Arc<Mutex<HashMap<String, usize>>>);

impl Starts {
    fn record(&self, node: &str) {
        *self
            .0
            .lock()
            .expect("lock")
            .entry(node.to_owned())
            .or_default() += 1;
    }

    fn of(&self, node: &str) -> usize {
        self.0.lock().expect("lock").get(node).copied().unwrap_or(0)
    }
}

/// What a scenario returns.
pub type TestResult = Result<(), crate::checkpoint::BoxError>;

fn thread() -> Uuid {
    Uuid::now_v7()
}

fn input() -> RunInput {
    RunInput::Values(json!({}))
}

async fn run(
    graph: &Graph,
    checkpointer: &impl Checkpointer,
    thread_id: Uuid,
    input: RunInput,
) -> crate::RunResult {
    graph
        .run(
            checkpointer,
            thread_id,
            input,
            &RunOptions::default(),
            &RunControl::new(),
            discard(),
        )
        .await
        .expect("run")
}

/// Collects events into a channel.
fn collect() -> (EventSink, mpsc::UnboundedReceiver<StreamEvent>) {
    let (tx, rx) = mpsc::unbounded_channel();
    (Arc::new(move |event| drop(tx.send(event))), rx)
}

/// A graph that appends to `log` three times, one node per superstep.
fn three_steps() -> Graph {
    StateGraph::new()
        .channel("log", Reducer::Append)
        .channel("last", Reducer::LastValue)
        .node("a", |_| async {
            Ok(Command::new()
                .set("log", json!("a"))
                .set("last", json!("a")))
        })
        .node("b", |_| async { Ok(Command::new().set("log", json!("b"))) })
        .node("c", |_| async { Ok(Command::new().set("log", json!("c"))) })
        .edge(START, "a")
        .edge("a", "b")
        .edge("b", "c")
        .compile()
        .expect("valid graph")
}

fn approval_graph(starts: &Starts, interrupts: usize) -> Graph {
    let starts = starts.clone();
    StateGraph::new()
        .channel("decisions", Reducer::Append)
        .node("approve", move |ctx| {
            let starts = starts.clone();
            async move {
                starts.record("approve");
                let mut decisions = Vec::new();
                for i in 0..interrupts {
                    decisions.push(ctx.interrupt(json!({"question": i}))?);
                }
                Ok(Command::new().set("decisions", Value::Array(decisions)))
            }
        })
        .edge(START, "approve")
        .compile()
        .expect("valid graph")
}

mod drain;
mod execution;
mod interrupt;
mod random;
mod state;
mod stream;

pub use drain::*;
pub use execution::*;
pub use interrupt::*;
pub use random::*;
pub use state::*;
pub use stream::*;

/// Defines one test per scenario, each with a checkpointer from `$make` (an async expression
/// evaluated inside the test, with `$($arg)*` in scope).
#[macro_export]
macro_rules! conformance_tests {
    ($attr:meta, ($($arg:tt)*), $make:expr) => {
        #[$attr]
        async fn drain_mid_run_stops_at_superstep_boundary($($arg)*) -> $crate::conformance::TestResult {
            $crate::conformance::drain_mid_run_stops_at_superstep_boundary(&$make).await
        }
        #[$attr]
        async fn drain_in_the_last_superstep_reports_no_drain($($arg)*) -> $crate::conformance::TestResult {
            $crate::conformance::drain_in_the_last_superstep_reports_no_drain(&$make).await
        }
        #[$attr]
        async fn drain_mid_fan_out_starts_no_waiting_task($($arg)*) -> $crate::conformance::TestResult {
            $crate::conformance::drain_mid_fan_out_starts_no_waiting_task(&$make).await
        }
        #[$attr]
        async fn task_id_is_stable_across_reruns_and_unique_elsewhere($($arg)*) -> $crate::conformance::TestResult {
            $crate::conformance::task_id_is_stable_across_reruns_and_unique_elsewhere(&$make).await
        }
        #[$attr]
        async fn finished_tasks_are_not_rerun_after_a_crash($($arg)*) -> $crate::conformance::TestResult {
            $crate::conformance::finished_tasks_are_not_rerun_after_a_crash(&$make).await
        }
        #[$attr]
        async fn interrupt_reruns_the_node_from_its_start($($arg)*) -> $crate::conformance::TestResult {
            $crate::conformance::interrupt_reruns_the_node_from_its_start(&$make).await
        }
        #[$attr]
        async fn breakpoints_stop_before_and_after_their_nodes($($arg)*) -> $crate::conformance::TestResult {
            $crate::conformance::breakpoints_stop_before_and_after_their_nodes(&$make).await
        }
        #[$attr]
        async fn a_command_updates_the_state_and_adds_its_goto_tasks($($arg)*) -> $crate::conformance::TestResult {
            $crate::conformance::a_command_updates_the_state_and_adds_its_goto_tasks(&$make).await
        }
        #[$attr]
        async fn a_subgraph_runs_as_a_node_with_its_own_checkpoints_and_interrupts($($arg)*) -> $crate::conformance::TestResult {
            $crate::conformance::a_subgraph_runs_as_a_node_with_its_own_checkpoints_and_interrupts(&$make).await
        }
        #[$attr]
        async fn update_state_at_a_past_checkpoint_branches_there($($arg)*) -> $crate::conformance::TestResult {
            $crate::conformance::update_state_at_a_past_checkpoint_branches_there(&$make).await
        }
        #[$attr]
        async fn resume_value_reaches_interrupt_by_id($($arg)*) -> $crate::conformance::TestResult {
            $crate::conformance::resume_value_reaches_interrupt_by_id(&$make).await
        }
        #[$attr]
        async fn multiple_interrupts_in_one_node($($arg)*) -> $crate::conformance::TestResult {
            $crate::conformance::multiple_interrupts_in_one_node(&$make).await
        }
        #[$attr]
        async fn unknown_thread_has_empty_state($($arg)*) -> $crate::conformance::TestResult {
            $crate::conformance::unknown_thread_has_empty_state(&$make).await
        }
        #[$attr]
        async fn fan_out_respects_max_concurrency($($arg)*) -> $crate::conformance::TestResult {
            $crate::conformance::fan_out_respects_max_concurrency(&$make).await
        }
        #[$attr]
        async fn recursion_limit_stops_a_loop($($arg)*) -> $crate::conformance::TestResult {
            $crate::conformance::recursion_limit_stops_a_loop(&$make).await
        }
        #[$attr]
        async fn node_retry_policy($($arg)*) -> $crate::conformance::TestResult {
            $crate::conformance::node_retry_policy(&$make).await
        }
        #[$attr]
        async fn node_timeout($($arg)*) -> $crate::conformance::TestResult {
            $crate::conformance::node_timeout(&$make).await
        }
        #[$attr]
        async fn cancel_aborts_in_flight_task_and_keeps_last_checkpoint($($arg)*) -> $crate::conformance::TestResult {
            $crate::conformance::cancel_aborts_in_flight_task_and_keeps_last_checkpoint(&$make).await
        }
        #[$attr]
        async fn history_is_newest_first_and_pages_with_before($($arg)*) -> $crate::conformance::TestResult {
            $crate::conformance::history_is_newest_first_and_pages_with_before(&$make).await
        }
        #[$attr]
        async fn a_branch_from_a_past_checkpoint_keeps_its_own_values_and_becomes_the_latest($($arg)*) -> $crate::conformance::TestResult {
            $crate::conformance::a_branch_from_a_past_checkpoint_keeps_its_own_values_and_becomes_the_latest(&$make).await
        }
        #[$attr]
        async fn update_state_as_a_node_routes_from_it($($arg)*) -> $crate::conformance::TestResult {
            $crate::conformance::update_state_as_a_node_routes_from_it(&$make).await
        }
        #[$attr]
        async fn prune_keep_latest_preserves_state($($arg)*) -> $crate::conformance::TestResult {
            $crate::conformance::prune_keep_latest_preserves_state(&$make).await
        }
        #[$attr]
        async fn copy_thread_is_independent($($arg)*) -> $crate::conformance::TestResult {
            $crate::conformance::copy_thread_is_independent(&$make).await
        }
        #[$attr]
        async fn invalid_graphs_and_writes_are_errors($($arg)*) -> $crate::conformance::TestResult {
            $crate::conformance::invalid_graphs_and_writes_are_errors(&$make).await
        }
        #[$attr]
        async fn resume_works_under_every_durability($($arg)*) -> $crate::conformance::TestResult {
            $crate::conformance::resume_works_under_every_durability(&$make).await
        }
        #[$attr]
        async fn a_run_retried_after_recording_its_resume_counts_it_once($($arg)*) -> $crate::conformance::TestResult {
            $crate::conformance::a_run_retried_after_recording_its_resume_counts_it_once(&$make).await
        }
        #[$attr]
        async fn run_emits_every_stream_mode($($arg)*) -> $crate::conformance::TestResult {
            $crate::conformance::run_emits_every_stream_mode(&$make).await
        }
        #[$attr]
        async fn a_run_sends_only_the_modes_it_streams($($arg)*) -> $crate::conformance::TestResult {
            $crate::conformance::a_run_sends_only_the_modes_it_streams(&$make).await
        }
        #[$attr]
        async fn durability_modes_save_what_they_promise($($arg)*) -> $crate::conformance::TestResult {
            $crate::conformance::durability_modes_save_what_they_promise(&$make).await
        }
        #[$attr]
        async fn drained_and_resumed_random_graphs_match_uninterrupted_runs($($arg)*) -> $crate::conformance::TestResult {
            $crate::conformance::drained_and_resumed_random_graphs_match_uninterrupted_runs(&$make).await
        }
    };
}
