//! A project's own HTTP routes (`http.app` of its `langgraph.json`: a Starlette or FastAPI app),
//! served on the api's port as officially: a request one of the app's routes matches (they come
//! before mostrador's own, as the official server puts them before its own) goes to the api's
//! helper processes ([`crate::project_code`]), which run it through the app whole, and its answer
//! comes back as it is written. With `http.enable_custom_route_auth`, the project's authenticate
//! handler names the caller first, as the app's `request.user`.

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderName, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use regex::Regex;

use crate::app::AppState;
use crate::auth::Caller;
use crate::custom_auth::RequestFacts;
use crate::project_code::{AppRoute, Ask, ProjectCode, refusal, unavailable};

/// The routes of a project's app, and the processes that run it.
#[derive(Clone, Debug)]
pub struct CustomRoutes {
    code: ProjectCode,
    routes: Vec<(Regex, Option<Vec<String>>)>,
    /// `http.enable_custom_route_auth`.
    authenticated: bool,
}

impl CustomRoutes {
    /// The routes of `code`'s app (`None`: it has no app).
    ///
    /// # Errors
    ///
    /// A route path that does not make a pattern.
    pub fn of(code: &ProjectCode, authenticated: bool) -> Result<Option<Self>, String> {
        let Some(routes) = &code.ready().routes else {
            return Ok(None);
        };
        let routes = routes
            .iter()
            .map(|route| Ok((pattern(route)?, route.methods.clone())))
            .collect::<Result<_, String>>()?;
        Ok(Some(Self {
            code: code.clone(),
            routes,
            authenticated,
        }))
    }

    /// The paths of the app's OpenAPI document (a FastAPI app's), for mostrador's.
    pub fn openapi_paths(&self) -> Option<&serde_json::Map<String, serde_json::Value>> {
        self.code
            .ready()
            .openapi
            .as_ref()?
            .get("paths")?
            .as_object()
    }

    /// Whether one of the app's routes takes `method` on `path` (a `GET` route takes `HEAD` too,
    /// as Starlette's do).
    pub fn matches(&self, method: &Method, path: &str) -> bool {
        self.routes.iter().any(|(pattern, methods)| {
            pattern.is_match(path)
                && methods.as_ref().is_none_or(|methods| {
                    methods.iter().any(|m| m == method.as_str())
                        || (method == Method::HEAD && methods.iter().any(|m| m == "GET"))
                })
        })
    }
}

/// A Starlette route's path as a pattern: `{name}` one segment, `{name:path}` the rest, `int`,
/// `float` and `uuid` converters as Starlette's; a mount matches its path and all below it.
fn pattern(route: &AppRoute) -> Result<Regex, String> {
    let mut out = String::from("^");
    let mut rest = route.path.as_str();
    while let Some(open) = rest.find('{') {
        out.push_str(&regex::escape(&rest[..open]));
        let close = rest[open..]
            .find('}')
            .ok_or_else(|| format!("the route {} does not close a parameter", route.path))?;
        let param = &rest[open + 1..open + close];
        out.push_str(match param.split_once(':').map(|(_, kind)| kind) {
            Some("path") => ".*",
            Some("int") => "[0-9]+",
            Some("float") => r"[0-9]+(\.[0-9]+)?",
            Some("uuid") => {
                "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
            }
            _ => "[^/]+",
        });
        rest = &rest[open + close + 1..];
    }
    out.push_str(&regex::escape(rest));
    if route.prefix {
        out.push_str("(/.*)?");
    }
    out.push('$');
    Regex::new(&out).map_err(|err| format!("the route {}: {err}", route.path))
}

/// Sends a request one of the project's routes matches to its app; any other goes on to
/// mostrador's routes.
pub async fn forward(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let Some(routes) = state.custom_routes() else {
        return next.run(request).await;
    };
    let path = request.uri().path();
    // The health checks, the metrics and the api's documents are mostrador's, whatever the app
    // says (as the official server keeps its own: a FastAPI app has a `/docs` of its own).
    let own = matches!(
        path,
        "/ok" | "/live" | "/ready" | "/metrics" | "/openapi.json"
    ) || path == "/docs"
        || path.starts_with("/docs/");
    if own || !routes.matches(request.method(), path) {
        return next.run(request).await;
    }
    let routes = routes.clone();
    match answer(&state, &routes, request).await {
        Ok(response) | Err(response) => response,
    }
}

async fn answer(
    state: &AppState,
    routes: &CustomRoutes,
    request: Request,
) -> Result<Response, Response> {
    let (parts, body) = request.into_parts();
    let user = if routes.authenticated && state.custom_auth().is_some() {
        let caller = Caller::of(&RequestFacts::of(&parts), state)
            .await
            .map_err(IntoResponse::into_response)?;
        caller.project_user
    } else {
        None
    };
    // Whole, within the request timeout, as every route reads its body.
    let body = crate::router::read_body(state.request_timeout(), state.body_limit(), body)
        .await
        .map_err(IntoResponse::into_response)?;
    let headers: Vec<(&str, &str)> = parts
        .headers
        .iter()
        .filter_map(|(name, value)| Some((name.as_str(), value.to_str().ok()?)))
        .collect();
    let mut lines = routes
        .code
        .ask_lines(&Ask::Http {
            method: parts.method.as_str(),
            path: parts.uri.path(),
            query: parts.uri.query().unwrap_or_default(),
            headers,
            body: STANDARD.encode(&body),
            user: user.as_ref().map(|user| &user.fields),
            permissions: user.as_ref().map(|user| user.permissions.as_slice()),
        })
        .await
        .map_err(IntoResponse::into_response)?;
    let first = lines
        .recv()
        .await
        .ok_or_else(|| unavailable().into_response())?;
    if let Some(error) = first.get("error") {
        return Err(refusal(error).into_response());
    }
    let start = &first["start"];
    let status = start["status"]
        .as_u64()
        .and_then(|status| u16::try_from(status).ok())
        .and_then(|status| StatusCode::from_u16(status).ok())
        .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let chunks = futures_util::stream::unfold(lines, |mut lines| async move {
        let line = lines.recv().await?;
        let chunk = line["chunk"].as_str()?;
        let bytes = STANDARD.decode(chunk).map(Bytes::from);
        Some((bytes, lines))
    });
    let mut response = Response::new(Body::from_stream(chunks));
    *response.status_mut() = status;
    for pair in start["headers"].as_array().into_iter().flatten() {
        let (Some(name), Some(value)) = (pair[0].as_str(), pair[1].as_str()) else {
            continue;
        };
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) {
            response.headers_mut().append(name, value);
        }
    }
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(path: &str, prefix: bool) -> Regex {
        pattern(&AppRoute {
            path: path.to_owned(),
            methods: None,
            prefix,
        })
        .expect("a pattern")
    }

    #[test]
    fn an_app_route_matches_as_starlette_matches_it() {
        assert!(route("/hello", false).is_match("/hello"));
        assert!(!route("/hello", false).is_match("/hello/there"));
        assert!(route("/items/{id}", false).is_match("/items/42"));
        assert!(!route("/items/{id}", false).is_match("/items/4/2"));
        assert!(route("/items/{id:int}", false).is_match("/items/42"));
        assert!(!route("/items/{id:int}", false).is_match("/items/x"));
        assert!(route("/files/{rest:path}", false).is_match("/files/a/b.txt"));
        assert!(route("/static", true).is_match("/static/app.js"));
        assert!(route("/static", true).is_match("/static"));
        assert!(!route("/static", true).is_match("/staticky"));
        assert!(route("/a.b", false).is_match("/a.b") && !route("/a.b", false).is_match("/axb"));
    }
}
