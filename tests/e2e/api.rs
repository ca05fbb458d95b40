//! `mostrador api` as a process: probes, a token, an assistant per graph, SIGTERM.

use std::time::Duration;

use mostrador_api::auth::mint;
use mostrador_api::{AuthConfig, Caller, ClaimPaths, Role};
use serde_json::Value;
use sqlx::PgPool;

use crate::support::{Db, Worker};

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn api_process_serves_assistants_and_exits_on_sigterm(pool: PgPool) {
    let db = Db::new(pool).await;
    let mut api = Worker::spawn(&db, "api", "api", &["--jwt-secret", "e2e secret"]);
    api.until_ready_is(200).await;

    let config = AuthConfig {
        secret: "e2e secret".into(),
        issuer: "mostrador".into(),
        audience: "mostrador".into(),
        claims: ClaimPaths::default(),
    };
    let caller = Caller {
        subject: "ana".into(),
        role: Role::Customer,
        store: None,
    };
    let token = mint(&config, &caller, Duration::from_secs(60)).expect("token");
    let bearer = format!("Bearer {token}");
    let json = ("Content-Type", "application/json");
    let (status, body) = api
        .request(
            "POST",
            "/assistants/search",
            &[("Authorization", &bearer), json],
            "{\"limit\": 100}",
        )
        .await
        .expect("search");
    assert_eq!(status, 200, "{body}");
    let assistants: Value = serde_json::from_str(&body).expect("json");
    let mut graphs: Vec<&str> = assistants
        .as_array()
        .expect("a list")
        .iter()
        .filter_map(|assistant| assistant["graph_id"].as_str())
        .collect();
    graphs.sort_unstable();
    assert_eq!(
        graphs,
        [
            "bench_linear_1",
            "bench_linear_6",
            "e2e_fanout",
            "e2e_flaky",
            "e2e_linear_5",
            "e2e_linear_6"
        ]
    );

    let (status, _) = api
        .request("POST", "/assistants/search", &[json], "{}")
        .await
        .expect("search");
    assert_eq!(status, 401);

    api.terminate();
    assert!(
        api.exit(Duration::from_secs(10)).await.success(),
        "{}",
        api.log()
    );
}
