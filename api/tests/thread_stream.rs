//! `GET /threads/{thread_id}/stream`: a thread's runs one after another, resumable across runs,
//! visible only to whoever sees the thread. The events are written with the queue's own functions,
//! as a worker writes them.

use mostrador_queue::run::ending::Ending;
use std::time::Duration;

use axum::body::BodyDataStream;
use axum::http::StatusCode;
use futures_util::StreamExt;
use mostrador_queue::run::event::{self, NewEvent};
use mostrador_queue::{WorkerLease, claim};
use serde_json::{Value, json};
use sqlx::PgPool;

use crate::support::{Api, caller, new_thread};

/// An open thread stream, read event by event: `(event, id, data)`.
pub(crate) struct Events {
    body: BodyDataStream,
    text: String,
}

impl Events {
    /// The events of an SSE answer.
    pub(crate) fn of(response: axum::response::Response) -> Self {
        assert_eq!(response.status(), StatusCode::OK);
        Self {
            body: response.into_body().into_data_stream(),
            text: String::new(),
        }
    }

    async fn open(api: &Api, token: &str, thread: &str, last_event_id: Option<&str>) -> Self {
        let mut request = api.request("GET", &format!("/threads/{thread}/stream"), token, "");
        if let Some(id) = last_event_id {
            request
                .headers_mut()
                .insert("last-event-id", id.parse().expect("header"));
        }
        let router = mostrador_api::router(api.state.clone(), &api.config);
        let response = tower::ServiceExt::oneshot(router, request)
            .await
            .expect("infallible");
        Self::of(response)
    }

    /// The next event, within 10 s however many keep-alive comments come before it.
    pub(crate) async fn next(&mut self) -> (String, String, Value) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(end) = self.text.find("\n\n") {
                let block: String = self.text.drain(..end + 2).collect();
                let (mut event, mut id, mut data) = (None, None, None);
                for line in block.lines() {
                    if let Some(value) = line.strip_prefix("event: ") {
                        event = Some(value.to_owned());
                    } else if let Some(value) = line.strip_prefix("id: ") {
                        id = Some(value.to_owned());
                    } else if let Some(value) = line.strip_prefix("data: ") {
                        data = Some(serde_json::from_str(value).expect("JSON data"));
                    }
                }
                // Keep-alive comments carry no event.
                if let (Some(event), Some(id), Some(data)) = (event, id, data) {
                    return (event, id, data);
                }
                continue;
            }
            let bytes = tokio::time::timeout_at(deadline, self.body.next())
                .await
                .expect("an event within 10 s")
                .expect("the stream goes on")
                .expect("bytes");
            self.text
                .push_str(std::str::from_utf8(&bytes).expect("UTF-8"));
        }
    }

    /// Whether the stream stays open `for_` with no event but keep-alives.
    pub(crate) async fn quiet_for(&mut self, for_: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + for_;
        loop {
            match tokio::time::timeout_at(deadline, self.body.next()).await {
                Err(_) => return !self.text.contains("data:"),
                Ok(Some(bytes)) => self
                    .text
                    .push_str(std::str::from_utf8(&bytes.expect("bytes")).expect("UTF-8")),
                Ok(None) => return false,
            }
        }
    }

    pub(crate) async fn names(&mut self, count: usize) -> Vec<(String, String, Value)> {
        let mut events = Vec::new();
        for _ in 0..count {
            events.push(self.next().await);
        }
        events
    }
}

/// Runs the thread's oldest pending run as a worker would: one `values` event, then success.
async fn run_once(api: &Api, values: Value) {
    run_with(api, &[NewEvent::new("values", values)]).await;
}

/// Runs the oldest pending run as a worker would: these events, then success.
pub(crate) async fn run_with(api: &Api, events: &[NewEvent]) {
    run_ending(api, events, Ending::Success).await;
}

/// Runs the oldest pending run as a worker would: these events, then `ending`.
pub(crate) async fn run_ending(api: &Api, events: &[NewEvent], ending: Ending) {
    let worker = WorkerLease::new("w", vec!["agent".into()], Duration::from_secs(60));
    worker.register(api.state.pool()).await.expect("register");
    let held = claim(api.state.pool(), worker.worker_id, &worker.graphs, 1)
        .await
        .expect("claim")
        .pop()
        .expect("a pending run");
    event::append(api.state.pool(), held.lease(), events)
        .await
        .expect("append");
    held.end(api.state.pool(), ending).await.expect("complete");
}

async fn start_run(api: &Api, token: &str, thread: &str) -> String {
    let (status, _, run) = api
        .send(api.request(
            "POST",
            &format!("/threads/{thread}/runs"),
            token,
            r#"{"assistant_id": "agent", "multitask_strategy": "enqueue"}"#,
        ))
        .await;
    assert_eq!(status, StatusCode::OK, "{run}");
    run["run_id"].as_str().expect("id").to_owned()
}

fn shape(events: &[(String, String, Value)]) -> Vec<(&str, Value)> {
    events
        .iter()
        .map(|(name, _, data)| {
            let data = match name.as_str() {
                "metadata" => data
                    .get("status")
                    .map_or_else(|| json!({"run_id": data["run_id"]}), |_| data.clone()),
                _ => data.clone(),
            };
            (name.as_str(), data)
        })
        .collect()
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_thread_stream_carries_its_runs_in_queue_order_and_resumes_across_them(pool: PgPool) {
    let api = Api::new(pool).await;
    let ana = api.token_for(&caller("ana", "customer", None));
    let thread = new_thread(&api, &ana).await;
    let first = start_run(&api, &ana, &thread).await;
    let second = start_run(&api, &ana, &thread).await;

    let mut stream = Events::open(&api, &ana, &thread, Some("-")).await;
    run_once(&api, json!({"n": 1})).await;
    run_once(&api, json!({"n": 2})).await;
    let events = stream.names(6).await;
    assert_eq!(
        shape(&events),
        [
            ("metadata", json!({"run_id": first})),
            ("values", json!({"n": 1})),
            ("metadata", json!({"status": "run_done", "run_id": first})),
            ("metadata", json!({"run_id": second})),
            ("values", json!({"n": 2})),
            ("metadata", json!({"status": "run_done", "run_id": second})),
        ]
    );
    let ids: Vec<&str> = events.iter().map(|(_, id, _)| id.as_str()).collect();
    let (first_place, _) = ids[0].split_once('-').expect("<run>-<seq>");
    let (second_place, _) = ids[3].split_once('-').expect("<run>-<seq>");
    let place = |text: &str| text.parse::<i64>().expect("a number");
    assert!(place(first_place) < place(second_place), "{ids:?}");

    // Resumed after the first run's values: the rest of it, then the second run whole.
    let mut resumed = Events::open(&api, &ana, &thread, Some(&events[1].1)).await;
    assert_eq!(resumed.names(4).await, events[2..]);

    // Without Last-Event-ID: what happens next (a run yet to start, whole), not what is over.
    // N.B. The stream's first event (the pending run's metadata) is read before the run runs: a
    // run over before the stream first looks is over for that stream too.
    let third = start_run(&api, &ana, &thread).await;
    let mut live = Events::open(&api, &ana, &thread, None).await;
    let mut seen = live.names(1).await;
    run_once(&api, json!({"n": 3})).await;
    seen.extend(live.names(2).await);
    let expected = [
        ("metadata", json!({"run_id": third})),
        ("values", json!({"n": 3})),
        ("metadata", json!({"status": "run_done", "run_id": third})),
    ];
    assert_eq!(shape(&seen), expected);
    // A stream that had followed every run is woken for the next one.
    assert_eq!(shape(&resumed.names(3).await), expected);
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_thread_stream_answers_lifecycle_only_and_keeps_foreign_threads_hidden(pool: PgPool) {
    let api = Api::new(pool).await;
    let ana = api.token_for(&caller("ana", "customer", None));
    let thread = new_thread(&api, &ana).await;
    let run = start_run(&api, &ana, &thread).await;

    let router = mostrador_api::router(api.state.clone(), &api.config);
    let path = format!("/threads/{thread}/stream?stream_modes=lifecycle");
    let response = tower::ServiceExt::oneshot(router, api.request("GET", &path, &ana, ""))
        .await
        .expect("infallible");
    let mut lifecycle = Events::of(response);
    // The run's metadata first (it is yet to start), so it runs while the stream follows it.
    let mut events = lifecycle.names(1).await;
    run_once(&api, json!({"n": 1})).await;
    events.push(lifecycle.next().await);
    assert_eq!(
        shape(&events),
        [
            ("metadata", json!({"run_id": run})),
            ("metadata", json!({"status": "run_done", "run_id": run})),
        ],
        "lifecycle: the runs' metadata, none of their values"
    );

    let luis = api.token_for(&caller("luis", "customer", None));
    let foreign = api.request("GET", &format!("/threads/{thread}/stream"), &luis, "");
    assert_eq!(api.send(foreign).await.0, StatusCode::NOT_FOUND);
    let bad_mode = api.request(
        "GET",
        &format!("/threads/{thread}/stream?stream_modes=values"),
        &ana,
        "",
    );
    assert_eq!(api.send(bad_mode).await.0, StatusCode::UNPROCESSABLE_ENTITY);
    let mut bad_id = api.request("GET", &format!("/threads/{thread}/stream"), &ana, "");
    bad_id
        .headers_mut()
        .insert("last-event-id", "yesterday".parse().expect("header"));
    assert_eq!(api.send(bad_id).await.0, StatusCode::UNPROCESSABLE_ENTITY);
}

/// A thread's stream asks again, before each run it follows, whether its caller still may: once
/// the key it was opened with is revoked, the next run's events are not sent, the stream ends.
#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_thread_stream_ends_when_the_key_it_was_opened_with_is_revoked(pool: PgPool) {
    use mostrador_queue::data::api_keys::{self, NewApiKey};

    let api = Api::new(pool.clone()).await;
    let (key, secret) = api_keys::create(
        &pool,
        &NewApiKey {
            subject: "ana".into(),
            roles: vec!["customer".into()],
            tenant: None,
            expires_in: None,
        },
    )
    .await
    .expect("key");
    let secret = secret.expose().to_owned();
    let ana = api.token_for(&caller("ana", "customer", None));
    let thread = new_thread(&api, &ana).await;
    start_run(&api, &ana, &thread).await;
    let mut stream = Events::open(&api, &secret, &thread, Some("-")).await;
    run_once(&api, json!({"n": 1})).await;
    let (event, _, _) = stream.next().await;
    assert_eq!(event, "metadata");
    assert_eq!(
        stream.next().await.2,
        json!({"n": 1}),
        "followed while the key holds"
    );
    stream.next().await;

    api_keys::revoke(&pool, key.key_id).await.expect("revoke");
    start_run(&api, &ana, &thread).await;
    run_once(&api, json!({"n": 2})).await;
    let mut rest = String::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while let Some(bytes) = tokio::time::timeout_at(deadline, stream.body.next())
        .await
        .expect("the stream ends")
    {
        rest.push_str(std::str::from_utf8(&bytes.expect("bytes")).expect("UTF-8"));
    }
    rest.insert_str(0, &stream.text);
    assert!(
        !rest.contains(r#""n":2"#),
        "nothing of the next run: {rest}"
    );
    assert!(rest.contains("event: error"), "{rest}");
}
