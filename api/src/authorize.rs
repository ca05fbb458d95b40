//! Thread authorization: the one function every route that takes a thread id goes through.
//!
//! A thread is visible to its owner and to a manager of its store. Anything else, a malformed id
//! and a thread that does not exist get the same 404, so a response never confirms that someone
//! else's thread exists.

use mostrador_queue::thread::Visibility;
use mostrador_queue::{Error as QueueError, Thread, ThreadId, thread};
use sqlx::PgPool;
use uuid::Uuid;

use crate::auth::{Caller, Role};
use crate::error::ApiError;

/// Whether `caller` may see `thread`.
pub fn may_see(caller: &Caller, thread: &Thread) -> bool {
    thread.owner == caller.subject
        || (caller.role == Role::Manager && thread.store.is_some() && thread.store == caller.store)
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
        Err(err) => Err(ApiError::unavailable(err)),
    }
}
