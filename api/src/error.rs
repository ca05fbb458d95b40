//! Errors as the `langgraph-sdk` client reads them: a status code and a JSON body
//! `{"detail": "..."}`. Client errors are expected traffic: they are not logged as errors, and no
//! input may produce a 500. A 500 is a bug, and carries a `correlation_id` (also in its log line);
//! a 503 is transient and says when to come back (`Retry-After`).

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::auth::AuthError;

/// An error response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    pub detail: String,
    /// Seconds, for 503s.
    pub retry_after: Option<u64>,
    /// For 500s: the id in the body and in the log line of the failure.
    pub correlation_id: Option<uuid::Uuid>,
    /// Headers of the answer beyond these (a project's auth handler's `HTTPException`).
    pub headers: Vec<(String, String)>,
}

impl ApiError {
    pub fn new(status: StatusCode, detail: impl Into<String>) -> Self {
        Self {
            status,
            detail: detail.into(),
            retry_after: None,
            correlation_id: None,
            headers: Vec::new(),
        }
    }

    /// Something failed that the request did not cause. A transient failure (the database away
    /// or busy, `mostrador_queue::is_transient`) is a 503 the client may retry. Anything else is a
    /// bug: a 500 whose body and log line carry the same correlation id, never disguised as
    /// transient.
    pub fn failed(cause: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        let cause = cause.into();
        if mostrador_queue::is_transient(&*cause) {
            tracing::warn!(error = %cause, "database unavailable");
            return Self {
                retry_after: Some(1),
                ..Self::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "the database is unavailable; try again",
                )
            };
        }
        let correlation_id = uuid::Uuid::now_v7();
        tracing::error!(%correlation_id, error = %cause, error_debug = ?cause, "unexpected failure");
        Self {
            correlation_id: Some(correlation_id),
            ..Self::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("internal error (correlation id {correlation_id})"),
            )
        }
    }

    /// 400: the request cannot be read as the route's (as the official server words it).
    pub fn bad_request(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, detail)
    }

    /// 403: the caller may see it, not do it.
    pub fn forbidden(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, detail)
    }

    /// 404: nothing of the caller's by that name.
    pub fn not_found(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, detail)
    }

    /// 409: it is not in a state to do that now.
    pub fn conflict(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, detail)
    }

    /// 422: a field holds what it cannot mean.
    pub fn unprocessable(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, detail)
    }

    /// The one answer for a thread the caller may not see, whether it exists or not, and for an
    /// id that is not one: nothing in it tells them apart.
    pub fn thread_not_found() -> Self {
        Self::not_found("Thread not found")
    }
}

impl From<AuthError> for ApiError {
    fn from(err: AuthError) -> Self {
        match err {
            AuthError::Unavailable(_) => Self {
                retry_after: Some(5),
                ..Self::new(StatusCode::SERVICE_UNAVAILABLE, err.to_string())
            },
            other => Self::new(StatusCode::UNAUTHORIZED, other.to_string()),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if self.retry_after.is_some() {
            // Backpressure, a drain, a database or identity provider away: the client is told
            // when to come back, and a flood of these is the system working (the cause, when
            // there is one, was logged where it happened).
            tracing::debug!(status = %self.status, detail = %self.detail, "request refused for now");
        } else if self.status.is_server_error() && self.correlation_id.is_none() {
            tracing::error!(status = %self.status, detail = %self.detail, "request failed");
        }
        let body = match self.correlation_id {
            Some(id) => json!({"detail": self.detail, "correlation_id": id}),
            None => json!({"detail": self.detail}),
        };
        let mut response = (self.status, Json(body)).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        for (name, value) in &self.headers {
            if let (Ok(name), Ok(value)) = (
                header::HeaderName::from_bytes(name.as_bytes()),
                HeaderValue::from_str(value),
            ) {
                response.headers_mut().insert(name, value);
            }
        }
        if let Some(seconds) = self.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}
