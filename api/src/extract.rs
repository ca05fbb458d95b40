//! Extractors that turn bad requests into the api's error body: the caller from the bearer
//! token or the API key (401), JSON bodies (422 when malformed or mistyped or holding a NUL
//! character, 413 when too large) and query strings (422).

use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::StatusCode;
use axum::http::header::{AUTHORIZATION, HOST, ORIGIN};
use axum::http::request::Parts;
use mostrador_queue::data::api_keys::is_api_key;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::app::AppState;
use crate::auth::{API_KEY_HEADER, AuthError, Caller, Credential};
use crate::custom_auth::RequestFacts;
use crate::error::ApiError;

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        Caller::of(&RequestFacts::of(parts), state).await
    }
}

impl<'a> RequestFacts<'a> {
    /// What a request shows: its method, path, query and headers.
    pub fn of(parts: &'a Parts) -> Self {
        Self {
            method: parts.method.as_str(),
            path: parts.uri.path(),
            query: parts.uri.query().unwrap_or_default(),
            headers: &parts.headers,
        }
    }
}

impl Caller {
    /// Who sends `request`: the user the project's authenticate handler names (`auth.path`),
    /// else its bearer token's or API key's subject, or `mostrador dev`'s development caller for
    /// one from this machine without a credential of mostrador's. Asked again of a stream's
    /// request before each run it follows, so that a revoked key or an expired token stops it.
    ///
    /// # Errors
    ///
    /// A 401 for a missing, invalid, expired or revoked credential; a 503 when the database (an
    /// API key's table) failed. Under `auth.path`, what its handler answered
    /// ([`crate::custom_auth::CustomAuth::authenticate`]).
    pub async fn of(request: &RequestFacts<'_>, state: &AppState) -> Result<Self, ApiError> {
        if let Some(custom) = state.custom_auth() {
            return Ok(Caller::of_project(custom.authenticate(request).await?));
        }
        let headers = request.headers;
        let header = |name: &str| headers.get(name).and_then(|value| value.to_str().ok());
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
            return Err(ApiError::unprocessable(
                "query parameters may not contain the NUL character (%00)",
            ));
        }
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|axum::extract::Query(params)| Params(params))
            .map_err(|rejection| ApiError::unprocessable(rejection.body_text()))
    }
}

/// A JSON request body, read straight into `T`: a body's memory is its bytes and what `T` makes
/// of them, never a whole [`Value`] tree first. What a body would parse into is estimated from
/// its bytes (one pass, no allocation): a body that would take more than eight times its size and
/// a megabyte (megabytes of tiny values, each a [`Value`] of 32 bytes or more) is a 413, and the
/// bodies being parsed at once take at most [`PARSE_BUDGET`] across the process (the others wait).
#[derive(Debug)]
pub struct Body<T>(pub T);

/// What the bodies being parsed at once may take in memory, estimated: a body of the largest
/// default limit (10 MiB) at its largest, and a few more.
pub const PARSE_BUDGET: usize = 128 * 1024 * 1024;

/// The estimated memory of the bodies being parsed, in KiB, across the process.
static PARSING: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(PARSE_BUDGET >> 10);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for Body<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        if !is_json(request.headers()) {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "Expected request with `Content-Type: application/json`",
            ));
        }
        let bytes = axum::body::Bytes::from_request(request, state)
            .await
            .map_err(|rejection| ApiError::new(rejection.status(), rejection.body_text()))?;
        let scanned = scan(&bytes);
        // JSON allows `\u0000`; PostgreSQL's jsonb and text do not, so the write would fail
        // after every check had passed.
        if scanned.nul {
            return Err(ApiError::unprocessable(
                "strings and keys may not contain the NUL character (\\u0000)",
            ));
        }
        let memory = scanned.memory(bytes.len());
        // A body larger than the budget (a higher `--body-limit`) takes all of it.
        let kib = memory.div_ceil(1024).min(PARSE_BUDGET >> 10);
        let Some(permits) = u32::try_from(kib)
            .ok()
            .filter(|_| memory <= bytes.len().saturating_mul(8).saturating_add(1 << 20))
        else {
            return Err(ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!(
                    "the request body holds {} JSON values in {} bytes: parsed, they would take \
                     {} MiB, more than eight times its size",
                    scanned.values,
                    bytes.len(),
                    memory >> 20
                ),
            ));
        };
        let _parsing = PARSING
            .acquire_many(permits)
            .await
            .map_err(ApiError::failed)?;
        serde_json::from_slice(&bytes)
            .map(Body)
            .map_err(|error| ApiError::unprocessable(error.to_string()))
    }
}

/// Whether the request says its body is JSON (`application/json`, or a `+json` type), as axum's
/// `Json` asks.
fn is_json(headers: &axum::http::HeaderMap) -> bool {
    let Some(content_type) = headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
    else {
        return false;
    };
    let essence = content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || essence.starts_with("application/") && essence.ends_with("+json")
}

/// What [`scan`] tells of a JSON text.
#[derive(Debug, Default, PartialEq, Eq)]
struct Scanned {
    /// Its values (each scalar, array and object, and each object's key).
    values: usize,
    /// Whether a string or key holds `\u0000`.
    nul: bool,
}

impl Scanned {
    /// At most what its values take parsed as [`Value`]s: a value's 32 bytes, twice over for a
    /// vector's spare room, beside the text's own bytes (its strings).
    fn memory(&self, len: usize) -> usize {
        self.values.saturating_mul(64).saturating_add(len)
    }
}

/// Counts a JSON text's values and looks for an escaped NUL, in one pass over its bytes. Not a
/// validator: serde refuses what is malformed; this has only to be right about what is not.
fn scan(bytes: &[u8]) -> Scanned {
    let mut scanned = Scanned::default();
    let mut in_string = false;
    // Within a number or a literal (`true`), counted at its first byte.
    let mut in_scalar = false;
    let mut i = 0;
    while i < bytes.len() {
        match (in_string, bytes[i]) {
            (true, b'\\') => {
                scanned.nul |= bytes.get(i + 1..i + 6) == Some(b"u0000");
                // The escaped byte is not the string's end.
                i += 1;
            }
            (true, b'"') => in_string = false,
            (true, _) => {}
            (false, b'"') => {
                in_string = true;
                in_scalar = false;
                scanned.values += 1;
            }
            (false, b'[' | b'{') => {
                in_scalar = false;
                scanned.values += 1;
            }
            (false, b']' | b'}' | b',' | b':' | b' ' | b'\t' | b'\n' | b'\r') => in_scalar = false,
            (false, _) => {
                if !in_scalar {
                    in_scalar = true;
                    scanned.values += 1;
                }
            }
        }
        i += 1;
    }
    scanned
}

#[cfg(test)]
mod tests {
    use super::{Scanned, scan};

    #[test]
    fn a_bodys_values_are_counted_and_an_escaped_nul_found_in_its_strings_only() {
        let counted = |text: &str| scan(text.as_bytes());
        assert_eq!(
            counted(r#"{"a": [1, 22, true, null], "b": {"c": "x,y"}}"#),
            Scanned {
                values: 11,
                nul: false
            }
        );
        assert_eq!(
            counted("[[],[],[]]"),
            Scanned {
                values: 4,
                nul: false
            }
        );
        assert!(counted(r#"{"a": "x\u0000"}"#).nul);
        assert!(counted(r#"{"a\u0000": 1}"#).nul);
        assert!(
            !counted(r#"{"a": "x\\u0000"}"#).nul,
            "an escaped backslash, then text"
        );
        assert!(!counted(r#"{"a": "\"", "b": "u0000"}"#).nul);
    }
}
