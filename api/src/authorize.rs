//! Thread authorization: the one function every route that takes a thread id goes through.
//!
//! Under a project's own auth handlers (`auth.path`) they decide instead, as on the official
//! server: every route asks the handler of its action ([`grant`]), a thread by id is found only
//! if its metadata passes the handler's filter, and the owner and policy rules below stand aside.
//!
//! A thread is visible to its owner and to whom the authorization policy lets read its tenant's
//! threads ([`crate::policy`]). Anything else, a malformed id and a thread that does not exist get
//! the same 404, so a response never confirms that someone else's thread exists.
//!
//! Changing a thread is its owner's alone ([`may_write`]): one who reads another's thread does
//! not change it, run on it or delete it. Answering a thread's interrupts (resuming it, or
//! changing its state while it waits) is the policy's rule for its graph, among those who see it:
//! [`may_decide`].

use mostrador_queue::{Error as QueueError, Thread, ThreadId, thread};
use uuid::Uuid;

use crate::app::AppState;
use crate::auth::Caller;
use crate::custom_auth::event::OnThread;
use crate::custom_auth::{Event, Grant};
use crate::error::ApiError;

/// Whether `caller`, who sees `thread`, may change it (its metadata, its state, its runs, its
/// crons, deleting it): its owner only. One who reads another's thread does not write it, except
/// to answer its interrupts where the policy lets them decide ([`may_decide`]).
///
/// # Errors
///
/// A 403: the caller sees the thread, so a 404 would not hide it.
pub fn may_write(caller: &Caller, thread: &Thread) -> Result<(), ApiError> {
    // A project's handlers were asked about the action already.
    if caller.project_user.is_some() || caller.subject == thread.owner {
        Ok(())
    } else {
        Err(ApiError::forbidden("only the thread's owner changes it"))
    }
}

/// The thread `raw_id` names, if `caller` may see it and change it ([`may_write`]).
///
/// # Errors
///
/// As [`visible_thread`], and a 403 for one who sees it without owning it.
pub async fn writable_thread(
    state: &AppState,
    caller: &Caller,
    raw_id: &str,
) -> Result<Thread, ApiError> {
    writable_thread_for(state, caller, raw_id, "update").await
}

/// [`writable_thread`], for `action` of a project's handlers (`update`, `delete`).
///
/// # Errors
///
/// As [`writable_thread`], and the handler's refusal.
pub async fn writable_thread_for(
    state: &AppState,
    caller: &Caller,
    raw_id: &str,
    action: &'static str,
) -> Result<Thread, ApiError> {
    let thread = thread_for(state, caller, raw_id, action).await?;
    may_write(caller, &thread)?;
    Ok(thread)
}

/// Whether `caller`, who sees `thread`, may answer its interrupts, as the policy says for its
/// graph (by default its owner). `graph_id`: the thread's graph, or the one a first run names.
///
/// # Errors
///
/// A 403.
pub fn may_decide(
    state: &AppState,
    caller: &Caller,
    thread: &Thread,
    graph_id: &str,
) -> Result<(), ApiError> {
    if state.custom_auth().is_some() || state.policy().decides(caller, thread, graph_id) {
        Ok(())
    } else {
        Err(ApiError::forbidden(
            "the authorization policy leaves this thread's interrupts to others",
        ))
    }
}

/// Whether `caller` may start runs of `graph_id` (directly or with a cron).
///
/// # Errors
///
/// A 403.
pub fn may_start(state: &AppState, caller: &Caller, graph_id: &str) -> Result<(), ApiError> {
    if state.custom_auth().is_some() || state.policy().starts(caller, graph_id) {
        Ok(())
    } else {
        Err(ApiError::forbidden(format!(
            "the authorization policy does not let this caller start runs of {graph_id}"
        )))
    }
}

/// Whether `caller` may schedule runs of `graph_id` with a cron (and start them).
///
/// # Errors
///
/// A 403.
pub fn may_schedule(state: &AppState, caller: &Caller, graph_id: &str) -> Result<(), ApiError> {
    may_start(state, caller, graph_id)?;
    if state.custom_auth().is_some() || state.policy().schedules(caller, graph_id) {
        Ok(())
    } else {
        Err(ApiError::forbidden(format!(
            "the authorization policy does not let this caller schedule runs of {graph_id}"
        )))
    }
}

/// The thread `raw_id` names, if `caller` may see it.
///
/// # Errors
///
/// [`ApiError::thread_not_found`] for a malformed id, a missing or deleted thread and a thread
/// the caller may not see alike; a 503 when the database fails.
pub async fn visible_thread(
    state: &AppState,
    caller: &Caller,
    raw_id: &str,
) -> Result<Thread, ApiError> {
    thread_for(state, caller, raw_id, "read").await
}

/// The thread `raw_id` names, if `caller` may see it; under a project's auth handlers, if the
/// handler of the threads' `action` allows it and the thread's metadata passes its filter.
///
/// # Errors
///
/// As [`visible_thread`], and the handler's refusal.
pub async fn thread_for(
    state: &AppState,
    caller: &Caller,
    raw_id: &str,
    action: &'static str,
) -> Result<Thread, ApiError> {
    let grant = match state.custom_auth() {
        Some(_) => Some(
            grant(
                state,
                caller,
                &OnThread {
                    action,
                    thread_id: raw_id,
                },
            )
            .await?,
        ),
        None => None,
    };
    let sees = |thread: &Thread| match &grant {
        Some(grant) => grant.admits(&thread.metadata),
        None => state.policy().sees(caller, thread),
    };
    found_thread(state, raw_id, sees).await
}

/// The thread `raw_id` names if its metadata passes `grant`'s filter (a project's handler's,
/// asked already).
///
/// # Errors
///
/// As [`visible_thread`].
pub async fn visible_thread_granted(
    state: &AppState,
    raw_id: &str,
    grant: &Grant,
) -> Result<Thread, ApiError> {
    found_thread(state, raw_id, |thread| grant.admits(&thread.metadata)).await
}

async fn found_thread(
    state: &AppState,
    raw_id: &str,
    sees: impl Fn(&Thread) -> bool,
) -> Result<Thread, ApiError> {
    let Ok(id) = Uuid::parse_str(raw_id) else {
        return Err(ApiError::thread_not_found());
    };
    match thread::get(state.pool(), ThreadId(id)).await {
        Ok(thread) if sees(&thread) => Ok(thread),
        Ok(_) | Err(QueueError::ThreadNotFound(_)) => Err(ApiError::thread_not_found()),
        Err(err) => Err(ApiError::failed(err)),
    }
}

/// What the project's handler of `event`'s action makes of its value for `caller`
/// (`auth.path`); without the project's handlers, the value as it is, unfiltered.
///
/// # Errors
///
/// The handler's refusal ([`crate::custom_auth::CustomAuth::event`]); a 500 with a correlation
/// id for a value that does not serialize.
pub async fn grant(
    state: &AppState,
    caller: &Caller,
    event: &impl Event,
) -> Result<Grant, ApiError> {
    let value = serde_json::to_value(event).map_err(ApiError::failed)?;
    match state.custom_auth() {
        Some(custom) => {
            let (resource, action) = event.names();
            custom
                .event(caller.project_user.as_deref(), resource, action, value)
                .await
        }
        None => Ok(Grant {
            value,
            filter: None,
        }),
    }
}
