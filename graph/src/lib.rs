//! The graph engine: state channels and reducers, nodes, edges, `Send` fan-out, supersteps,
//! interrupts and `Command`, run control (drain, cancel), stream events and the `Checkpointer`
//! trait.
//!
//! It knows nothing of SQL or HTTP. The engine arrives with its own issue; this crate holds its
//! place in the workspace so that the dependency direction (`graph` ← `queue` ← `worker`) is fixed
//! from the start.
