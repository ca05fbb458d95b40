//! Webhooks: a run's end announced to the URL it named, only on a host the operator allows;
//! queued as the run ends, retried when the receiver fails, sent once it answers.

use mostrador_queue::run::ending::Ending;
use std::time::Duration;

use axum::http::StatusCode;
use axum::routing::post;
use mostrador_api::ApiConfig;
use mostrador_api::webhooks::WebhookHosts;
use mostrador_queue::{WorkerLease, claim};
use serde_json::{Value, json};
use sqlx::PgPool;
use tokio::sync::mpsc;

use crate::support::{Api, caller, config, new_thread};

/// A receiver on loopback: every body it gets, answered 500 the first `failures` times.
async fn receiver(failures: usize) -> (u16, mpsc::UnboundedReceiver<Value>) {
    let (sent, received) = mpsc::unbounded_channel();
    let calls = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let app = axum::Router::new().route(
        "/hook",
        post(move |axum::Json(body): axum::Json<Value>| {
            let (sent, calls) = (sent.clone(), calls.clone());
            async move {
                let _ = sent.send(body);
                if calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst) < failures {
                    StatusCode::INTERNAL_SERVER_ERROR
                } else {
                    StatusCode::NO_CONTENT
                }
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port");
    let port = listener.local_addr().expect("its address").port();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (port, received)
}

async fn deliveries(pool: &PgPool) -> i64 {
    sqlx::query_scalar("select count(*) from mostrador.webhook_deliveries")
        .fetch_one(pool)
        .await
        .expect("count")
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_runs_end_is_posted_to_an_allowed_webhook_until_it_is_received(pool: PgPool) {
    let (port, mut received) = receiver(1).await;
    let api = Api::with(
        pool.clone(),
        ApiConfig {
            webhook_hosts: WebhookHosts::parse(&format!("127.0.0.1:{port}")).expect("hosts"),
            ..config()
        },
    )
    .await;
    let ana = api.token_for(&caller("ana", "customer", Some("madrid-1")));
    let thread = new_thread(&api, &ana).await;
    let path = format!("/threads/{thread}/runs");

    // Elsewhere: refused, nothing queued.
    for webhook in [
        json!(format!("http://127.0.0.1:{}/hook", port + 1)),
        json!("http://localhost/hook"),
        json!("/runs"),
        json!(7),
    ] {
        let body = json!({"assistant_id": "agent", "webhook": webhook}).to_string();
        let (status, _, answer) = api.send(api.request("POST", &path, &ana, &body)).await;
        assert_eq!(
            status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{webhook}: {answer}"
        );
    }
    let cron = json!({"assistant_id": "agent", "schedule": "0 9 * * *", "webhook": "https://evil.example/"});
    let (status, _, _) = api
        .send(api.request("POST", "/runs/crons", &ana, &cron.to_string()))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(crate::support::runs(&api).await, 0);

    let body = json!({"assistant_id": "agent", "webhook": format!("http://127.0.0.1:{port}/hook")});
    let (status, _, run) = api
        .send(api.request("POST", &path, &ana, &body.to_string()))
        .await;
    assert_eq!(status, StatusCode::OK, "{run}");
    let run_id = run["run_id"].as_str().expect("run id").to_owned();
    // A run without one queues nothing when it ends.
    let (_, _, _) = api
        .send(api.request("POST", &path, &ana, r#"{"assistant_id": "agent"}"#))
        .await;

    let worker = WorkerLease::new("w", vec!["agent".into()], Duration::from_secs(60));
    worker.register(&pool).await.expect("register");
    for _ in 0..2 {
        let held = claim(&pool, worker.worker_id, &worker.graphs, 1)
            .await
            .expect("claim")
            .pop()
            .expect("a run");
        held.end(&pool, Ending::Success).await.expect("complete");
    }
    assert_eq!(
        deliveries(&pool).await,
        1,
        "queued by the end of the run with one"
    );

    let sender = tokio::spawn(mostrador_api::webhooks::send(
        api.state.clone(),
        Duration::from_millis(5),
    ));
    let within = Duration::from_secs(30);
    let first = tokio::time::timeout(within, received.recv())
        .await
        .expect("sent")
        .expect("a body");
    let second = tokio::time::timeout(within, received.recv())
        .await
        .expect("sent again after the receiver failed")
        .expect("a body");
    assert_eq!(first["run_id"], json!(run_id));
    assert_eq!(second["run_id"], json!(run_id));
    assert_eq!(second["status"], "success");
    assert_eq!(second["thread_id"], json!(thread));
    for field in [
        "run_started_at",
        "run_ended_at",
        "webhook_sent_at",
        "values",
    ] {
        assert!(second.get(field).is_some(), "{field}: {second}");
    }
    // Received: forgotten, and not sent again.
    for _ in 0..300 {
        if deliveries(&pool).await == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(deliveries(&pool).await, 0);
    assert!(
        tokio::time::timeout(Duration::from_millis(1500), received.recv())
            .await
            .is_err(),
        "sent once it was received"
    );
    api.state.start_draining();
    tokio::time::timeout(within, sender)
        .await
        .expect("the sender stops when the api drains")
        .expect("no panic");
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn without_allowed_hosts_webhooks_are_refused(pool: PgPool) {
    let api = Api::new(pool).await;
    let ana = api.token_for(&caller("ana", "customer", Some("madrid-1")));
    let body = r#"{"assistant_id": "agent", "webhook": "https://hooks.example.com/x"}"#;
    let (status, _, answer) = api.send(api.request("POST", "/runs", &ana, body)).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        answer["detail"]
            .as_str()
            .is_some_and(|detail| detail.contains("MOSTRADOR_WEBHOOK_HOSTS")),
        "{answer}"
    );
    assert_eq!(crate::support::runs(&api).await, 0);
}

/// Deliveries to a receiver that never answers take their few places and their time; another
/// caller's delivery to a receiver that answers is sent at once, not behind them.
#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn one_callers_slow_webhook_receiver_delays_no_one_else(pool: PgPool) {
    // Accepts connections and never answers.
    let tarpit = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port");
    let slow = tarpit.local_addr().expect("its address").port();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = tarpit.accept().await {
            held.push(socket);
        }
    });
    let (port, mut received) = receiver(0).await;
    let api = Api::with(
        pool.clone(),
        ApiConfig {
            webhook_hosts: WebhookHosts::parse(&format!("127.0.0.1:{slow},127.0.0.1:{port}"))
                .expect("hosts"),
            max_pending_per_caller: 1_000,
            ..config()
        },
    )
    .await;
    let worker = WorkerLease::new("w", vec!["agent".into()], Duration::from_secs(60));
    worker.register(&pool).await.expect("register");
    let end_runs = |n: usize| {
        let pool = pool.clone();
        let worker = worker.clone();
        async move {
            for held in claim(&pool, worker.worker_id, &worker.graphs, n as i64)
                .await
                .expect("claim")
            {
                held.end(&pool, Ending::Success).await.expect("complete");
            }
        }
    };
    let ana = api.token_for(&caller("ana", "customer", Some("madrid-1")));
    for _ in 0..64 {
        let thread = new_thread(&api, &ana).await;
        let body =
            json!({"assistant_id": "agent", "webhook": format!("http://127.0.0.1:{slow}/hook")});
        let (status, _, run) = api
            .send(api.request(
                "POST",
                &format!("/threads/{thread}/runs"),
                &ana,
                &body.to_string(),
            ))
            .await;
        assert_eq!(status, StatusCode::OK, "{run}");
    }
    end_runs(64).await;
    let sender = tokio::spawn(mostrador_api::webhooks::send(
        api.state.clone(),
        Duration::from_secs(60),
    ));
    // Ana's deliveries are being sent (and wait for their receiver) when Luis's run ends.
    for _ in 0..100 {
        let taken: i64 = sqlx::query_scalar(
            "select count(*) from mostrador.webhook_deliveries where attempts > 0",
        )
        .fetch_one(&pool)
        .await
        .expect("count");
        if taken > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let luis = api.token_for(&caller("luis", "customer", Some("madrid-1")));
    let thread = new_thread(&api, &luis).await;
    let body = json!({"assistant_id": "agent", "webhook": format!("http://127.0.0.1:{port}/hook")});
    let (status, _, run) = api
        .send(api.request(
            "POST",
            &format!("/threads/{thread}/runs"),
            &luis,
            &body.to_string(),
        ))
        .await;
    assert_eq!(status, StatusCode::OK, "{run}");
    end_runs(1).await;
    let ended = std::time::Instant::now();
    let sent = tokio::time::timeout(Duration::from_secs(30), received.recv())
        .await
        .expect("sent")
        .expect("a body");
    assert_eq!(sent["run_id"], run["run_id"]);
    assert!(
        ended.elapsed() < Duration::from_secs(3),
        "Luis's webhook waited {:?} behind Ana's",
        ended.elapsed()
    );
    sender.abort();
}

/// An allowed name that resolves to this machine (or a link's own address, a cloud's metadata
/// service) is not posted to: only an address rule names such an address.
#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_name_resolving_to_this_machine_gets_no_webhook(pool: PgPool) {
    let (port, mut received) = receiver(0).await;
    let api = Api::with(
        pool.clone(),
        ApiConfig {
            webhook_hosts: WebhookHosts::parse("localhost:*").expect("hosts"),
            ..config()
        },
    )
    .await;
    let ana = api.token_for(&caller("ana", "customer", Some("madrid-1")));
    let thread = new_thread(&api, &ana).await;
    let body = json!({"assistant_id": "agent", "webhook": format!("http://localhost:{port}/hook")});
    let (status, _, run) = api
        .send(api.request(
            "POST",
            &format!("/threads/{thread}/runs"),
            &ana,
            &body.to_string(),
        ))
        .await;
    assert_eq!(status, StatusCode::OK, "the name is allowed: {run}");
    let worker = WorkerLease::new("w", vec!["agent".into()], Duration::from_secs(60));
    worker.register(&pool).await.expect("register");
    let held = claim(&pool, worker.worker_id, &worker.graphs, 1)
        .await
        .expect("claim")
        .pop()
        .expect("a run");
    held.end(&pool, Ending::Success).await.expect("complete");
    assert_eq!(deliveries(&pool).await, 1);
    let sender = tokio::spawn(mostrador_api::webhooks::send(
        api.state.clone(),
        Duration::from_millis(5),
    ));
    // Given up at once (refused, not retried), and nothing received.
    for _ in 0..300 {
        if deliveries(&pool).await == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(deliveries(&pool).await, 0, "refused, not retried");
    assert!(
        tokio::time::timeout(Duration::from_millis(500), received.recv())
            .await
            .is_err(),
        "nothing was sent to the loopback receiver"
    );
    sender.abort();
}
