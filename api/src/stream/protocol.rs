//! The thread-centric stream protocol `client.threads.stream` speaks (`langgraph-sdk` 0.4; the
//! official server's "v3"): commands on `POST /threads/{thread_id}/commands` (`run.start`,
//! `input.respond`), the thread's events on `POST /threads/{thread_id}/stream/events` (SSE).
//!
//! A run that `run.start` or `input.respond` creates is marked for the protocol; its Python
//! runner stores its events already shaped (LangGraph's own v3 events). A stream reads the
//! thread's runs from the first, in queue order, every time: each event gets the same `seq`
//! and `event_id` on every connection, whatever its filter, so a client resumes any stream
//! with `since`. Around each run's events the stream puts the run's root lifecycle: `running`
//! at its first event, then how it ended. Runs not made by the protocol show only that.

mod commands;
mod events;
mod socket;

pub use commands::{Answer, Done, Meta, ProtocolCommand, command};
pub use events::{EventsRequest, events};
pub use socket::socket;

/// The channels a subscriber may ask for (and `custom:<name>`).
const CHANNELS: [&str; 9] = [
    "values",
    "updates",
    "messages",
    "tools",
    "custom",
    "lifecycle",
    "input",
    "tasks",
    "checkpoints",
];

/// The configurable key that marks a run of the protocol, as officially.
pub(crate) const MARKER: &str = "__event_streaming_v2";

/// Whether a subscriber may ask for `channel`.
fn supported(channel: &str) -> bool {
    CHANNELS.contains(&channel)
        || channel
            .strip_prefix("custom:")
            .is_some_and(|name| !name.is_empty())
}
