//! A run's configuration: the run's own (`config`, or `context` for `configurable`), over its
//! assistant's, within the bounds a caller may ask for.

use mostrador_graph::Durability;
use mostrador_queue::run::RunConfig;
use serde_json::{Map, Value, json};

use crate::auth::Caller;
use crate::error::ApiError;

/// The most supersteps a run may ask for unless configured: a graph looping without end stops
/// there.
pub const RECURSION_LIMIT_MAX: u64 = 10_000;

/// A run's config, typed: `recursion_limit` (at most `max_recursion_limit`) and `max_concurrency`
/// (a request the worker bounds) are positive integers, and every key LangGraph reads means what
/// it says (422 otherwise).
pub(crate) fn typed(config: Value, max_recursion_limit: u64) -> Result<RunConfig, ApiError> {
    for (field, most) in [
        ("recursion_limit", max_recursion_limit),
        ("max_concurrency", u64::from(u32::MAX)),
    ] {
        if let Some(value) = config.get(field)
            && value.as_u64().is_none_or(|n| n == 0 || n > most)
        {
            return Err(ApiError::unprocessable(format!(
                "config.{field} must be a positive integer, at most {most}"
            )));
        }
    }
    RunConfig::from_value(config).map_err(super::queue_error)
}

pub(super) use mostrador_queue::data::assistants::config_under as under;

/// The context a request gives its run, as the official server reads it: `context`, or else a
/// copy of `config.configurable` (the two are one thing since LangGraph 0.6); never the keys that
/// name the caller, which the api alone sets.
pub(crate) fn own_context(
    context: Option<&Map<String, Value>>,
    config: Option<&Value>,
) -> Map<String, Value> {
    let mut own = match context.filter(|context| !context.is_empty()) {
        Some(context) => context.clone(),
        None => config
            .and_then(|config| config.get("configurable"))
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default(),
    };
    for key in CALLER_KEYS {
        own.remove(key);
    }
    own
}

/// The run's `config` as the worker reads it: `configurable` (or `context`), `recursion_limit`,
/// `max_concurrency`, `durability`.
pub(crate) fn run_config(
    config: Option<Value>,
    context: Option<Map<String, Value>>,
    durability: Option<Durability>,
) -> Result<Value, ApiError> {
    let mut config = match config {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(config)) => config,
        Some(_) => return Err(ApiError::unprocessable("config must be an object")),
    };
    if let Some(context) = context.filter(|context| !context.is_empty()) {
        if config.contains_key("configurable") {
            return Err(ApiError::bad_request(
                "specify either config.configurable or context, not both",
            ));
        }
        config.insert("configurable".into(), Value::Object(context));
    }
    if config
        .get("configurable")
        .is_some_and(|configurable| !configurable.is_object())
    {
        return Err(ApiError::unprocessable(
            "config.configurable must be an object",
        ));
    }
    if let Some(durability) = durability {
        config.insert("durability".into(), json!(durability));
    }
    Ok(Value::Object(config))
}

/// The keys of `configurable` that name the caller a run acts for, as the official server sets
/// them; what a client sends under these names is dropped, never believed.
const CALLER_KEYS: [&str; 3] = [
    "langgraph_auth_user",
    "langgraph_auth_user_id",
    "langgraph_auth_permissions",
];

/// Names `caller` in the run's `configurable` (`langgraph_auth_user` and its id), replacing
/// whatever the client put there: a graph learns who started or resumed the run (who decided an
/// approval, say) from the api, not from the request.
pub(crate) fn acting_for(configurable: &mut Map<String, Value>, caller: &Caller) {
    let map = configurable;
    for key in CALLER_KEYS {
        map.remove(key);
    }
    // The user a project's authenticate handler returned, whole, with its permissions.
    let (user, permissions) = match &caller.project_user {
        Some(project) => {
            let mut user = project.fields.clone();
            user["permissions"] = json!(project.permissions);
            (user, json!(project.permissions))
        }
        None => (
            json!({
                "identity": caller.subject,
                "display_name": caller.subject,
                "is_authenticated": true,
                "permissions": [],
                "roles": caller.roles,
                "tenant": caller.tenant,
            }),
            json!([]),
        ),
    };
    map.insert("langgraph_auth_user".into(), user);
    map.insert("langgraph_auth_user_id".into(), json!(caller.subject));
    map.insert("langgraph_auth_permissions".into(), permissions);
}
