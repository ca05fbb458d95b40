//! The authorization matrix: every route that takes a thread id, for every kind of caller, each
//! answer's exact status. The owner reads and writes; under a policy that lets them read, a
//! manager of the thread's store reads (but not the thread's files) and gets 403 for every write; every other caller, a malformed id and a
//! thread that does not exist get the same 404; a missing, expired or foreign-audience token gets
//! 401. No answer to a stranger names the thread.

use mostrador_queue::run::ending::Ending;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::http::StatusCode;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use mostrador_queue::{WorkerLease, claim};
use serde_json::json;
use sqlx::PgPool;
use uuid::Uuid;

use crate::support::{Api, caller};

/// A token signed with the right secret but expired, or for another audience.
fn forged(api: &Api, expired: bool) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_secs();
    let payload = json!({
        "iss": api.config.auth.issuer,
        "aud": if expired { api.config.auth.audience.clone() } else { "someone-else".to_owned() },
        "exp": if expired { now - 3600 } else { now + 3600 },
        "sub": "ana", "role": "customer", "store": "madrid-1",
    });
    jsonwebtoken::encode(
        &Header::new(Algorithm::HS256),
        &payload,
        &EncodingKey::from_secret(api.config.auth.secret.as_bytes()).expect("key"),
    )
    .expect("sign")
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Expect {
    /// The owner: the route's own answer.
    Owner,
    /// A manager of the thread's store: reads as the owner does; writes 403.
    Manager,
    NotFound,
    Unauthorized,
}

/// A route: method, path with `{t}`, `{r}` and `{c}`, body, and what the owner and a manager of
/// the store get (`None`: the call would not answer at once, or would delete what the others
/// read, so the test does not make it).
type Route = (
    &'static str,
    &'static str,
    &'static str,
    Option<StatusCode>,
    Option<StatusCode>,
);

const OK: Option<StatusCode> = Some(StatusCode::OK);
const FORBIDDEN: Option<StatusCode> = Some(StatusCode::FORBIDDEN);
const NOT_FOUND: Option<StatusCode> = Some(StatusCode::NOT_FOUND);

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn every_thread_route_answers_every_caller_as_the_matrix_says(pool: PgPool) {
    the_matrix_holds(Api::new(pool).await, true).await;
}

/// Under the default policy (owner-only) a manager of the same store is a stranger like any other.
#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn under_the_default_policy_a_thread_is_its_owners_alone(pool: PgPool) {
    let config = mostrador_api::ApiConfig {
        policy: mostrador_api::Policy::default(),
        ..crate::support::config()
    };
    the_matrix_holds(Api::with(pool, config).await, false).await;
}

/// The matrix; `managers_read`: whether the policy lets a store's managers read its threads.
async fn the_matrix_holds(api: Api, managers_read: bool) {
    let owner = api.token_for(&caller("ana", "customer", Some("madrid-1")));
    let (_, _, thread) = api
        .send(api.request(
            "POST",
            "/threads",
            &owner,
            r#"{"metadata": {"graph_id": "agent"}}"#,
        ))
        .await;
    let thread_id = thread["thread_id"].as_str().expect("id").to_owned();
    // A finished run, so that streams and joins answer at once.
    let (_, _, run) = api
        .send(api.request(
            "POST",
            &format!("/threads/{thread_id}/runs"),
            &owner,
            r#"{"assistant_id": "agent"}"#,
        ))
        .await;
    let run_id = run["run_id"].as_str().expect("run id").to_owned();
    let worker = WorkerLease::new("w", vec!["agent".into()], Duration::from_secs(60));
    worker.register(api.state.pool()).await.expect("register");
    let held = claim(api.state.pool(), worker.worker_id, &worker.graphs, 1)
        .await
        .expect("claim")
        .pop()
        .expect("run");
    held.end(api.state.pool(), Ending::Success)
        .await
        .expect("complete");

    let callers: Vec<(&str, String, Option<&str>, Expect)> = vec![
        ("owner", owner.clone(), None, Expect::Owner),
        (
            "manager of the store",
            api.token_for(&caller("marta", "manager", Some("madrid-1"))),
            None,
            if managers_read {
                Expect::Manager
            } else {
                Expect::NotFound
            },
        ),
        (
            "customer of the store",
            api.token_for(&caller("luis", "customer", Some("madrid-1"))),
            None,
            Expect::NotFound,
        ),
        (
            "manager of another store",
            api.token_for(&caller("eva", "manager", Some("sevilla-2"))),
            None,
            Expect::NotFound,
        ),
        ("no token", String::new(), None, Expect::Unauthorized),
        (
            "expired token",
            forged(&api, true),
            None,
            Expect::Unauthorized,
        ),
        (
            "wrong audience",
            forged(&api, false),
            None,
            Expect::Unauthorized,
        ),
        (
            "malformed thread id",
            owner.clone(),
            Some("not-a-thread"),
            Expect::NotFound,
        ),
        (
            "nonexistent thread",
            owner.clone(),
            Some("00000000-0000-7000-8000-000000000000"),
            Expect::NotFound,
        ),
    ];
    let checkpoint = Uuid::now_v7();
    let cron = r#"{"assistant_id": "agent", "schedule": "0 3 * * *"}"#;
    let routes: [Route; 22] = [
        ("GET", "/threads/{t}", "", OK, OK),
        ("GET", "/threads/{t}/storage", "", OK, OK),
        ("GET", "/threads/{t}/state", "", OK, OK),
        // The thread has no such checkpoint: past authorization, a checkpoint's 404.
        ("GET", "/threads/{t}/state/{c}", "", NOT_FOUND, NOT_FOUND),
        ("POST", "/threads/{t}/history", "{}", OK, OK),
        ("GET", "/threads/{t}/history", "", OK, OK),
        ("GET", "/threads/{t}/runs", "", OK, OK),
        ("GET", "/threads/{t}/runs/{r}", "", OK, OK),
        ("GET", "/threads/{t}/runs/{r}/stream", "", OK, OK),
        ("GET", "/threads/{t}/runs/{r}/join", "", OK, OK),
        ("POST", "/threads/{t}/copy", "", OK, OK),
        // The thread's stream never ends: only strangers' answers are checked.
        ("GET", "/threads/{t}/stream", "", None, None),
        // A thread's files are its owner's alone: to a manager, as a missing thread.
        ("GET", "/threads/{t}/files", "", OK, NOT_FOUND),
        // Writes: the owner's alone.
        (
            "POST",
            "/threads/{t}/state",
            r#"{"values": {"messages": []}}"#,
            OK,
            FORBIDDEN,
        ),
        (
            "PATCH",
            "/threads/{t}",
            r#"{"metadata": {"seen": true}}"#,
            OK,
            FORBIDDEN,
        ),
        ("POST", "/threads/{t}/runs/crons", cron, OK, FORBIDDEN),
        (
            "POST",
            "/threads/{t}/runs",
            r#"{"assistant_id": "agent"}"#,
            OK,
            FORBIDDEN,
        ),
        (
            "POST",
            "/threads/{t}/runs/stream",
            r#"{"assistant_id": "agent"}"#,
            None,
            FORBIDDEN,
        ),
        (
            "POST",
            "/threads/{t}/runs/wait",
            r#"{"assistant_id": "agent"}"#,
            None,
            FORBIDDEN,
        ),
        (
            "POST",
            "/threads/{t}/runs/{r}/cancel",
            "",
            Some(StatusCode::ACCEPTED),
            FORBIDDEN,
        ),
        ("DELETE", "/threads/{t}/runs/{r}", "", None, FORBIDDEN),
        ("DELETE", "/threads/{t}", "", None, FORBIDDEN),
    ];
    let mut stranger_answer = None;
    for (who, token, thread_override, expect) in &callers {
        let thread = thread_override.unwrap_or(&thread_id);
        for (method, template, body, for_owner, for_manager) in routes {
            let expected = match expect {
                Expect::Owner => for_owner,
                Expect::Manager => for_manager,
                Expect::NotFound => NOT_FOUND,
                Expect::Unauthorized => Some(StatusCode::UNAUTHORIZED),
            };
            let Some(expected) = expected else {
                continue;
            };
            let path = template
                .replace("{t}", thread)
                .replace("{r}", &run_id)
                .replace("{c}", &checkpoint.to_string());
            let (status, _, answer) = api.send(api.request(method, &path, token, body)).await;
            assert_eq!(status, expected, "{who}: {method} {template} -> {answer}");
            if *expect == Expect::NotFound {
                assert!(
                    !answer.to_string().contains(&thread_id),
                    "{who}: {answer} names the thread"
                );
                assert_eq!(
                    answer["detail"], "Thread not found",
                    "{who}: {method} {template}"
                );
                stranger_answer.get_or_insert(answer.clone());
            }
        }
    }
    assert!(stranger_answer.is_some());
    // The prune of thread ids passes over those the caller does not own: the manager's prunes
    // nothing, and the thread and its run are as they were.
    let manager = api.token_for(&caller("marta", "manager", Some("madrid-1")));
    let (status, _, pruned) = api
        .send(api.request(
            "POST",
            "/threads/prune",
            &manager,
            &json!({"thread_ids": [thread_id]}).to_string(),
        ))
        .await;
    assert_eq!(
        (status, pruned),
        (StatusCode::OK, json!({"pruned_count": 0}))
    );
    let (status, _, thread) = api
        .send(api.request("GET", &format!("/threads/{thread_id}"), &owner, ""))
        .await;
    assert_eq!(status, StatusCode::OK, "no one else deleted it");
    assert_eq!(thread["thread_id"], json!(thread_id));
    let run_path = format!("/threads/{thread_id}/runs/{run_id}");
    let (status, _, _) = api.send(api.request("GET", &run_path, &owner, "")).await;
    assert_eq!(status, StatusCode::OK, "no one else deleted its run");
    // `/runs/recent` lists the runs of the threads the caller sees: not a stranger's.
    let stranger = api.token_for(&caller("luis", "customer", Some("madrid-1")));
    let (status, _, recent) = api
        .send(api.request("GET", "/runs/recent", &stranger, ""))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert!(!recent.to_string().contains(&thread_id), "{recent}");
    // Searches list what the caller reads, and nothing else.
    for (token, lists) in [
        (&stranger, false),
        (&manager, managers_read),
        (&owner, true),
    ] {
        for path in ["/threads/search", "/runs/recent"] {
            let (method, body) = if path == "/runs/recent" {
                ("GET", "")
            } else {
                ("POST", "{}")
            };
            let (status, _, found) = api.send(api.request(method, path, token, body)).await;
            assert_eq!(status, StatusCode::OK);
            assert_eq!(
                found.to_string().contains(&thread_id),
                lists,
                "{path}: {found}"
            );
        }
    }
}

/// Through every thread route, someone else's thread and one that does not exist answer the same
/// status and body, in comparable time (measured interleaved, so both see the same noise).
#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_foreign_thread_looks_like_a_missing_one_in_status_body_and_time(pool: PgPool) {
    let api = Api::new(pool).await;
    let owner = api.token_for(&caller("ana", "customer", Some("madrid-1")));
    let stranger = api.token_for(&caller("luis", "customer", Some("madrid-1")));
    let (_, _, thread) = api
        .send(api.request(
            "POST",
            "/threads",
            &owner,
            r#"{"metadata": {"graph_id": "agent"}}"#,
        ))
        .await;
    let foreign = thread["thread_id"].as_str().expect("id").to_owned();
    let missing = Uuid::now_v7().to_string();
    let run = Uuid::now_v7().to_string();
    let routes = [
        ("GET", "/threads/{t}", ""),
        ("GET", "/threads/{t}/state", ""),
        ("POST", "/threads/{t}/history", "{}"),
        ("GET", "/threads/{t}/runs", ""),
        ("POST", "/threads/{t}/runs", r#"{"assistant_id": "agent"}"#),
        (
            "POST",
            "/threads/{t}/runs/wait",
            r#"{"assistant_id": "agent"}"#,
        ),
        ("GET", "/threads/{t}/runs/{r}", ""),
        ("GET", "/threads/{t}/runs/{r}/join", ""),
        ("PATCH", "/threads/{t}", r#"{"metadata": {"x": 1}}"#),
        ("DELETE", "/threads/{t}", ""),
    ];
    for (method, template, body) in routes {
        let path = |thread: &str| template.replace("{t}", thread).replace("{r}", &run);
        let (mut foreign_times, mut missing_times) = (Vec::new(), Vec::new());
        let mut answers = Vec::new();
        for _ in 0..15 {
            for (thread, times) in [
                (&foreign, &mut foreign_times),
                (&missing, &mut missing_times),
            ] {
                let started = std::time::Instant::now();
                let (status, _, answer) = api
                    .send(api.request(method, &path(thread), &stranger, body))
                    .await;
                times.push(started.elapsed());
                answers.push((status, answer));
            }
        }
        assert!(
            answers.windows(2).all(|pair| pair[0] == pair[1]),
            "{method} {template}: {:?}",
            &answers[..2]
        );
        assert_eq!(answers[0].0, StatusCode::NOT_FOUND, "{method} {template}");
        let median = |times: &mut Vec<Duration>| {
            times.sort();
            times[times.len() / 2]
        };
        let (foreign_median, missing_median) =
            (median(&mut foreign_times), median(&mut missing_times));
        let (low, high) = if foreign_median < missing_median {
            (foreign_median, missing_median)
        } else {
            (missing_median, foreign_median)
        };
        assert!(
            high <= low * 3 + Duration::from_millis(5),
            "{method} {template}: foreign {foreign_median:?} vs missing {missing_median:?}"
        );
    }
}
