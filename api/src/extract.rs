//! Extractors that turn bad requests into the api's error body: the caller from the bearer
//! token or the API key (401), JSON bodies (422 when malformed or mistyped or holding a NUL
//! character, 413 when too large) and query strings (422).

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::StatusCode;
use axum::http::header::{AUTHORIZATION, HOST, ORIGIN};
use axum::http::request::Parts;
use mostrador_queue::api_keys::is_api_key;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::app::AppState;
use crate::auth::{API_KEY_HEADER, AuthError, Caller, Credential};
use crate::error::ApiError;

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let header = |name: &str| {
            parts
                .headers
                .get(name)
                .and_then(|value| value.to_str().ok())
        };
        let credential = match Credential::from_headers(
            header(AUTHORIZATION.as_str()),
            header(API_KEY_HEADER),
        ) {
            Ok(Credential::ApiKey(key)) if !is_api_key(key) && state.has_development_caller() => {
                None
            }
            Ok(credential) => Some(credential),
            Err(AuthError::Missing) => None,
            Err(err) => return Err(err.into()),
        };
        if let Some(credential) = credential {
            return Ok(state.auth().authenticate(state.pool(), credential).await?);
        }
        // No credential of mostrador's: `mostrador dev`'s development caller for a request from
        // this machine, else the 401 of a missing credential.
        state
            .development_caller(header(HOST.as_str()), header(ORIGIN.as_str()))
            .cloned()
            .ok_or_else(|| AuthError::Missing.into())
    }
}

/// The request headers a run's `configurable` gets (`http.configurable_headers`), by name.
#[derive(Debug, Default)]
pub struct RunHeaders(pub serde_json::Map<String, Value>);

impl FromRequestParts<AppState> for RunHeaders {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let Some(filter) = state.configurable_headers() else {
            return Ok(Self::default());
        };
        Ok(Self(
            parts
                .headers
                .iter()
                .filter(|(name, _)| filter.copies(name.as_str()))
                .filter_map(|(name, value)| {
                    Some((
                        name.as_str().to_owned(),
                        Value::String(value.to_str().ok()?.to_owned()),
                    ))
                })
                .collect(),
        ))
    }
}

/// A query string (`?xray=true`); one that does not read as `T` (a key given twice) is a 422.
#[derive(Debug)]
pub struct Params<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for Params<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        // A NUL reaches a query only percent-encoded; Postgres's text cannot hold it.
        if parts.uri.query().is_some_and(|query| {
            query
                .as_bytes()
                .windows(3)
                .any(|w| w[0] == b'%' && w[1] == b'0' && w[2] == b'0')
        }) {
            return Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "query parameters may not contain the NUL character (%00)",
            ));
        }
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|axum::extract::Query(params)| Params(params))
            .map_err(|rejection| {
                ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, rejection.body_text())
            })
    }
}

/// A JSON request body.
#[derive(Debug)]
pub struct Body<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for Body<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        let Json(value) = Json::<Value>::from_request(request, state)
            .await
            .map_err(|rejection| rejected(&rejection))?;
        // JSON allows `\u0000`; PostgreSQL's jsonb and text do not, so the write would fail
        // after every check had passed.
        if holds_nul(&value) {
            return Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "strings and keys may not contain the NUL character (\\u0000)",
            ));
        }
        serde_json::from_value(value)
            .map(Body)
            .map_err(|error| ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, error.to_string()))
    }
}

fn holds_nul(value: &Value) -> bool {
    match value {
        Value::String(text) => text.contains('\0'),
        Value::Array(items) => items.iter().any(holds_nul),
        Value::Object(fields) => fields
            .iter()
            .any(|(key, value)| key.contains('\0') || holds_nul(value)),
        Value::Null | Value::Bool(_) | Value::Number(_) => false,
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
