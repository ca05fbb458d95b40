//! Thread authorization: the one function every route that takes a thread id goes through.
//!
//! A thread is visible to its owner and to a manager of its store. Anything else, a malformed id
//! and a thread that does not exist get the same 404, so a response never confirms that someone
//! else's thread exists.
//!
//! Changing a thread is its owner's alone ([`may_write`]): a manager reads a customer's thread,
//! and does not change it, run on it or delete it. Answering a thread's interrupts (resuming it,
//! or changing its state while it waits) is the graph's rule among those who see it:
//! [`may_decide`].

use mostrador_queue::thread::Visibility;
use mostrador_queue::{Error as QueueError, Thread, ThreadId, thread};
use sqlx::PgPool;
use uuid::Uuid;

use crate::app::AppState;
use crate::auth::{Caller, Role};
use crate::error::ApiError;
use axum::http::StatusCode;

/// Whether `caller` may see `thread`.
pub fn may_see(caller: &Caller, thread: &Thread) -> bool {
    thread.owner == caller.subject
        || (caller.role == Role::Manager && thread.store.is_some() && thread.store == caller.store)
}

/// Whether `caller`, who sees `thread`, may change it (its metadata, its state, its runs, its
/// crons, deleting it): its owner only. A manager who reads a customer's thread does not write it,
/// except to answer its interrupts where the graph says managers decide ([`may_decide`]).
///
/// # Errors
///
/// A 403: the caller sees the thread, so a 404 would not hide it.
pub fn may_write(caller: &Caller, thread: &Thread) -> Result<(), ApiError> {
    if caller.subject == thread.owner {
        Ok(())
    } else {
        Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "only the thread's owner changes it",
        ))
    }
}

/// The thread `raw_id` names, if `caller` may see it and change it ([`may_write`]).
///
/// # Errors
///
/// As [`visible_thread`], and a 403 for one who sees it without owning it.
pub async fn writable_thread(
    pool: &PgPool,
    caller: &Caller,
    raw_id: &str,
) -> Result<Thread, ApiError> {
    let thread = visible_thread(pool, caller, raw_id).await?;
    may_write(caller, &thread)?;
    Ok(thread)
}

/// Whether `caller`, who sees `thread`, may answer its interrupts: a manager of its store for a
/// graph whose interrupts are managers' decisions, its owner for any other. `graph_id`: the
/// thread's graph, or the one a first run names.
///
/// # Errors
///
/// A 403 saying who decides.
pub fn may_decide(
    state: &AppState,
    caller: &Caller,
    thread: &Thread,
    graph_id: &str,
) -> Result<(), ApiError> {
    if state.decided_by_managers(thread.graph_id.as_deref().unwrap_or(graph_id)) {
        if caller.role == Role::Manager {
            return Ok(());
        }
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "only a manager of the thread's store decides its interrupts",
        ));
    }
    if caller.subject == thread.owner {
        Ok(())
    } else {
        Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "only the thread's owner answers its interrupts",
        ))
    }
}

/// Whether `caller` may start runs of `graph_id` (directly or with a cron): anyone, but for the
/// graphs only a store's staff start ([`AppState::started_by_staff`]).
///
/// # Errors
///
/// A 403 saying who starts them.
pub fn may_start(state: &AppState, caller: &Caller, graph_id: &str) -> Result<(), ApiError> {
    if caller.role == Role::Customer && state.started_by_staff(graph_id) {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            format!("only a store's staff (clerks and managers) start runs of {graph_id}"),
        ));
    }
    Ok(())
}

/// The threads `caller` may see, as the queue's searches filter them: the same rule as
/// [`may_see`].
pub fn visibility(caller: &Caller) -> Visibility {
    Visibility {
        owner: caller.subject.clone(),
        store: if caller.role == Role::Manager {
            caller.store.clone()
        } else {
            None
        },
    }
}

/// The thread `raw_id` names, if `caller` may see it.
///
/// # Errors
///
/// [`ApiError::thread_not_found`] for a malformed id, a missing or deleted thread and a thread
/// the caller may not see alike; a 503 when the database fails.
pub async fn visible_thread(
    pool: &PgPool,
    caller: &Caller,
    raw_id: &str,
) -> Result<Thread, ApiError> {
    let Ok(id) = Uuid::parse_str(raw_id) else {
        return Err(ApiError::thread_not_found());
    };
    match thread::get(pool, ThreadId(id)).await {
        Ok(thread) if may_see(caller, &thread) => Ok(thread),
        Ok(_) | Err(QueueError::ThreadNotFound(_)) => Err(ApiError::thread_not_found()),
        Err(err) => Err(ApiError::failed(err)),
    }
}
