//! Extractors that turn bad requests into the api's error body: the caller from the bearer
//! token (401), and JSON bodies (422 when malformed or mistyped, 413 when too large).

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::StatusCode;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use crate::app::AppState;
use crate::auth::Caller;
use crate::error::ApiError;

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let header = parts
            .headers
            .get(AUTHORIZATION)
            .and_then(|value| value.to_str().ok());
        Ok(state.auth().verify_header(header).await?)
    }
}

/// A JSON request body.
#[derive(Debug)]
pub struct Body<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for Body<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        match Json::<T>::from_request(request, state).await {
            Ok(Json(value)) => Ok(Body(value)),
            Err(rejection) => Err(rejected(&rejection)),
        }
    }
}

fn rejected(rejection: &JsonRejection) -> ApiError {
    let status = match rejection {
        JsonRejection::JsonDataError(_) | JsonRejection::JsonSyntaxError(_) => {
            StatusCode::UNPROCESSABLE_ENTITY
        }
        other => other.status(),
    };
    ApiError::new(status, rejection.body_text())
}
