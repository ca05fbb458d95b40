//! A project's own authentication and authorization (`auth.path` of its `langgraph.json`), run
//! as the official server runs it: its `@auth.authenticate` handler names the caller of every
//! request, and its `@auth.on...` handlers allow, change or filter each action on threads,
//! assistants, crons and the store ([`Grant`]).
//!
//! The handlers are Python, run by the api's helper processes ([`crate::project_code`]).

pub mod event;
mod filter;

use std::collections::BTreeSet;

use serde_json::Value;

pub use event::Event;
pub use filter::AuthFilter;

use crate::error::ApiError;
use crate::project_code::{Ask, ProjectCode, bug};

/// The resources whose actions the api asks the project's handlers about (`*`: a handler for
/// every resource).
pub const SERVED: &[&str] = &["*", "threads", "assistants", "crons", "store"];

/// The user a project's authenticate handler returned, as its handlers and the graphs see it
/// (`langgraph_auth_user`): `identity`, `display_name`, `is_authenticated` and whatever else it
/// holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectUser {
    pub fields: Value,
    pub permissions: Vec<String>,
}

impl ProjectUser {
    pub fn identity(&self) -> &str {
        self.fields["identity"].as_str().unwrap_or_default()
    }
}

/// What a handler made of an action: the value it may have changed (metadata stamped with an
/// owner, a namespace prefixed) and the filter the action's resources must pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    pub value: Value,
    pub filter: Option<AuthFilter>,
}

impl Grant {
    /// Whether a resource with `metadata` passes the grant's filter.
    pub fn admits(&self, metadata: &Value) -> bool {
        self.filter
            .as_ref()
            .is_none_or(|filter| filter.admits(metadata))
    }

    /// The filter as a query takes it.
    pub fn filter_json(&self) -> Option<Value> {
        self.filter.as_ref().map(AuthFilter::as_json)
    }
}

/// What a request shows the authenticate handler, as officially.
#[derive(Debug)]
pub struct RequestFacts<'a> {
    pub method: &'a str,
    pub path: &'a str,
    pub query: &'a str,
    pub headers: &'a axum::http::HeaderMap,
}

/// The project's auth handlers, in its helper processes.
#[derive(Clone, Debug)]
pub struct CustomAuth(ProjectCode);

impl CustomAuth {
    /// The auth handlers of `code`, if it has any (`auth.path`).
    pub fn of(code: &ProjectCode) -> Self {
        Self(code.clone())
    }

    /// Whether the project has a handler for `resource`'s `action` (its own, its resource's,
    /// its action's, or a global one): without one, an action is allowed as it is, without
    /// asking a process.
    pub fn handles(&self, resource: &str, action: &str) -> bool {
        [
            (resource, action),
            (resource, "*"),
            ("*", action),
            ("*", "*"),
        ]
        .iter()
        .any(|(r, a)| {
            self.0
                .ready()
                .handlers
                .contains(&((*r).to_owned(), (*a).to_owned()))
        })
    }

    /// The resources the project's handlers concern (`*`: every one).
    pub fn resources(&self) -> BTreeSet<&str> {
        self.0
            .ready()
            .handlers
            .iter()
            .map(|(r, _)| r.as_str())
            .collect()
    }

    /// The caller of a request, as the authenticate handler names them (`None`: the project has
    /// none, and every request is anonymous).
    ///
    /// # Errors
    ///
    /// The handler's `HTTPException` (a 401 or whatever it raised), a 500 with a correlation id
    /// for a handler that failed otherwise, a 503 while no process is ready.
    pub async fn authenticate(
        &self,
        request: &RequestFacts<'_>,
    ) -> Result<Option<ProjectUser>, ApiError> {
        if !self.0.ready().authenticate {
            return Ok(None);
        }
        let headers: Vec<(&str, &str)> = request
            .headers
            .iter()
            .filter_map(|(name, value)| Some((name.as_str(), value.to_str().ok()?)))
            .collect();
        let answer = self
            .0
            .ask(&Ask::Authenticate {
                method: request.method,
                path: request.path,
                query: request.query,
                headers,
            })
            .await?;
        let permissions = answer["permissions"]
            .as_array()
            .map(|all| {
                all.iter()
                    .filter_map(|p| p.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        match answer.get("user") {
            Some(fields @ Value::Object(_)) => Ok(Some(ProjectUser {
                fields: fields.clone(),
                permissions,
            })),
            _ => Ok(None),
        }
    }

    /// What the handler for `resource`'s `action` makes of `value`, asked as `user`. Without a
    /// handler for it (or without a user: no authenticate handler) the action is allowed as is.
    ///
    /// # Errors
    ///
    /// A 403 for a handler's `False` or failed assertion, its `HTTPException`, a 500 with a
    /// correlation id for a handler that failed or returned a filter of the wrong shape, a 503
    /// while no process is ready.
    pub async fn event(
        &self,
        user: Option<&ProjectUser>,
        resource: &str,
        action: &str,
        value: Value,
    ) -> Result<Grant, ApiError> {
        let Some(user) = user.filter(|_| self.handles(resource, action)) else {
            return Ok(Grant {
                value,
                filter: None,
            });
        };
        let mut answer = self
            .0
            .ask(&Ask::Event {
                user: &user.fields,
                permissions: &user.permissions,
                resource,
                action,
                value,
            })
            .await?;
        let filter = match answer["filter"].take() {
            Value::Null => None,
            filter => Some(AuthFilter::new(filter).map_err(bug)?),
        };
        Ok(Grant {
            value: answer["value"].take(),
            filter,
        })
    }
}
