//! `/threads/{thread_id}/files`: a thread's files (what its deep agent kept through the worker),
//! for the thread's owner only: to anyone else the thread answers as a missing one.

use axum::Json;
use axum::extract::{Path, State};
use mostrador_queue::state::files;
use serde::Deserialize;
use utoipa::IntoParams;

use crate::app::AppState;
use crate::auth::Caller;
use crate::authorize::visible_thread;
use crate::error::ApiError;
use crate::extract::Params;
use crate::wire;

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    /// A folder or file: what is at it or below it (`/`, every file, by default).
    #[serde(default = "root")]
    #[param(pattern = "^/[^\\u0000]*$")]
    path: String,
}

fn root() -> String {
    "/".into()
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub struct ReadQuery {
    /// The file's absolute path, as the agent named it.
    #[param(pattern = "^/[^\\u0000]*$")]
    path: String,
}

/// `GET /threads/{thread_id}/files`: the thread's files at `path` or below it, without contents.
pub async fn list(
    State(state): State<AppState>,
    caller: Caller,
    Path(thread_id): Path<String>,
    Params(query): Params<ListQuery>,
) -> Result<Json<Vec<wire::FileEntry>>, ApiError> {
    check_path(&query.path)?;
    let thread = owned_thread(&state, &caller, &thread_id).await?;
    let found = files::list(state.pool(), thread.thread_id.0, &query.path)
        .await
        .map_err(ApiError::failed)?;
    Ok(Json(found.iter().map(wire::FileEntry::from).collect()))
}

/// `GET /threads/{thread_id}/files/content?path=`: one file, its content as text or base64.
pub async fn read(
    State(state): State<AppState>,
    caller: Caller,
    Path(thread_id): Path<String>,
    Params(query): Params<ReadQuery>,
) -> Result<Json<wire::FileContent>, ApiError> {
    check_path(&query.path)?;
    let thread = owned_thread(&state, &caller, &thread_id).await?;
    match files::read(state.pool(), thread.thread_id.0, &query.path).await {
        Ok(Some(file)) => Ok(Json(file.into())),
        Ok(None) => Err(ApiError::not_found(format!(
            "the thread has no file {:?}",
            query.path
        ))),
        Err(err) => Err(ApiError::failed(err)),
    }
}

/// Files are named by absolute paths, which hold no NUL character.
fn check_path(path: &str) -> Result<(), ApiError> {
    if path.starts_with('/') && !path.contains('\0') {
        Ok(())
    } else {
        Err(ApiError::unprocessable(format!(
            "{path:?} is not an absolute path"
        )))
    }
}

/// The thread, if the caller owns it. Files are the owner's alone, even where the policy lets
/// others read the thread's state.
async fn owned_thread(
    state: &AppState,
    caller: &Caller,
    thread_id: &str,
) -> Result<mostrador_queue::Thread, ApiError> {
    let thread = visible_thread(state, caller, thread_id).await?;
    if thread.owner != caller.subject {
        return Err(ApiError::thread_not_found());
    }
    Ok(thread)
}
