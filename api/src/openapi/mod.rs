//! `/openapi.json` and `/docs` (Swagger UI, served from the binary: no CDN).
//!
//! The router and the document are built from one table of the routes, [`ROUTES`] (with the
//! apps' [`AppRoute`]s): each names its handler, so the document cannot name a route the router
//! lacks. A second table, [`io::io`], names the types each route takes and answers, whose
//! schemas are derived from them (`utoipa::ToSchema`), and its query parameters (from the
//! handler's query type, `utoipa::IntoParams`, where it has one) and header parameters:
//! `tests/schemathesis/run` fuzzes the api from this document, so a schema there must say what
//! the handler accepts and answers, no more and no less.

use std::collections::BTreeMap;

use axum::routing::{MethodFilter, MethodRouter};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use utoipa::openapi::path::{HttpMethod, Operation, OperationBuilder, Parameter, Paths};
use utoipa::openapi::request_body::RequestBody;
use utoipa::openapi::response::Response;
use utoipa::openapi::security::{
    ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme,
};
use utoipa::openapi::{ComponentsBuilder, InfoBuilder, OpenApi, OpenApiBuilder, RefOr, Schema};

use crate::app::AppState;
pub use io::Io;
use io::io;
use schemas::path_parameter;
pub use schemas::{array, limit, offset, query, reference};

pub(crate) mod fields;
mod io;
mod routes;
mod schemas;

pub use routes::ROUTES;

fn method(name: &str) -> HttpMethod {
    match name {
        "post" => HttpMethod::Post,
        "put" => HttpMethod::Put,
        "patch" => HttpMethod::Patch,
        "delete" => HttpMethod::Delete,
        _ => HttpMethod::Get,
    }
}

fn describe(status: u16) -> &'static str {
    match status {
        200 => "OK",
        202 => "Accepted",
        204 => "No content",
        400 => "Bad request: {\"detail\": ...}",
        401 => "Missing, expired or invalid token",
        403 => "The caller's roles do not allow this",
        404 => "Not found, or not visible to the caller",
        408 => "The request's body did not arrive within the request timeout",
        409 => "Conflict with the thread's runs or state",
        413 => "Too large: the request's body, or the page of results it asks for",
        415 => "The body is not declared as JSON (Content-Type: application/json)",
        422 => "Invalid request: {\"detail\": ...}",
        503 => "Over a limit or draining: retry after Retry-After",
        _ => "",
    }
}

/// The statuses `route` answers with: those of [`ROUTES`], and those every route of its kind
/// may answer with: 400, 408, 413 and 415 for a JSON body (one cut short, one too slow, the
/// extractor's), and 503 behind a token (the
/// pod drains, or the database is away).
fn statuses(listed: &[u16], authenticated: bool, takes_body: bool) -> Vec<u16> {
    let mut statuses = listed.to_vec();
    if takes_body {
        statuses.extend([400, 408, 413, 415]);
    }
    if authenticated {
        statuses.push(503);
    }
    statuses.sort_unstable();
    statuses.dedup();
    statuses
}

/// An OpenAPI object from its JSON.
///
/// # Panics
///
/// On JSON utoipa cannot read: a bug of this module's tables, which its tests catch.
fn from_json<T: DeserializeOwned>(value: Value) -> T {
    serde_json::from_value(value).expect("the tables of this module are OpenAPI utoipa reads")
}

pub(crate) fn schema(value: Value) -> RefOr<Schema> {
    from_json(value)
}

/// A route: its handler and how the router wraps it, and how the document describes it. The
/// router and the document are both built from tables of these ([`ROUTES`], and the apps'), so
/// neither can name a route the other lacks.
#[derive(Debug, Clone, Copy)]
pub struct Route {
    /// `get`, `post`, `put`, `patch` or `delete`.
    pub method: &'static str,
    pub path: &'static str,
    pub tag: &'static str,
    pub summary: &'static str,
    /// The statuses it answers with (besides those every route of its kind may: [`statuses`]).
    pub statuses: &'static [u16],
    /// Its handler, on its method: `|method| on(method, handler)`.
    pub serve: fn(MethodFilter) -> MethodRouter<AppState>,
    pub kind: Kind,
}

/// Which of the api's layers wrap a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A call: bounded by the request timeout, refused while the pod drains.
    Call,
    /// A stream or a wait: as long as its run, refused while the pod drains.
    Lasting,
    /// A probe or the dashboard's page: answered while the pod drains.
    Probe,
}

impl Route {
    /// Its handler on its method.
    pub fn method_router(&self) -> MethodRouter<AppState> {
        let filter = match self.method {
            "post" => MethodFilter::POST,
            "put" => MethodFilter::PUT,
            "patch" => MethodFilter::PATCH,
            "delete" => MethodFilter::DELETE,
            _ => MethodFilter::GET,
        };
        (self.serve)(filter)
    }
}

/// A route an app of the binary adds ([`crate::AppRoutes`]), with what it takes and answers
/// (the api's own routes say it in [`io`]).
#[derive(Debug, Clone, Copy)]
pub struct AppRoute {
    pub route: Route,
    pub io: fn() -> Io,
}

fn operation(route: &Route, io: Io) -> Operation {
    let Route {
        path,
        tag,
        summary,
        statuses: listed,
        ..
    } = *route;
    let Io {
        parameters,
        body,
        ok,
        refused,
        schemas: _,
    } = io;
    let authenticated = !matches!(tag, "probes" | "dashboard");
    // `/ok` answers JSON, its 503 too (`ok: false`); the other probes plain text.
    let json_probe = !authenticated && ok.get("application/json").is_some();
    let mut operation = OperationBuilder::new()
        .tag(tag)
        .summary(Some(summary))
        .parameters(Some(
            path.split('/')
                .filter_map(|segment| segment.strip_prefix('{')?.strip_suffix('}'))
                .map(path_parameter)
                .chain(parameters)
                .map(from_json::<Parameter>),
        ));
    if let Some(body) = &body {
        operation = operation.request_body(Some(from_json::<RequestBody>(json!({
            "required": true,
            "content": {"application/json": {"schema": body}},
        }))));
    }
    for status in statuses(listed, authenticated, body.is_some()) {
        let content = match (status, &refused) {
            (200, _) => ok.clone(),
            (202 | 204, _) => json!({}),
            (400, Some(refused)) => refused.clone(),
            (503, _) if json_probe => ok.clone(),
            _ if !authenticated && !json_probe => {
                json!({"text/plain": {"schema": {"type": "string"}}})
            }
            _ => json!({"application/json": {"schema": reference("Error")}}),
        };
        let response: Response = from_json(json!({
            "description": describe(status),
            "content": content,
        }));
        operation = operation.response(status.to_string(), response);
    }
    if authenticated {
        // Either one: a JWT or an API key as a bearer token, or an API key as `x-api-key`.
        operation = operation
            .security(SecurityRequirement::new::<_, _, &str>("bearer", []))
            .security(SecurityRequirement::new::<_, _, &str>("apiKey", []));
    }
    operation.build()
}

/// The OpenAPI document: the api's routes, and those of the apps the binary registers, with
/// the schemas of the types their bodies and answers are.
pub fn document(apps: &[crate::AppRoutes]) -> OpenApi {
    let mut paths = Paths::new();
    let mut named: BTreeMap<String, RefOr<Schema>> =
        io::named::<crate::wire::ErrorBody>().into_iter().collect();
    let api = ROUTES.iter().map(|route| {
        let io = io(route.method, route.path);
        (
            route,
            io.unwrap_or_else(|| panic!("{} {} has no io", route.method, route.path)),
        )
    });
    let apps_routes = apps
        .iter()
        .flat_map(|app| app.routes)
        .map(|app| (&app.route, (app.io)()));
    for (route, io) in api.chain(apps_routes) {
        named.extend(io.schemas.iter().cloned());
        paths.add_path_operation(route.path, vec![method(route.method)], operation(route, io));
    }
    let mut components = ComponentsBuilder::new()
        .security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format("JWT")
                    .description(Some(
                        "A JWT, or an API key (`mostrador_…`, from `mostrador api-key create`).",
                    ))
                    .build(),
            ),
        )
        .security_scheme(
            "apiKey",
            SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::with_description(
                crate::auth::API_KEY_HEADER,
                "An API key (`mostrador_…`), as the langgraph-sdk sends LANGGRAPH_API_KEY.",
            ))),
        );
    for (name, schema) in named {
        components = components.schema(name, schema);
    }
    OpenApiBuilder::new()
        .info(
            InfoBuilder::new()
                .title("mostrador")
                .version(env!("CARGO_PKG_VERSION"))
                .description(Some(
                    "LangGraph-style agent graphs served from PostgreSQL, speaking the langgraph-sdk wire protocol.",
                ))
                .build(),
        )
        .paths(paths)
        .components(Some(components.build()))
        .build()
}

/// `document` as a project's own auth handlers describe it (`auth.path`): mostrador's schemes and
/// each route's requirement give way to what `auth.openapi` says, as officially (its
/// `securitySchemes`, or `security_schemes`; its default `security`; its `paths`' own per
/// method); without `auth.openapi`, no requirement at all, as the official document has none.
///
/// # Errors
///
/// The document does not serialize (a bug).
pub fn with_project_security(
    document: &OpenApi,
    openapi: Option<&Value>,
) -> Result<Value, serde_json::Error> {
    let mut doc = serde_json::to_value(document)?;
    for item in doc["paths"]
        .as_object_mut()
        .into_iter()
        .flat_map(|paths| paths.values_mut())
    {
        for operation in item
            .as_object_mut()
            .into_iter()
            .flat_map(|item| item.values_mut())
        {
            if let Some(operation) = operation.as_object_mut() {
                operation.remove("security");
            }
        }
    }
    if let Some(components) = doc["components"].as_object_mut() {
        components.remove("securitySchemes");
    }
    if let Some(openapi) = openapi {
        let schemes = openapi
            .get("securitySchemes")
            .or_else(|| openapi.get("security_schemes"));
        if let Some(schemes) = schemes {
            doc["components"]["securitySchemes"] = schemes.clone();
        }
        if let Some(security) = openapi.get("security") {
            doc["security"] = security.clone();
        }
        for (path, methods) in openapi["paths"].as_object().into_iter().flatten() {
            for (method, security) in methods.as_object().into_iter().flatten() {
                // Only an operation the document has (indexing would add the others).
                let operation = doc
                    .get_mut("paths")
                    .and_then(|paths| paths.get_mut(path))
                    .and_then(|item| item.get_mut(method.to_lowercase()))
                    .and_then(Value::as_object_mut);
                if let Some(operation) = operation {
                    operation.insert("security".into(), security.clone());
                }
            }
        }
    }
    Ok(doc)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde::Serialize;
    use utoipa::openapi::content::Content;

    use super::*;

    /// A route the table forgets would be documented as answering anything.
    #[test]
    fn every_route_says_what_it_takes_and_answers() {
        let forgotten: Vec<String> = ROUTES
            .iter()
            .filter(|route| io(route.method, route.path).is_none())
            .map(|route| format!("{} {}", route.method, route.path))
            .collect();
        assert!(forgotten.is_empty(), "{forgotten:#?}");
    }

    #[test]
    fn a_projects_handlers_describe_the_security_in_place_of_mostradors() {
        let document = document(&[]);
        let openapi = json!({
            "security_schemes": {"tokens": {"type": "http", "scheme": "bearer"}},
            "security": [{"tokens": []}],
            "paths": {"/threads": {"POST": []}, "/nowhere": {"GET": []}},
        });
        let described = with_project_security(&document, Some(&openapi)).expect("serializes");
        assert_eq!(
            described["components"]["securitySchemes"],
            openapi["security_schemes"]
        );
        assert_eq!(described["security"], json!([{"tokens": []}]));
        assert_eq!(
            described["paths"]["/threads"]["post"]["security"],
            json!([])
        );
        assert!(
            described["paths"]["/threads/search"]["post"]
                .get("security")
                .is_none()
        );
        assert!(described["paths"].get("/nowhere").is_none());
        // Without `auth.openapi`: no requirement at all, none of mostrador's schemes.
        let bare = with_project_security(&document, None).expect("serializes");
        assert!(bare["components"].get("securitySchemes").is_none());
        assert!(bare["paths"]["/threads"]["post"].get("security").is_none());
    }

    /// `value` as utoipa writes it back: without the `"type": null` of [`any`].
    fn written(value: &Value) -> Value {
        match value {
            Value::Object(map) => Value::Object(
                map.iter()
                    .filter(|(key, value)| !(*key == "type" && value.is_null()))
                    .map(|(key, value)| (key.clone(), written(value)))
                    .collect(),
            ),
            Value::Array(items) => Value::Array(items.iter().map(written).collect()),
            other => other.clone(),
        }
    }

    fn round_trip<T: DeserializeOwned + Serialize>(value: &Value) -> Value {
        serde_json::to_value(from_json::<T>(value.clone())).expect("serializes")
    }

    /// utoipa reads schemas through untagged enums, which drop what they do not know: a schema
    /// of the tables that it read differently would silently say something else.
    #[test]
    fn every_schema_of_the_tables_reads_without_loss() {
        let mut schemas: Vec<Value> = Vec::new();
        for Route {
            method: name, path, ..
        } in ROUTES
        {
            let io = io(name, path).expect("every route has its io");
            schemas.extend(io.body);
            assert_eq!(
                round_trip::<BTreeMap<String, Content>>(&io.ok),
                written(&io.ok),
                "{name} {path}"
            );
            for parameter in io.parameters {
                assert_eq!(
                    round_trip::<Parameter>(&parameter),
                    written(&parameter),
                    "{name} {path}"
                );
            }
        }
        for value in &schemas {
            assert_eq!(round_trip::<RefOr<Schema>>(value), written(value));
        }
    }

    /// A schema derived from a type says what its fields are, not what a Rust `Default` of them
    /// is: no field anywhere has a default of null.
    #[test]
    fn no_field_defaults_to_null() {
        fn check(value: &Value, at: &str) {
            match value {
                Value::Object(map) => {
                    assert!(
                        map.get("default") != Some(&Value::Null),
                        "a null default at {at}"
                    );
                    for (key, value) in map {
                        check(value, &format!("{at}/{key}"));
                    }
                }
                Value::Array(items) => items.iter().for_each(|item| check(item, at)),
                _ => {}
            }
        }
        let document = serde_json::to_value(document(&[])).expect("serializes");
        check(&document, "");
        assert!(
            document["components"]["schemas"]["RunRequest"]["properties"]["limit"].is_null(),
            "the check reads the derived schemas"
        );
        assert!(
            document["components"]["schemas"]["ThreadSearch"]["properties"]["limit"]["default"]
                == 10
        );
    }

    #[test]
    fn every_path_parameter_is_declared() {
        let document = serde_json::to_value(document(&[])).expect("serializes");
        for Route {
            method: name, path, ..
        } in ROUTES
        {
            let declared: Vec<&str> = document["paths"][path][name]["parameters"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|parameter| parameter["in"] == "path")
                .filter_map(|parameter| parameter["name"].as_str())
                .collect();
            let templated: Vec<&str> = path
                .split('/')
                .filter_map(|segment| segment.strip_prefix('{')?.strip_suffix('}'))
                .collect();
            assert_eq!(declared, templated, "{name} {path}");
        }
    }
}
