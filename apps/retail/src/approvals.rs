//! The managers' approval queue (`cliente`'s refunds waiting for a decision): a manager lists the
//! approvals of their store and decides by resuming the thread
//! (`POST /threads/{thread_id}/runs` with `command.resume`).
//!
//! Only managers see the queue (403 for others), and only their store's approvals: another
//! store's approval is a 404, the same as one that does not exist.
//!
//! The retail app's own route: the binary registers it with the api ([`ROUTES`]), which knows
//! nothing of it.

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::routing::on;
use mostrador_api::openapi::{AppRoute, Io, Kind, Route, array, limit, offset, query};
use mostrador_api::{ApiError, AppRoutes, AppState, Caller};
use serde::Deserialize;
use serde_json::json;
use uuid::Uuid;

use crate::retail::{self, APPROVAL_STATUSES, Approval};

/// The approval queue's routes, for the binary to register.
pub const ROUTES: AppRoutes = AppRoutes {
    routes: &[
        AppRoute {
            route: Route {
                method: "get",
                path: "/approvals",
                tag: "approvals",
                summary: "A manager's store's approvals (status pending, approved, rejected or withdrawn), oldest first",
                statuses: &[200, 401, 403, 422, 503],
                serve: |method| on(method, list),
                kind: Kind::Call,
            },
            io: || {
                Io::answers_as::<Approval>(array).parameters(vec![
                    query(
                        "status",
                        json!({"type": "string", "enum": APPROVAL_STATUSES}),
                    ),
                    query("limit", limit(50)),
                    query("offset", offset()),
                ])
            },
        },
        AppRoute {
            route: Route {
                method: "get",
                path: "/approvals/{approval_id}",
                tag: "approvals",
                summary: "One approval of the manager's store",
                statuses: &[200, 401, 403, 404, 503],
                serve: |method| on(method, one),
                kind: Kind::Call,
            },
            io: Io::answers::<Approval>,
        },
    ],
};

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
        (true, None) => Err(ApiError::forbidden(
            "the approval queue is per store, and this manager's token names none",
        )),
        _ => Err(ApiError::forbidden(
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
    let Query(query) = query.map_err(|rejection| ApiError::unprocessable(rejection.body_text()))?;
    let store = managed_store(&caller)?;
    if !APPROVAL_STATUSES.contains(&query.status.as_str()) {
        return Err(ApiError::unprocessable(format!(
            "status must be pending, approved, rejected or withdrawn, not {:?}",
            query.status
        )));
    }
    if !(1..=1000).contains(&query.limit) || query.offset < 0 {
        return Err(ApiError::unprocessable(
            "limit must be from 1 to 1000 and offset not negative",
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
pub async fn one(
    State(state): State<AppState>,
    caller: Caller,
    Path(approval_id): Path<String>,
) -> Result<Json<Approval>, ApiError> {
    let store = managed_store(&caller)?;
    let not_found = || ApiError::not_found("approval not found");
    let id = Uuid::parse_str(&approval_id).map_err(|_| not_found())?;
    let approval = retail::approval(state.pool(), id)
        .await
        .map_err(ApiError::failed)?
        .ok_or_else(not_found)?;
    // The thread decides, as for every other route: a manager sees their store's threads.
    let thread =
        mostrador_api::authorize::visible_thread(&state, &caller, &approval.thread_id.to_string())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_approval_routes_are_documented_beside_the_apis() {
        let document =
            serde_json::to_value(mostrador_api::openapi::document(&[ROUTES])).expect("serializes");
        for path in ["/approvals", "/approvals/{approval_id}"] {
            let get = &document["paths"][path]["get"];
            assert_eq!(get["tags"], json!(["approvals"]), "{path}");
            assert!(get["responses"]["200"].is_object(), "{path}");
        }
        assert!(document["components"]["schemas"]["Approval"].is_object());
        assert!(
            document["paths"]["/threads"].is_object(),
            "the api's own routes stay"
        );
        let without =
            serde_json::to_value(mostrador_api::openapi::document(&[])).expect("serializes");
        assert!(
            without["paths"]["/approvals"].is_null(),
            "the api alone has none"
        );
    }
}
