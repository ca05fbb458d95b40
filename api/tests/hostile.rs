//! Hostile input, generated (proptest strategies, a fixed seed so a failure reproduces): the
//! `Last-Event-ID` header, bearer tokens, and run-create bodies. Nothing panics, nothing answers a
//! 500, nothing malformed is accepted (no mangled token changes who calls), and a refused request
//! writes nothing.

use axum::http::{HeaderMap, HeaderValue, StatusCode};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;
use serde_json::{Map, Value, json};
use sqlx::PgPool;

use crate::support::{Api, caller};

/// `n` values of `strategy`, the same on every run.
fn samples<T: std::fmt::Debug>(strategy: impl Strategy<Value = T>, n: usize) -> Vec<T> {
    let mut runner = TestRunner::deterministic();
    (0..n)
        .map(|_| strategy.new_tree(&mut runner).expect("a value").current())
        .collect()
}

#[test]
fn last_event_id_reads_sequence_numbers_and_nothing_else_as_an_event() {
    let headers = prop_oneof![
        any::<String>(),
        any::<i64>().prop_map(|n| n.to_string()),
        any::<u64>().prop_map(|n| format!(" {n} ")),
        Just("1e3".to_owned()),
        Just("0x10".to_owned()),
        Just("1796013920780-0".to_owned()),
        Just("-1".to_owned()),
        Just("-2".to_owned()),
    ];
    for text in samples(headers, 5_000) {
        let Ok(value) = HeaderValue::from_str(&text) else {
            continue; // Not a header value: no client can send it.
        };
        let mut headers = HeaderMap::new();
        headers.insert("last-event-id", value);
        // `-1` is "from the start" (the JS SDK's default when it rejoins).
        let expected = text
            .trim()
            .parse::<i64>()
            .ok()
            .filter(|n| *n >= -1)
            .map(|n| n.max(0));
        // Anything else names no event: the stream goes on from the run's latest.
        assert_eq!(
            mostrador_api::stream::last_event_id(&headers),
            expected,
            "{text:?}"
        );
    }
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn mangled_tokens_never_change_who_calls(pool: PgPool) {
    let api = Api::new(pool).await;
    let token = api.token_for(&caller("ana", "manager", Some("madrid-centro")));
    assert!(
        api.state.auth().verify(&token).await.is_ok(),
        "the original verifies"
    );
    let len = token.len();
    let mangle = prop_oneof![
        // One byte replaced.
        (
            0..len,
            any::<u8>().prop_filter("printable", |b| b.is_ascii_graphic())
        )
            .prop_map({
                let token = token.clone();
                move |(at, byte)| {
                    let mut bytes = token.clone().into_bytes();
                    bytes[at] = byte;
                    String::from_utf8_lossy(&bytes).into_owned()
                }
            }),
        // Cut short.
        (0..len).prop_map({
            let token = token.clone();
            move |at| token[..at].to_owned()
        }),
        // Segments shuffled or dropped.
        Just(token.split('.').rev().collect::<Vec<_>>().join(".")),
        Just(token.split('.').take(2).collect::<Vec<_>>().join(".") + "."),
        // The payload of another token with this one's signature.
        Just({
            let other = api.token_for(&caller("luis", "manager", Some("madrid-centro")));
            let (mine, theirs) = (
                token.split('.').collect::<Vec<_>>(),
                other.split('.').collect::<Vec<_>>(),
            );
            format!("{}.{}.{}", mine[0], theirs[1], mine[2])
        }),
        any::<String>(),
    ];
    let original = api.state.auth().verify(&token).await.expect("verifies");
    for mangled in samples(mangle, 2_000) {
        // Base64 lets a last character change without changing the bytes it decodes to: such a
        // token is the same token. Whatever verifies must be exactly the original caller.
        if let Ok(verified) = api.state.auth().verify(&mangled).await {
            assert_eq!(
                verified, original,
                "a mangled token changed who calls: {mangled:?}"
            );
        }
    }
}

/// JSON of any shape, a few levels deep.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>().prop_map(|f| json!(f)),
        any::<String>().prop_map(Value::String),
        Just(json!("agent")),
        Just(json!("values")),
        Just(json!("enqueue")),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::vec((any::<String>(), inner), 0..4)
                .prop_map(|pairs| Value::Object(pairs.into_iter().collect())),
        ]
    })
}

/// A run-create body: the keys the api knows (and some it does not) with values of any shape.
fn run_body() -> impl Strategy<Value = Value> {
    const KEYS: [&str; 15] = [
        "assistant_id",
        "input",
        "command",
        "config",
        "context",
        "metadata",
        "stream_mode",
        "multitask_strategy",
        "after_seconds",
        "if_not_exists",
        "durability",
        "on_completion",
        "interrupt_before",
        "webhook",
        "unknown",
    ];
    prop_oneof![
        any_json(),
        proptest::collection::vec((proptest::sample::select(&KEYS[..]), any_json()), 0..6)
            .prop_map(|pairs| {
                let mut body: Map<String, Value> = pairs
                    .into_iter()
                    .map(|(key, value)| (key.to_owned(), value))
                    .collect();
                body.entry("assistant_id").or_insert(json!("agent"));
                Value::Object(body)
            }),
    ]
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn generated_run_bodies_never_500_and_write_only_when_accepted(pool: PgPool) {
    let api = Api::new(pool).await;
    let ana = api.token_for(&caller("ana", "customer", None));
    let (_, _, thread) = api.send(api.request("POST", "/threads", &ana, "{}")).await;
    let thread = thread["thread_id"].as_str().expect("id").to_owned();
    let runs = || async {
        sqlx::query_scalar::<_, i64>("select count(*) from mostrador.runs")
            .fetch_one(api.state.pool())
            .await
            .expect("count")
    };
    let mut accepted = 0;
    for body in samples(run_body(), 400) {
        let before = runs().await;
        let (status, _, answer) = api
            .send(api.request(
                "POST",
                &format!("/threads/{thread}/runs"),
                &ana,
                &body.to_string(),
            ))
            .await;
        assert!(!status.is_server_error(), "{status} for {body}: {answer}");
        let after = runs().await;
        if status == StatusCode::OK {
            accepted += 1;
            assert_eq!(after, before + 1, "{body}");
        } else {
            assert!(status.is_client_error(), "{status} for {body}");
            assert!(
                answer["detail"].is_string(),
                "{status} for {body}: {answer}"
            );
            assert_eq!(after, before, "a refused request wrote nothing: {body}");
        }
    }
    assert!(accepted > 0, "some generated bodies are valid runs");
}

/// Rows a refused request must not have written.
async fn rows(api: &Api) -> (i64, i64, i64) {
    sqlx::query_as(
        "select (select count(*) from mostrador.threads), (select count(*) from mostrador.runs), \
         (select count(*) from mostrador.crons)",
    )
    .fetch_one(api.state.pool())
    .await
    .expect("count")
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_nul_character_anywhere_in_a_body_is_a_422_that_writes_nothing(pool: PgPool) {
    let api = Api::new(pool).await;
    let ana = api.token_for(&caller("ana", "customer", Some("madrid-1")));
    let (_, _, thread) = api.send(api.request("POST", "/threads", &ana, "{}")).await;
    let thread = thread["thread_id"].as_str().expect("id").to_owned();
    let before = rows(&api).await;
    for (method, path, body) in [
        (
            "POST",
            "/threads".to_owned(),
            r#"{"metadata": {"a": "x\u0000y"}}"#,
        ),
        (
            "POST",
            "/threads".to_owned(),
            r#"{"metadata": {"\u0000": 1}}"#,
        ),
        (
            "POST",
            "/threads/search".to_owned(),
            r#"{"metadata": {"a": "\u0000"}}"#,
        ),
        (
            "PATCH",
            format!("/threads/{thread}"),
            r#"{"metadata": {"a": ["\u0000"]}}"#,
        ),
        (
            "POST",
            format!("/threads/{thread}/runs"),
            r#"{"assistant_id": "agent", "input": {"messages": [{"role": "user", "content": "\u0000"}]}}"#,
        ),
        (
            "POST",
            "/runs".to_owned(),
            r#"{"assistant_id": "agent", "metadata": {"k": "\u0000"}}"#,
        ),
        (
            "POST",
            "/runs/batch".to_owned(),
            r#"[{"assistant_id": "agent", "input": {"\u0000": 0}}]"#,
        ),
        (
            "POST",
            "/runs/crons".to_owned(),
            r#"{"assistant_id": "agent", "schedule": "* * * * *", "input": {"a": "\u0000"}}"#,
        ),
        (
            "POST",
            format!("/threads/{thread}/state"),
            r#"{"values": {"messages": [{"role": "user", "content": "\u0000"}]}}"#,
        ),
    ] {
        let (status, _, answer) = api.send(api.request(method, &path, &ana, body)).await;
        assert_eq!(
            status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{method} {path} {body}: {answer}"
        );
        assert!(
            answer["detail"].as_str().is_some_and(|d| d.contains("NUL")),
            "{answer}"
        );
    }
    assert_eq!(rows(&api).await, before);
    // Escaped, a backslash before "u0000" is just text.
    let (status, _, _) = api
        .send(api.request(
            "POST",
            "/threads",
            &ana,
            r#"{"metadata": {"a": "\\u0000"}}"#,
        ))
        .await;
    assert_eq!(status, StatusCode::OK);
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_nul_character_in_a_query_parameter_is_a_422(pool: PgPool) {
    let api = Api::new(pool).await;
    let ana = api.token_for(&caller("ana", "customer", Some("madrid-1")));
    // Found by schemathesis: a store item's key with a NUL was a 500.
    for path in [
        "/store/items?namespace=a.b&key=x%00y",
        "/store/items?namespace=a%00.b&key=x",
        "/assistants/agent/graph?xray=%00",
    ] {
        let (status, _, answer) = api.send(api.request("GET", path, &ana, "")).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{path}: {answer}");
        assert!(
            answer["detail"].as_str().is_some_and(|d| d.contains("NUL")),
            "{answer}"
        );
    }
    let path = "/store/items?namespace=a.b&key=x%2500y";
    let (status, _, answer) = api.send(api.request("GET", path, &ana, "")).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "an encoded percent is just text: {answer}"
    );
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn the_largest_floats_are_stored_and_read_back_exactly(pool: PgPool) {
    let api = Api::new(pool).await;
    let ana = api.token_for(&caller("ana", "customer", Some("madrid-1")));
    let metadata = json!({"max": f64::MAX, "min": f64::MIN, "tiny": f64::MIN_POSITIVE, "near": 1.797_693_134_862_31e308});
    let (status, _, created) = api
        .send(api.request(
            "POST",
            "/threads",
            &ana,
            &json!({"metadata": metadata}).to_string(),
        ))
        .await;
    assert_eq!(status, StatusCode::OK, "{created}");
    let thread = created["thread_id"].as_str().expect("id");
    let (status, _, read) = api
        .send(api.request("GET", &format!("/threads/{thread}"), &ana, ""))
        .await;
    assert_eq!(status, StatusCode::OK, "{read}");
    assert_eq!(read["metadata"], metadata);
    let (status, _, found) = api
        .send(api.request("POST", "/threads/search", &ana, "{}"))
        .await;
    assert_eq!(
        (status, found[0]["metadata"].clone()),
        (StatusCode::OK, metadata)
    );
    let (status, _, _) = api
        .send(api.request("DELETE", &format!("/threads/{thread}"), &ana, ""))
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn the_recursion_limit_and_metadata_caps_are_the_operators(pool: PgPool) {
    // Each test is a process of its own: the process-wide metadata cap is this test's.
    mostrador_queue::set_metadata_max_bytes(1024);
    let api = Api::with(
        pool,
        mostrador_api::ApiConfig {
            max_recursion_limit: 50,
            ..crate::support::config()
        },
    )
    .await;
    let ana = api.token_for(&caller("ana", "customer", Some("madrid-1")));
    let run = |config: Value| json!({"assistant_id": "agent", "config": config}).to_string();
    let (status, _, answer) = api
        .send(api.request("POST", "/runs", &ana, &run(json!({"recursion_limit": 51}))))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{answer}");
    assert!(
        answer["detail"].as_str().is_some_and(|d| d.contains("50")),
        "{answer}"
    );
    let (status, _, answer) = api
        .send(api.request("POST", "/runs", &ana, &run(json!({"recursion_limit": 50}))))
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");

    let big = json!({"metadata": {"notes": "x".repeat(1100)}}).to_string();
    let (status, _, answer) = api.send(api.request("POST", "/threads", &ana, &big)).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{answer}");
    assert!(
        answer["detail"]
            .as_str()
            .is_some_and(|d| d.contains("1024")),
        "{answer}"
    );
    let small = json!({"metadata": {"notes": "x".repeat(900)}}).to_string();
    let (status, _, answer) = api
        .send(api.request("POST", "/threads", &ana, &small))
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
}

/// The process's resident memory now and at its peak since [`reset_peak`], in bytes.
fn memory() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").expect("status");
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| {
                rest.trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse::<u64>()
                    .ok()
            })
            .expect("a field of /proc/self/status")
            * 1024
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// Makes the peak the current resident memory (Linux's `clear_refs`).
fn reset_peak() {
    std::fs::write("/proc/self/clear_refs", "5").expect("clear_refs");
}

/// A body's memory in the api is its bytes and what its fields make of them: a run's input of
/// long strings costs about its size, one of millions of tiny values (each a JSON value of 32
/// bytes or more) is refused before it is parsed, and so is any body past its route's limit.
/// Measured as the process's peak resident memory around bodies sent at once (nextest runs each
/// test in a process of its own).
#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_large_body_costs_the_api_little_more_than_its_size(pool: PgPool) {
    const MIB: usize = 1024 * 1024;
    let config = mostrador_api::ApiConfig {
        body_limit: 10 * MIB,
        ..crate::support::config()
    };
    let api = Api::with(pool, config).await;
    let threads = [
        crate::support::new_thread(&api, &api.token).await,
        crate::support::new_thread(&api, &api.token).await,
        crate::support::new_thread(&api, &api.token).await,
    ];
    let run = |thread: &str, input: String| {
        api.request(
            "POST",
            &format!("/threads/{thread}/runs"),
            &api.token,
            &format!(r#"{{"assistant_id": "agent", "input": {input}}}"#),
        )
    };
    let message = format!(r#"{{"role": "user", "content": "{}"}}"#, "x".repeat(MIB));
    let long = || format!(r#"{{"messages": [{}]}}"#, [message.as_str(); 9].join(","));
    let tiny = || format!("[{}]", vec!["[]"; 3 * MIB].join(","));
    let size = long().len() + tiny().len();
    assert!(size > 18 * MIB);

    let long_runs: Vec<_> = threads.iter().map(|t| run(t, long())).collect();
    let tiny_runs: Vec<_> = threads.iter().map(|t| run(t, tiny())).collect();
    let search = api.request(
        "POST",
        "/assistants/search",
        &api.token,
        &format!(r#"{{"metadata": {{"a": {}}}}}"#, tiny()),
    );
    reset_peak();
    let (before, _) = memory();
    let answers = futures_util::future::join_all(
        long_runs
            .into_iter()
            .chain(tiny_runs)
            .chain([search])
            .map(|request| api.send(request)),
    )
    .await;
    let (_, peak) = memory();
    let statuses: Vec<u16> = answers
        .iter()
        .map(|(status, _, _)| status.as_u16())
        .collect();
    drop(answers);
    let grown = usize::try_from(peak.saturating_sub(before)).expect("bytes");
    let sent = 3 * size + tiny().len();
    println!(
        "sent {} MiB at once; peak memory grew {} MiB",
        sent / MIB,
        grown / MIB
    );
    assert!(
        grown < sent,
        "sent {} MiB at once, the api's memory grew {} MiB",
        sent / MIB,
        grown / MIB
    );
    assert_eq!(statuses, [200, 200, 200, 413, 413, 413, 413]);
}
