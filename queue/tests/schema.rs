//! The schema check and the runtime role.

use mostrador_queue::run::{self, NewRun};
use mostrador_queue::schema::{self, check_schema};
use mostrador_queue::{Error, WorkerLease, claim};
use sqlx::PgPool;

use crate::support::{GRAPH, graphs, new_thread};

fn schema_error(res: Result<(), Error>) -> String {
    match res {
        Err(Error::Schema(message)) => message,
        other => panic!("expected a schema error, got {other:?}"),
    }
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn schema_check_fails_loudly_when_behind(pool: PgPool) -> anyhow::Result<()> {
    check_schema(&pool, &[]).await?;
    let newest: i64 = sqlx::query_scalar("select max(version) from _sqlx_migrations")
        .fetch_one(&pool)
        .await?;

    // The newest migration not applied: behind.
    let mut tx = pool.begin().await?;
    sqlx::query("delete from _sqlx_migrations where version = $1")
        .bind(newest)
        .execute(&mut *tx)
        .await?;
    let message = schema_error(check_schema(&mut *tx, &[]).await);
    assert!(
        message.contains("behind") && message.contains("mostrador migrate"),
        "{message}"
    );
    tx.rollback().await?;

    Ok(())
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_binary_serves_a_schema_a_newer_release_expanded_and_refuses_one_it_contracted(
    pool: PgPool,
) -> anyhow::Result<()> {
    // The next release's migration, as its `migrate` job records it: this binary does not know it.
    sqlx::query("insert into _sqlx_migrations (version, description, success, checksum, execution_time) select 99999999999999, 'next release', true, checksum, 0 from _sqlx_migrations limit 1")
        .execute(&pool)
        .await?;
    // It only added: this binary starts and stays ready on it (a rollout, a rollback).
    check_schema(&pool, &[]).await?;

    // It removed something this binary reads, and said so.
    sqlx::query("update mostrador.schema_readers set oldest_migration = 99999999999999, why = 'runs.legacy_column dropped'")
        .execute(&pool)
        .await?;
    let message = schema_error(check_schema(&pool, &[]).await);
    assert!(
        message.contains("runs.legacy_column dropped")
            && message.contains("99999999999999")
            && message.contains("deploy a newer release"),
        "{message}"
    );
    Ok(())
}

#[sqlx::test(migrations = false)]
async fn schema_check_fails_on_an_empty_database(pool: PgPool) -> anyhow::Result<()> {
    let message = schema_error(check_schema(&pool, &[]).await);
    assert!(
        message.contains("behind") && message.contains("mostrador migrate"),
        "{message}"
    );
    schema::migrate(&pool, &[]).await?;
    check_schema(&pool, &[]).await?;
    Ok(())
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn runtime_role_can_run_the_queue_but_not_change_the_schema(
    pool: PgPool,
) -> anyhow::Result<()> {
    let role = format!("mostrador_runtime_{}", uuid::Uuid::now_v7().simple());
    let res = schema::grant_runtime_role(&pool, &role, &[]).await;
    assert!(
        matches!(res, Err(Error::Invalid { .. })),
        "a missing role is a clear error"
    );
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("create role {role} nologin")))
        .execute(&pool)
        .await?;
    schema::grant_runtime_role(&pool, &role, &[]).await?;

    let thread = new_thread(&pool).await;
    let mut conn = pool.acquire().await?;
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("set role {role}")))
        .execute(&mut *conn)
        .await?;
    check_schema(&mut *conn, &[]).await?;
    run::enqueue(&mut *conn, &NewRun::new(thread.thread_id, GRAPH), None).await?;
    let worker = WorkerLease::new("runtime", graphs(), std::time::Duration::from_secs(30));
    worker.register(&mut *conn).await?;
    assert_eq!(
        claim(&mut *conn, worker.worker_id, &graphs(), 1)
            .await?
            .len(),
        1
    );
    for ddl in [
        "create table mostrador.x (id int)",
        "drop table mostrador.runs",
        "alter table mostrador.runs add column x int",
        "create schema y",
    ] {
        let res = sqlx::raw_sql(ddl).execute(&mut *conn).await;
        assert!(res.is_err(), "the runtime role could run {ddl}");
    }
    sqlx::raw_sql("reset role").execute(&mut *conn).await?;
    conn.close().await?;
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "drop owned by {role}; drop role {role}"
    )))
    .execute(&pool)
    .await?;
    Ok(())
}
