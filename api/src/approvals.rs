//! The managers' approval queue (`cliente`'s refunds waiting for a decision): a manager lists the
//! approvals of their store and decides by resuming the thread
//! (`POST /threads/{thread_id}/runs` with `command.resume`).
//!
//! Only managers see the queue (403 for others), and only their store's approvals: another
//! store's approval is a 404, the same as one that does not exist.

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use mostrador_agents::retail::{self, Approval};
use serde::Deserialize;
use uuid::Uuid;

use crate::app::AppState;
use crate::auth::Caller;
use crate::error::ApiError;

#[derive(Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ListQuery {
    status: String,
    limit: i64,
    offset: i64,
}

impl Default for ListQuery {
    fn default() -> Self {
        Self {
            status: "pending".into(),
            limit: 50,
            offset: 0,
        }
    }
}

/// The store of a manager (the retail app's tenants are its stores); anyone else may not see the
/// queue.
fn managed_store(caller: &Caller) -> Result<&str, ApiError> {
    match (caller.has_role("manager"), caller.tenant.as_deref()) {
        (true, Some(store)) => Ok(store),
        (true, None) => Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "the approval queue is per store, and this manager's token names none",
        )),
        _ => Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "only a store's managers see its approval queue",
        )),
    }
}

/// `GET /approvals?status=pending&limit=50&offset=0`: the caller's store's approvals, oldest
/// first.
pub async fn list(
    State(state): State<AppState>,
    caller: Caller,
    query: Result<Query<ListQuery>, QueryRejection>,
) -> Result<Json<Vec<Approval>>, ApiError> {
    let unprocessable = |detail: String| ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, detail);
    let Query(query) = query.map_err(|rejection| unprocessable(rejection.body_text()))?;
    let store = managed_store(&caller)?;
    if !["pending", "approved", "rejected", "withdrawn"].contains(&query.status.as_str()) {
        return Err(unprocessable(format!(
            "status must be pending, approved, rejected or withdrawn, not {:?}",
            query.status
        )));
    }
    if !(1..=1000).contains(&query.limit) || query.offset < 0 {
        return Err(unprocessable(
            "limit must be from 1 to 1000 and offset not negative".into(),
        ));
    }
    let approvals = retail::store_approvals(
        state.pool(),
        store,
        Some(&query.status),
        query.limit,
        query.offset,
    )
    .await
    .map_err(ApiError::failed)?;
    Ok(Json(approvals))
}

/// `GET /approvals/{approval_id}`.
pub async fn get(
    State(state): State<AppState>,
    caller: Caller,
    Path(approval_id): Path<String>,
) -> Result<Json<Approval>, ApiError> {
    let store = managed_store(&caller)?;
    let not_found = || ApiError::new(StatusCode::NOT_FOUND, "approval not found");
    let id = Uuid::parse_str(&approval_id).map_err(|_| not_found())?;
    let approval = retail::approval(state.pool(), id)
        .await
        .map_err(ApiError::failed)?
        .ok_or_else(not_found)?;
    // The thread decides, as for every other route: a manager sees their store's threads.
    let thread = crate::authorize::visible_thread(&state, &caller, &approval.thread_id.to_string())
        .await
        .map_err(|err| match err.status {
            StatusCode::NOT_FOUND => not_found(),
            _ => err,
        })?;
    if approval.store_id != store || thread.tenant.as_deref() != Some(store) {
        return Err(not_found());
    }
    Ok(Json(approval))
}
