//! A thread's state as runs leave it: the Rust engine's checkpoints, LangGraph's, and the
//! thread's files.

pub mod checkpoint;
pub mod files;
pub mod saver;
pub mod storage;
