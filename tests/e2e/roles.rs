//! The runtime role: `mostrador migrate --grant-runtime-role` gives it data privileges only; the
//! api, the workers, retention and the scheduler's commands work under it, and it can neither
//! create, alter nor drop anything.

use sqlx::postgres::PgConnectOptions;
use sqlx::{ConnectOptions, PgPool};

use crate::retail::{approve, ask_for_refund, call, token};
use crate::support::{Db, Worker};

/// A login role of this test (roles are global to the cluster: dropped at the end).
struct RuntimeRole {
    name: String,
    admin: PgPool,
}

impl RuntimeRole {
    async fn create(admin: &PgPool) -> Self {
        let name = format!("mostrador_rt_{}", uuid::Uuid::now_v7().simple());
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("create role {name} login")))
            .execute(admin)
            .await
            .expect("create role");
        Self {
            name,
            admin: admin.clone(),
        }
    }

    async fn drop(self, db: &str) {
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "drop owned by {0}; drop role {0}",
            self.name
        )))
        .execute(&self.admin)
        .await
        .unwrap_or_else(|err| panic!("drop role {} in {db}: {err}", self.name));
    }
}

/// The api, a worker, `seed` and `retention` run a whole approval flow under the runtime role;
/// the role cannot create, alter, truncate or drop anything.
#[sqlx::test(migrator = "mostrador_tests::MIGRATOR")]
async fn runtime_role_cannot_ddl(pool: PgPool) {
    let db = Db::new(pool).await;
    let role = RuntimeRole::create(&db.pool).await;
    let status = tokio::process::Command::new(env!("CARGO_BIN_EXE_mostrador-e2e"))
        .args([
            "migrate",
            "--database-url",
            &db.url,
            "--grant-runtime-role",
            &role.name,
        ])
        .status()
        .await
        .expect("migrate runs");
    assert!(status.success(), "migrate --grant-runtime-role");
    let runtime_url = db.url.replacen(
        "postgres://postgres@",
        &format!("postgres://{}@", role.name),
        1,
    );
    assert_ne!(runtime_url, db.url);

    let seeded = tokio::process::Command::new(env!("CARGO_BIN_EXE_mostrador-e2e"))
        .args(["seed", "--database-url", &runtime_url])
        .status()
        .await
        .expect("seed runs");
    assert!(
        seeded.success(),
        "the demo data loads under the runtime role"
    );
    let secret = "e2e secret";
    let api = Worker::spawn_at(&runtime_url, "api", "api", &["--jwt-secret", secret]);
    let worker = Worker::spawn_at(
        &runtime_url,
        "worker",
        "worker",
        &["--poll-interval", "200ms", "--graphs", "cliente,tienda"],
    );
    api.until_ready_is(200).await;
    worker.until_ready_is(200).await;

    // A whole approval flow: threads, runs, events, checkpoints, business rows, tool effects.
    let ana = token(secret, "ana", "customer", "madrid-centro");
    let marta = token(secret, "marta", "manager", "madrid-centro");
    let (thread_id, waiting) =
        ask_for_refund(&api, &ana, "Quiero devolver el pedido PED-1001").await;
    let (status, queue) = call(&api, "GET", "/approvals", &marta, None).await;
    assert_eq!((status, queue.as_array().map(Vec::len)), (200, Some(1)));
    let (status, values) = call(
        &api,
        "POST",
        &format!("/threads/{thread_id}/runs/wait"),
        &marta,
        Some(approve(&waiting)),
    )
    .await;
    assert_eq!(status, 200, "{values}");
    assert!(
        values["messages"].to_string().contains("115,70 €"),
        "{values}"
    );

    let retention = tokio::process::Command::new(env!("CARGO_BIN_EXE_mostrador-e2e"))
        .args(["retention", "--dry-run", "--database-url", &runtime_url])
        .output()
        .await
        .expect("retention runs");
    assert!(retention.status.success(), "{retention:?}");

    let options: PgConnectOptions = runtime_url.parse().expect("url");
    let mut conn = options
        .connect()
        .await
        .expect("connect as the runtime role");
    for ddl in [
        "create table mostrador.x (id int)",
        "create table retail.x (id int)",
        "drop table mostrador.runs",
        "alter table retail.refunds add column x int",
        "create index on mostrador.runs (graph_id)",
        "truncate mostrador.tool_effects",
        "create schema y",
        "create table public.x (id int)",
    ] {
        let res = sqlx::raw_sql(ddl).execute(&mut conn).await;
        assert!(res.is_err(), "the runtime role could run {ddl}");
    }
    drop(conn);
    drop((api, worker));
    role.drop(&db.url).await;
}
