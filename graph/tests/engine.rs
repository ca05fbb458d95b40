//! The engine's guarantees on the in-memory checkpointer (the scenarios live in
//! `src/conformance/`, shared with the Postgres checkpointer's tests).

use mostrador_graph::MemoryCheckpointer;

mostrador_graph::conformance_tests!(tokio::test, (), MemoryCheckpointer::new());
