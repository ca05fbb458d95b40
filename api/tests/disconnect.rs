//! A client that goes away: `on_disconnect` on the stream and wait forms, `cancel_on_disconnect`
//! on joins, as the SDKs send them.

use std::time::Duration;

use axum::http::{StatusCode, header};
use sqlx::PgPool;

use crate::support::{Api, caller, new_thread};

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_client_that_asked_to_cancel_on_disconnect_cancels_its_run_by_going_away(pool: PgPool) {
    use futures_util::StreamExt;
    let api = Api::new(pool).await;
    let ana = api.token_for(&caller("ana", "customer", None));
    // Opens a stream of a new run, reads its first event, and goes away; the run's path.
    let stream_then_leave = |on_disconnect: &'static str| {
        let api = &api;
        let ana = ana.clone();
        async move {
            let (_, _, thread) = api.send(api.request("POST", "/threads", &ana, "{}")).await;
            let thread = thread["thread_id"].as_str().expect("id").to_owned();
            let body = format!(
                r#"{{"assistant_id": "agent", "after_seconds": 3600, "on_disconnect": {on_disconnect}}}"#
            );
            let router = mostrador_api::router(api.state.clone(), &api.config);
            let path = format!("/threads/{thread}/runs/stream");
            let response =
                tower::ServiceExt::oneshot(router, api.request("POST", &path, &ana, &body))
                    .await
                    .expect("infallible");
            assert_eq!(response.status(), StatusCode::OK);
            let run = response.headers()[header::CONTENT_LOCATION]
                .to_str()
                .expect("location")
                .trim_end_matches("/stream")
                .to_owned();
            let mut events = response.into_body().into_data_stream();
            events
                .next()
                .await
                .expect("the metadata event")
                .expect("bytes");
            drop(events);
            run
        }
    };

    let stays = stream_then_leave(r#""continue""#).await;
    let cancelled = stream_then_leave(r#""cancel""#).await;
    let join = api.request("GET", &format!("{cancelled}/join"), &ana, "");
    tokio::time::timeout(Duration::from_secs(10), api.send(join))
        .await
        .expect("the run ends once its client went away");
    let (_, _, run) = api.send(api.request("GET", &cancelled, &ana, "")).await;
    assert_eq!(run["status"], "interrupted", "{run}");
    let (_, _, run) = api.send(api.request("GET", &stays, &ana, "")).await;
    assert_eq!(
        run["status"], "pending",
        "`continue`: the run goes on: {run}"
    );

    let (status, _, _) = api
        .send(api.request(
            "POST",
            "/runs/stream",
            &ana,
            r#"{"assistant_id": "agent", "on_disconnect": "never"}"#,
        ))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn joining_takes_cancel_on_disconnect_as_both_sdks_send_it(pool: PgPool) {
    let api = Api::new(pool).await;
    let ana = api.token_for(&caller("ana", "customer", None));
    let thread = new_thread(&api, &ana).await;
    let (_, _, run) = api
        .send(api.request(
            "POST",
            &format!("/threads/{thread}/runs"),
            &ana,
            r#"{"assistant_id": "agent", "after_seconds": 3600}"#,
        ))
        .await;
    let path = format!(
        "/threads/{thread}/runs/{}/stream",
        run["run_id"].as_str().expect("id")
    );
    // Python: true/false; JS: 1/0; anything but true, yes or 1 is false, as on the official server.
    for value in ["false", "0", "False", "maybe"] {
        let (status, _) = api
            .head_of(api.request(
                "GET",
                &format!("{path}?cancel_on_disconnect={value}"),
                &ana,
                "",
            ))
            .await;
        assert_eq!(status, StatusCode::OK, "{value}");
    }
    let (_, _, run) = api
        .send(api.request("GET", &path.replace("/stream", ""), &ana, ""))
        .await;
    assert_eq!(
        run["status"], "pending",
        "leaving a joined stream that did not ask to cancel"
    );
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_reader_cannot_cancel_the_owners_run_by_leaving_a_join(pool: PgPool) {
    let api = Api::new(pool).await;
    let ana = api.token_for(&caller("ana", "customer", Some("madrid-1")));
    // A manager of ana's store reads her threads, and may not cancel her runs.
    let marta = api.token_for(&caller("marta", "manager", Some("madrid-1")));
    let thread = new_thread(&api, &ana).await;
    let read = long_run(&api, &ana, &thread).await;
    let owned = long_run(&api, &ana, &thread).await;
    for (who, path) in [(&marta, &read), (&ana, &owned)] {
        for form in ["stream", "join"] {
            let (status, _) = api
                .head_of(api.request(
                    "GET",
                    &format!("{path}/{form}?cancel_on_disconnect=true"),
                    who,
                    "",
                ))
                .await;
            assert_eq!(status, StatusCode::OK, "{form}: a reader may join");
        }
    }
    // The owner's leaving cancels her run (so the disconnects were handled) ...
    let join = api.request("GET", &format!("{owned}/join"), &ana, "");
    tokio::time::timeout(Duration::from_secs(10), api.send(join))
        .await
        .expect("the owner's run ends once she left");
    let (_, _, owned) = api.send(api.request("GET", &owned, &ana, "")).await;
    assert_eq!(owned["status"], "interrupted", "{owned}");
    // ... and the reader's changed nothing.
    let (_, _, read) = api.send(api.request("GET", &read, &ana, "")).await;
    assert_eq!(
        read["status"], "pending",
        "a reader's leaving cancels nothing: {read}"
    );
}

/// A run of `agent` that waits an hour, queued on `thread` by the caller of `token`; its path.
async fn long_run(api: &Api, token: &str, thread: &str) -> String {
    let (_, _, run) = api
        .send(api.request(
            "POST",
            &format!("/threads/{thread}/runs"),
            token,
            r#"{"assistant_id": "agent", "after_seconds": 3600, "multitask_strategy": "enqueue"}"#,
        ))
        .await;
    format!(
        "/threads/{thread}/runs/{}",
        run["run_id"].as_str().expect("id")
    )
}
