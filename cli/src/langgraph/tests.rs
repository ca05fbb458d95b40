//! What of a `langgraph.json` is served, and what is refused at start-up, by name.

use super::project;

fn refused(text: &str) -> String {
    format!("{:#}", project(text).expect_err("refused"))
}

#[test]
fn graphs_are_read_by_id_with_their_descriptions() {
    let served = project(
        r#"{"graphs": {"b": "./b.py:graph", "a": {"path": "./a.py:make", "description": "A"},
            "m": "my_agent.graph:graph"}, "dependencies": ["."], "env": ".env",
            "python_version": "3.12", "dockerfile_lines": [], "$schema": "x"}"#,
    )
    .expect("served");
    let graphs: Vec<_> = served.graphs.into_iter().collect();
    assert_eq!(
        graphs,
        vec![
            ("a".to_owned(), Some("A".to_owned())),
            ("b".to_owned(), None),
            ("m".to_owned(), None)
        ]
    );
}

#[test]
fn a_malformed_project_is_refused() {
    assert!(refused(r#"{"graphs": {"a": "./a.py"}}"#).contains("graphs.a"));
    assert!(project(r#"{"graphs": {}}"#).is_err());
    assert!(project(r#"{"dependencies": ["."]}"#).is_err());
    assert!(refused(r#"{"graphs": {"a": "./a.py:g"}, "grpahs": {}}"#).contains("grpahs"));
}

#[test]
fn javascript_graphs_auth_and_app_are_served_beside_python_ones() {
    let served = project(
        r#"{"graphs": {"py": "./a.py:g", "js": "./src/graph.ts:graph", "mjs": {"path": "./b.mjs:g"}},
            "node_version": "20", "dependencies": ["."]}"#,
    )
    .expect("served");
    assert_eq!(served.graphs.len(), 3);
    assert_eq!(
        served.javascript.into_iter().collect::<Vec<_>>(),
        vec!["js".to_owned(), "mjs".to_owned()]
    );
    let with_auth = project(
        r#"{"graphs": {"js": "./src/graph.ts:graph"}, "auth": {"path": "./src/auth.ts:auth"}}"#,
    )
    .expect("served");
    assert_eq!(with_auth.auth_path.as_deref(), Some("./src/auth.ts:auth"));
    let with_app = project(
        r#"{"graphs": {"js": "./src/graph.ts:graph"}, "http": {"app": "./src/app.ts:app"}}"#,
    )
    .expect("served");
    assert_eq!(with_app.app_path.as_deref(), Some("./src/app.ts:app"));
}

#[test]
fn custom_auth_is_taken_and_what_is_not_its_shape_is_refused_by_name() {
    let served = project(
        r#"{"graphs": {"a": "./a.py:g"}, "auth": {"path": "./auth.py:auth", "disable_studio_auth": true}}"#,
    )
    .expect("served");
    assert_eq!(served.auth_path.as_deref(), Some("./auth.py:auth"));
    let message = refused(r#"{"graphs": {"a": "./a.py:g"}, "auth": {"path": "auth"}}"#);
    assert!(message.contains("auth.path"), "{message}");
    let message = refused(
        r#"{"graphs": {"a": "./a.py:g"}, "auth": {"path": "./auth.py:auth", "openapi": 1}}"#,
    );
    assert!(message.contains("auth.openapi"), "{message}");
    let message = refused(
        r#"{"graphs": {"a": "./a.py:g"}, "auth": {"path": "./auth.py:auth", "cache": {}}}"#,
    );
    assert!(message.contains("auth.cache"), "{message}");
}

#[test]
fn http_keys_of_the_wrong_shape_are_refused_by_name() {
    project(
        r#"{"graphs": {"a": "./a.py:g"}, "http": {"app": "./app.py:app",
            "enable_custom_route_auth": true, "middleware_order": "auth_first"}}"#,
    )
    .expect("served");
    for key in ["app", "middleware_order"] {
        let message = refused(&format!(
            r#"{{"graphs": {{"a": "./a.py:g"}}, "http": {{"{key}": {{}}}}}}"#
        ));
        assert!(message.contains(&format!("http.{key}")), "{key}: {message}");
    }
    // What has nothing to switch off here, or switches nothing off, is no refusal.
    let served = project(
        r#"{"graphs": {"a": "./a.py:g"}, "http": {"disable_mcp": true, "disable_a2a": true,
            "disable_ui": true, "disable_store": false, "logging_headers": {}}}"#,
    )
    .expect("served");
    assert!(served.disabled_routes.mcp, "MCP switched off");
    assert!(served.disabled_routes.a2a, "A2A switched off");
    assert!(!served.disabled_routes.store);
}

#[test]
fn store_and_checkpointer_keys_not_honoured_are_refused_by_name() {
    for (key, field) in [
        ("store", "path"),
        ("checkpointer", "path"),
        ("checkpointer", "serde"),
    ] {
        let message = refused(&format!(
            r#"{{"graphs": {{"a": "./a.py:g"}}, "{key}": {{"{field}": {{}}}}}}"#
        ));
        assert!(message.contains(&format!("{key}.{field}")), "{message}");
    }
}

#[test]
fn a_store_index_is_taken_and_what_is_not_its_shape_is_refused_by_name() {
    let served = project(
        r#"{"graphs": {"a": "./a.py:g"}, "store": {"index": {
            "embed": "openai:text-embedding-3-small", "dims": 1536, "fields": ["text", "tags[*]"],
            "distance_type": "cosine"}}}"#,
    )
    .expect("an index of the official shape is served");
    assert!(served.store_index);
    assert!(
        !project(r#"{"graphs": {"a": "./a.py:g"}}"#)
            .expect("served")
            .store_index
    );
    for (index, named) in [
        (r#"{"dims": 3}"#, "names no embedding function"),
        (r#"{"embed": "embed_texts"}"#, "embed must be"),
        (r#"{"embed": "./e.py:f", "dims": 0}"#, "dims must be"),
        (
            r#"{"embed": "./e.py:f", "fields": "text"}"#,
            "fields must be",
        ),
        (
            r#"{"embed": "./e.py:f", "distance_type": "l2"}"#,
            "cosine similarity only",
        ),
        (
            r#"{"embed": "./e.py:f", "dimensions": 3}"#,
            "dimensions: not a key",
        ),
        (
            r#"{"embed": "./src/embed.ts:embed", "dims": 3}"#,
            "JavaScript function",
        ),
    ] {
        let message = refused(&format!(
            r#"{{"graphs": {{"a": "./a.py:g"}}, "store": {{"index": {index}}}}}"#
        ));
        assert!(
            message.contains("store.index") && message.contains(named),
            "{message}"
        );
    }
}

#[test]
fn hooks_webhooks_and_ui_are_refused_by_name() {
    for key in ["encryption", "priority", "webhooks", "ui", "ui_config"] {
        let message = refused(&format!(
            r#"{{"graphs": {{"a": "./a.py:g"}}, "{key}": {{"path": "./x.py:x"}}}}"#
        ));
        assert!(message.contains(&format!("{key}:")), "{key}: {message}");
    }
}

#[test]
fn cors_and_configurable_headers_are_read_with_the_official_defaults() {
    let served = project(
        r#"{"graphs": {"a": "./a.py:g"}, "http": {
            "cors": {"allow_origins": ["https://app.example.com"],
                     "allow_origin_regex": "https://.*\\.vercel\\.app", "max_age": 60},
            "configurable_headers": {"includes": ["x-user-*"], "excludes": ["x-user-secret"]}}}"#,
    )
    .expect("served");
    let cors = served.cors.expect("cors");
    assert_eq!(cors.allow_origins, ["https://app.example.com"]);
    assert_eq!(cors.allow_methods, ["GET"], "Starlette's default");
    assert_eq!(cors.max_age, 60);
    let regex = cors.origin_regex().expect("compiles").expect("a regex");
    assert!(regex.is_match("https://preview-1.vercel.app"));
    assert!(
        !regex.is_match("https://preview-1.vercel.app.evil.com"),
        "matched whole"
    );
    let headers = served.configurable_headers.expect("headers");
    assert!(headers.copies("x-user-tier"));
    assert!(!headers.copies("x-user-secret"));
    assert!(!headers.copies("x-other"));
    for bad in [
        r#"{"cors": {"allow_origin_regex": "("}}"#,
        r#"{"cors": {"allow_origins": "https://x"}}"#,
        r#"{"cors": {"allow_everything": true}}"#,
        r#"{"configurable_headers": {"includes": "x-*"}}"#,
    ] {
        let text = format!(r#"{{"graphs": {{"a": "./a.py:g"}}, "http": {bad}}}"#);
        assert!(refused(&text).contains("http."), "{bad}");
    }
}

#[test]
fn times_to_live_are_read_as_the_official_server_reads_them() {
    let served = project(
        r#"{"graphs": {"a": "./a.py:g"},
            "checkpointer": {"ttl": {"strategy": "keep_latest", "default_ttl": 43200,
                                     "sweep_interval_minutes": 10, "sweep_limit": 100}},
            "store": {"ttl": {"default_ttl": 60, "refresh_on_read": false}}}"#,
    )
    .expect("served");
    let thread = served.thread_ttl.expect("a thread ttl");
    assert!((thread.minutes - 43200.0).abs() < f64::EPSILON && thread.keep_latest);
    assert_eq!(served.store_ttl.default_minutes, Some(60.0));
    assert!(!served.store_ttl.refresh_on_read);
    for bad in [
        r#""checkpointer": {"ttl": {"strategy": "forget"}}"#,
        r#""checkpointer": {"ttl": {"default_ttl": -1}}"#,
        r#""store": {"ttl": {"refresh_on_read": "yes"}}"#,
        r#""store": {"ttl": {"forever": true}}"#,
    ] {
        let text = format!(r#"{{"graphs": {{"a": "./a.py:g"}}, {bad}}}"#);
        assert!(refused(&text).contains(".ttl"), "{bad}");
    }
}

#[test]
fn route_groups_and_webhooks_are_switched_off_as_the_official_server_does() {
    let served = project(
        r#"{"graphs": {"a": "./a.py:g"}, "http": {"disable_store": true, "disable_meta": true,
            "disable_assistants": false, "disable_webhooks": true}}"#,
    )
    .expect("served");
    let groups = served.disabled_routes;
    assert!(groups.store && groups.meta && !groups.assistants && !groups.runs);
    assert!(groups.disables("/store/items") && groups.disables("/openapi.json"));
    assert!(!groups.disables("/ok") && !groups.disables("/threads"));
    assert!(served.disable_webhooks);
    assert!(
        refused(r#"{"graphs": {"a": "./a.py:g"}, "http": {"disable_runs": "yes"}}"#)
            .contains("http.disable_runs")
    );
    assert!(
        refused(r#"{"graphs": {"a": "./a.py:g"}, "http": {"disable_everything": true}}"#)
            .contains("http.disable_everything")
    );
}

#[test]
fn a_mount_prefix_is_read_as_the_official_server_checks_it() {
    let served = project(r#"{"graphs": {"a": "./a.py:g"}, "http": {"mount_prefix": "/api/v1"}}"#)
        .expect("served");
    assert_eq!(served.mount_prefix.as_deref(), Some("/api/v1"));
    for bad in [r#""api""#, r#""/api/""#, r#""/""#, "7"] {
        let text =
            format!(r#"{{"graphs": {{"a": "./a.py:g"}}, "http": {{"mount_prefix": {bad}}}}}"#);
        assert!(refused(&text).contains("http.mount_prefix"), "{bad}");
    }
}
