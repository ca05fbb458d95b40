//! Crons over HTTP: get and update (what the body names changes, the rest stays), IANA time
//! zones, and a caller's crons being their own.

use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use sqlx::PgPool;

use crate::support::{Api, caller, new_thread};

fn time(value: &Value) -> DateTime<Utc> {
    value
        .as_str()
        .and_then(|text| DateTime::parse_from_rfc3339(text).ok())
        .map(|time| time.with_timezone(&Utc))
        .unwrap_or_else(|| panic!("a time: {value}"))
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_cron_is_read_and_changed_by_its_maker_only(pool: PgPool) {
    let api = Api::new(pool).await;
    let ana = api.token_for(&caller("ana", "customer", Some("madrid-1")));
    let luis = api.token_for(&caller("luis", "customer", Some("madrid-1")));
    let marta = api.token_for(&caller("marta", "manager", Some("madrid-1")));
    let thread = new_thread(&api, &ana).await;
    let (status, _, created) = api
        .send(
            api.request(
                "POST",
                &format!("/threads/{thread}/runs/crons"),
                &ana,
                &json!({
                    "assistant_id": "agent",
                    "schedule": "0 9 * * *",
                    "timezone": "Europe/Madrid",
                    "input": {"messages": []},
                    "metadata": {"team": "a"},
                })
                .to_string(),
            ),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{created}");
    assert_eq!(created["timezone"], "Europe/Madrid");
    // 09:00 in Madrid is 08:00 UTC in winter, 07:00 in summer.
    let next = time(&created["next_run_date"]);
    assert!(
        next.format("%H:%M").to_string() == "08:00" || next.format("%H:%M").to_string() == "07:00",
        "{next}"
    );
    let cron_id = created["cron_id"].as_str().expect("an id").to_owned();
    let path = format!("/runs/crons/{cron_id}");

    let (status, _, got) = api.send(api.request("GET", &path, &ana, "")).await;
    assert_eq!((status, &got), (StatusCode::OK, &created));
    for (who, token) in [("another customer", &luis), ("the store's manager", &marta)] {
        for (method, body) in [
            ("GET", ""),
            ("PATCH", r#"{"enabled": false}"#),
            ("DELETE", ""),
        ] {
            let (status, _, answer) = api.send(api.request(method, &path, token, body)).await;
            assert_eq!(status, StatusCode::NOT_FOUND, "{who}: {method} {answer}");
        }
    }
    for missing in [
        "/runs/crons/not-an-id",
        "/runs/crons/00000000-0000-7000-8000-000000000000",
    ] {
        let (status, _, _) = api.send(api.request("GET", missing, &ana, "")).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
    }

    // Bad changes are refused, and change nothing.
    for (body, expected) in [
        ("{}", StatusCode::BAD_REQUEST),
        (r#"{"schedule": null}"#, StatusCode::BAD_REQUEST),
        (
            r#"{"schedule": "0 25 * * *"}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            r#"{"timezone": "Mars/Olympus"}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (r#"{"enabled": "yes"}"#, StatusCode::UNPROCESSABLE_ENTITY),
        (r#"{"input": 7}"#, StatusCode::UNPROCESSABLE_ENTITY),
        (
            r#"{"webhook": "https://example.com"}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            r#"{"on_run_completed": "never"}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        ("[]", StatusCode::UNPROCESSABLE_ENTITY),
    ] {
        let (status, _, answer) = api.send(api.request("PATCH", &path, &ana, body)).await;
        assert_eq!(status, expected, "{body}: {answer}");
    }
    let (_, _, unchanged) = api.send(api.request("GET", &path, &ana, "")).await;
    assert_eq!(unchanged, created, "refusals changed nothing");

    // A new schedule in another zone moves the next run; the rest stays.
    let (status, _, updated) = api
        .send(
            api.request(
                "PATCH",
                &path,
                &ana,
                &json!({
                    "schedule": "30 12 * * *",
                    "timezone": "America/New_York",
                    "metadata": {"owner": "ops"},
                    "end_time": "2030-01-01T00:00:00Z",
                })
                .to_string(),
            ),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{updated}");
    assert_eq!(updated["schedule"], "30 12 * * *");
    assert_eq!(updated["timezone"], "America/New_York");
    assert_eq!(updated["metadata"], json!({"team": "a", "owner": "ops"}));
    assert_eq!(updated["payload"]["input"], json!({"messages": []}));
    assert_eq!(updated["end_time"], "2030-01-01T00:00:00Z");
    let next = time(&updated["next_run_date"]);
    assert!(
        ["16:30", "17:30"].contains(&next.format("%H:%M").to_string().as_str()),
        "12:30 in New York: {next}"
    );
    assert_eq!(
        updated["payload"]["config"]["configurable"]["langgraph_auth_user_id"],
        "ana"
    );

    // Disabled: no next run; enabled again: the next from now. `null` clears the end time.
    let (_, _, disabled) = api
        .send(api.request("PATCH", &path, &ana, r#"{"enabled": false}"#))
        .await;
    assert_eq!(
        (
            disabled["enabled"].clone(),
            disabled["next_run_date"].clone()
        ),
        (json!(false), Value::Null)
    );
    let (_, _, enabled) = api
        .send(api.request(
            "PATCH",
            &path,
            &ana,
            r#"{"enabled": true, "end_time": null, "input": {"messages": [{"role": "user", "content": "hi"}]}}"#,
        ))
        .await;
    assert_eq!(enabled["enabled"], true);
    assert!(time(&enabled["next_run_date"]) > Utc::now());
    assert_eq!(enabled["end_time"], Value::Null);
    assert_eq!(enabled["payload"]["input"]["messages"][0]["content"], "hi");

    let (status, _, _) = api.send(api.request("DELETE", &path, &ana, "")).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _, _) = api.send(api.request("GET", &path, &ana, "")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn an_unknown_time_zone_creates_no_cron(pool: PgPool) {
    let api = Api::new(pool).await;
    let ana = api.token_for(&caller("ana", "customer", Some("madrid-1")));
    let (status, _, answer) = api
        .send(api.request(
            "POST",
            "/runs/crons",
            &ana,
            r#"{"assistant_id": "agent", "schedule": "0 9 * * *", "timezone": "Europe/Atlantis"}"#,
        ))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        answer["detail"],
        "Invalid timezone: 'Europe/Atlantis'. Use IANA timezone format (e.g. 'America/New_York')."
    );
    let (_, _, found) = api
        .send(api.request("POST", "/runs/crons/search", &ana, "{}"))
        .await;
    assert_eq!(found, json!([]));
}

/// Every cron due now.
async fn make_due(pool: &PgPool) {
    sqlx::query("update mostrador.crons set next_run_at = now() - interval '1 second'")
        .execute(pool)
        .await
        .expect("due");
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_cron_on_a_created_assistant_runs_with_its_config_as_it_is_then(pool: PgPool) {
    let api = Api::new(pool.clone()).await;
    let ana = api.token_for(&caller("ana", "customer", Some("madrid-1")));
    let luis = api.token_for(&caller("luis", "customer", Some("madrid-1")));
    let (_, _, assistant) = api
        .send(api.request(
            "POST",
            "/assistants",
            &ana,
            r#"{"graph_id": "agent", "config": {"configurable": {"tone": "terse", "lang": "es"}}}"#,
        ))
        .await;
    let assistant_id = assistant["assistant_id"]
        .as_str()
        .expect("an id")
        .to_owned();
    let body = json!({
        "assistant_id": assistant_id, "schedule": "* * * * *",
        "config": {"configurable": {"lang": "ca"}},
    })
    .to_string();
    let (status, _, answer) = api
        .send(api.request("POST", "/runs/crons", &luis, &body))
        .await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "not luis's assistant: {answer}"
    );
    let (status, _, cron) = api
        .send(api.request("POST", "/runs/crons", &ana, &body))
        .await;
    assert_eq!(status, StatusCode::OK, "{cron}");
    assert_eq!(cron["assistant_id"], json!(assistant_id));
    // Changed after the cron was made: its runs take it as it is when they start.
    let (status, _, _) = api
        .send(api.request(
            "PATCH",
            &format!("/assistants/{assistant_id}"),
            &ana,
            r#"{"config": {"configurable": {"tone": "warm", "lang": "es"}}}"#,
        ))
        .await;
    assert_eq!(status, StatusCode::OK);
    make_due(&pool).await;
    assert_eq!(
        mostrador_queue::data::cron::tick(&pool, None)
            .await
            .expect("tick"),
        1
    );
    let (config, metadata): (Value, Value) =
        sqlx::query_as("select config, metadata from mostrador.runs")
            .fetch_one(&pool)
            .await
            .expect("the cron's run");
    assert_eq!(
        config["configurable"]["tone"], "warm",
        "the assistant's, now"
    );
    assert_eq!(config["configurable"]["lang"], "ca", "the cron's over it");
    assert_eq!(config["configurable"]["langgraph_auth_user_id"], "ana");
    assert_eq!(metadata["assistant_id"], json!(assistant_id));

    // Deleted: the cron cannot run, and stops.
    let (status, _, _) = api
        .send(api.request("DELETE", &format!("/assistants/{assistant_id}"), &ana, ""))
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    make_due(&pool).await;
    assert_eq!(
        mostrador_queue::data::cron::tick(&pool, None)
            .await
            .expect("tick"),
        0
    );
    let (_, _, found) = api
        .send(api.request(
            "GET",
            &format!("/runs/crons/{}", cron["cron_id"].as_str().expect("id")),
            &ana,
            "",
        ))
        .await;
    assert_eq!(found["enabled"], false);
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_search_by_assistant_finds_that_assistants_crons_only(pool: PgPool) {
    let api = Api::new(pool).await;
    let ana = api.token_for(&caller("ana", "customer", Some("madrid-1")));
    let luis = api.token_for(&caller("luis", "customer", Some("madrid-1")));
    let (_, _, assistant) = api
        .send(api.request(
            "POST",
            "/assistants",
            &ana,
            r#"{"graph_id": "agent", "config": {"configurable": {"tone": "terse"}}}"#,
        ))
        .await;
    let created = assistant["assistant_id"]
        .as_str()
        .expect("an id")
        .to_owned();
    let cron_on = |assistant_id: &str| {
        json!({"assistant_id": assistant_id, "schedule": "0 9 * * *"}).to_string()
    };
    let mut made = Vec::new();
    for assistant_id in [created.as_str(), "agent"] {
        let (status, _, cron) = api
            .send(api.request("POST", "/runs/crons", &ana, &cron_on(assistant_id)))
            .await;
        assert_eq!(status, StatusCode::OK, "{cron}");
        made.push(cron["cron_id"].clone());
    }
    let graphs_own = api
        .send(api.request("GET", "/assistants/agent", &ana, ""))
        .await
        .2["assistant_id"]
        .clone();
    let found = |token: String, assistant_id: Value| {
        let api = &api;
        async move {
            let body = json!({"assistant_id": assistant_id}).to_string();
            let (status, _, crons) = api
                .send(api.request("POST", "/runs/crons/search", &token, &body))
                .await;
            assert_eq!(status, StatusCode::OK, "{crons}");
            let (_, _, count) = api
                .send(api.request("POST", "/runs/crons/count", &token, &body))
                .await;
            let ids: Vec<Value> = crons
                .as_array()
                .expect("a list")
                .iter()
                .map(|cron| cron["cron_id"].clone())
                .collect();
            assert_eq!(count, json!(ids.len()));
            ids
        }
    };
    assert_eq!(
        found(ana.clone(), json!(created)).await,
        vec![made[0].clone()]
    );
    assert_eq!(
        found(ana.clone(), json!("agent")).await,
        vec![made[1].clone()]
    );
    assert_eq!(found(ana.clone(), graphs_own).await, vec![made[1].clone()]);
    assert_eq!(
        found(ana.clone(), json!("no-such")).await,
        Vec::<Value>::new()
    );
    // Another caller's assistant is one they cannot see: nothing of it.
    assert_eq!(found(luis, json!(created)).await, Vec::<Value>::new());
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn cron_searches_filter_by_metadata_and_page_with_the_official_headers(pool: PgPool) {
    let api = Api::new(pool).await;
    let ana = api.token_for(&caller("ana", "customer", Some("madrid-1")));
    for team in ["research", "research", "ops"] {
        let body = json!({"assistant_id": "agent", "schedule": "0 3 * * *",
                          "metadata": {"team": team}})
        .to_string();
        let (status, _, cron) = api
            .send(api.request("POST", "/runs/crons", &ana, &body))
            .await;
        assert_eq!(status, StatusCode::OK, "{cron}");
    }
    let search = |body: Value| {
        let request = api.request("POST", "/runs/crons/search", &ana, &body.to_string());
        async { api.send(request).await }
    };
    let (_, headers, page) = search(json!({"limit": 2})).await;
    assert_eq!(page.as_array().map(Vec::len), Some(2));
    assert_eq!(headers["x-pagination-total"], "3");
    assert_eq!(headers["x-pagination-next"], "2");
    let (_, headers, page) = search(json!({"metadata": {"team": "research"}})).await;
    assert_eq!(page.as_array().map(Vec::len), Some(2));
    assert!(headers.get("x-pagination-next").is_none());
    let (_, _, count) = api
        .send(api.request(
            "POST",
            "/runs/crons/count",
            &ana,
            r#"{"metadata": {"team": "ops"}}"#,
        ))
        .await;
    assert_eq!(count, json!(1));
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_crons_config_is_held_to_the_runs_limits(pool: PgPool) {
    let api = Api::new(pool).await;
    let ana = api.token_for(&caller("ana", "customer", Some("madrid-1")));
    let create = |config: &str| {
        api.request(
            "POST",
            "/runs/crons",
            &ana,
            &format!(r#"{{"assistant_id": "agent", "schedule": "0 9 * * *", "config": {config}}}"#),
        )
    };
    // What a run may not ask for, a cron may not ask for its runs: refused, nothing created.
    for config in [
        r#"{"recursion_limit": 1000000000000}"#,
        r#"{"recursion_limit": 0}"#,
        r#"{"max_concurrency": 0}"#,
        r#"{"recursion_limit": "many"}"#,
    ] {
        let (status, _, answer) = api.send(create(config)).await;
        assert_eq!(
            status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{config}: {answer}"
        );
    }
    let (_, _, found) = api
        .send(api.request("POST", "/runs/crons/search", &ana, "{}"))
        .await;
    assert_eq!(found, json!([]), "no cron was created");

    let (status, _, cron) = api.send(create(r#"{"recursion_limit": 50}"#)).await;
    assert_eq!(status, StatusCode::OK, "{cron}");
    let path = format!("/runs/crons/{}", cron["cron_id"].as_str().expect("id"));
    let (status, _, answer) = api
        .send(api.request(
            "PATCH",
            &path,
            &ana,
            r#"{"config": {"recursion_limit": 1000000000000}}"#,
        ))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{answer}");
    let (_, _, kept) = api.send(api.request("GET", &path, &ana, "")).await;
    assert_eq!(
        kept["payload"]["config"]["recursion_limit"], 50,
        "a refused change changes nothing: {kept}"
    );
}

/// A caller's crons are bounded whether enabled or not (disabled ones would otherwise pile up
/// without end), and counted by one query, filters and all.
#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_callers_crons_are_bounded_enabled_or_not(pool: PgPool) {
    let api = Api::with(
        pool,
        mostrador_api::ApiConfig {
            max_crons_per_caller: 3,
            ..crate::support::config()
        },
    )
    .await;
    let ana = api.token_for(&caller("ana", "customer", Some("madrid-1")));
    let create = |enabled: bool| {
        let body = json!({"assistant_id": "agent", "schedule": "0 9 * * *", "enabled": enabled});
        api.request("POST", "/runs/crons", &ana, &body.to_string())
    };
    for enabled in [false, false, true] {
        let (status, _, cron) = api.send(create(enabled)).await;
        assert_eq!(status, StatusCode::OK, "{cron}");
    }
    let (status, _, answer) = api.send(create(false)).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{answer}");
    let count = |body: &'static str| {
        let request = api.request("POST", "/runs/crons/count", &ana, body);
        async { api.send(request).await.2 }
    };
    assert_eq!(count("{}").await, json!(3));
    assert_eq!(count(r#"{"enabled": false}"#).await, json!(2));
    assert_eq!(count(r#"{"assistant_id": "agent"}"#).await, json!(3));
    assert_eq!(count(r#"{"assistant_id": "nobody"}"#).await, json!(0));
}
