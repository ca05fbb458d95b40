//! The authorization matrix: every route that takes a thread id, for every kind of caller. The
//! owner and a manager of the thread's store get through; every other caller, a malformed id and a
//! thread that does not exist get the same 404; a missing, expired or foreign-audience token gets
//! 401. No answer to a stranger names the thread.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::http::StatusCode;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use mostrador_api::Role;
use mostrador_queue::{RunStatus, ThreadStatus, WorkerLease, claim};
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
    /// Through authorization: anything but 401, 403 and 404.
    Allowed,
    NotFound,
    Unauthorized,
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn every_thread_route_answers_every_caller_as_the_matrix_says(pool: PgPool) {
    let api = Api::new(pool).await;
    let owner = api.token_for(&caller("ana", Role::Customer, Some("madrid-1")));
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
    held.complete(api.state.pool(), RunStatus::Success, ThreadStatus::Idle)
        .await
        .expect("complete");

    let callers: Vec<(&str, String, Option<&str>, Expect)> = vec![
        ("owner", owner.clone(), None, Expect::Allowed),
        (
            "manager of the store",
            api.token_for(&caller("marta", Role::Manager, Some("madrid-1"))),
            None,
            Expect::Allowed,
        ),
        (
            "customer of the store",
            api.token_for(&caller("luis", Role::Customer, Some("madrid-1"))),
            None,
            Expect::NotFound,
        ),
        (
            "manager of another store",
            api.token_for(&caller("eva", Role::Manager, Some("sevilla-2"))),
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
    // (method, path with {t} and {r}, body, whether an allowed call answers at once)
    let routes = [
        ("GET", "/threads/{t}", "", true),
        ("GET", "/threads/{t}/state", "", true),
        ("GET", "/threads/{t}/state/{c}", "", true),
        (
            "POST",
            "/threads/{t}/state",
            r#"{"values": {"messages": []}}"#,
            true,
        ),
        ("POST", "/threads/{t}/history", "{}", true),
        ("GET", "/threads/{t}/runs", "", true),
        (
            "POST",
            "/threads/{t}/runs",
            r#"{"assistant_id": "agent"}"#,
            true,
        ),
        (
            "POST",
            "/threads/{t}/runs/stream",
            r#"{"assistant_id": "agent"}"#,
            false,
        ),
        (
            "POST",
            "/threads/{t}/runs/wait",
            r#"{"assistant_id": "agent"}"#,
            false,
        ),
        ("GET", "/threads/{t}/runs/{r}", "", true),
        ("GET", "/threads/{t}/runs/{r}/stream", "", true),
        ("GET", "/threads/{t}/runs/{r}/join", "", true),
        ("POST", "/threads/{t}/runs/{r}/cancel", "", true),
        (
            "PATCH",
            "/threads/{t}",
            r#"{"metadata": {"seen": true}}"#,
            true,
        ),
        ("POST", "/threads/{t}/copy", "", true),
        ("DELETE", "/threads/{t}/runs/{r}", "", false),
        ("DELETE", "/threads/{t}", "", false),
    ];
    let mut stranger_answer = None;
    for (who, token, thread_override, expect) in &callers {
        let thread = thread_override.unwrap_or(&thread_id);
        for (method, template, body, answers_at_once) in routes {
            if *expect == Expect::Allowed && !answers_at_once {
                continue; // it would wait for a run nobody executes, or delete what others read
            }
            let path = template
                .replace("{t}", thread)
                .replace("{r}", &run_id)
                .replace("{c}", &checkpoint.to_string());
            let (status, _, answer) = api.send(api.request(method, &path, token, body)).await;
            match expect {
                Expect::Allowed => assert!(
                    ![
                        StatusCode::UNAUTHORIZED,
                        StatusCode::FORBIDDEN,
                        StatusCode::NOT_FOUND
                    ]
                    .contains(&status)
                        || (template.contains("{c}") && status == StatusCode::NOT_FOUND),
                    "{who}: {method} {template} -> {status} {answer}"
                ),
                Expect::NotFound => {
                    assert_eq!(
                        status,
                        StatusCode::NOT_FOUND,
                        "{who}: {method} {template} -> {answer}"
                    );
                    assert!(
                        !answer.to_string().contains(&thread_id),
                        "{who}: {answer} names the thread"
                    );
                    if template.ends_with("{t}") || template.contains("{t}/runs") {
                        stranger_answer.get_or_insert(answer.clone());
                    }
                }
                Expect::Unauthorized => {
                    assert_eq!(
                        status,
                        StatusCode::UNAUTHORIZED,
                        "{who}: {method} {template} -> {answer}"
                    );
                }
            }
        }
    }
    assert!(stranger_answer.is_some());
    // Nobody but the owner and the manager got through: the thread and its run are as they were.
    let (status, _, thread) = api
        .send(api.request("GET", &format!("/threads/{thread_id}"), &owner, ""))
        .await;
    assert_eq!(status, StatusCode::OK, "no stranger deleted it");
    assert_eq!(thread["thread_id"], json!(thread_id));
    let run_path = format!("/threads/{thread_id}/runs/{run_id}");
    let (status, _, _) = api.send(api.request("GET", &run_path, &owner, "")).await;
    assert_eq!(status, StatusCode::OK, "no stranger deleted its run");
}

/// Through every thread route, someone else's thread and one that does not exist answer the same
/// status and body, in comparable time (measured interleaved, so both see the same noise).
#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_foreign_thread_looks_like_a_missing_one_in_status_body_and_time(pool: PgPool) {
    let api = Api::new(pool).await;
    let owner = api.token_for(&caller("ana", Role::Customer, Some("madrid-1")));
    let stranger = api.token_for(&caller("luis", Role::Customer, Some("madrid-1")));
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
