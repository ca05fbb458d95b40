//! The raw-SQL baseline: a minimal jobs table and the statements the fastest Postgres queues use
//! (batched `unnest` insert, one-statement `SKIP LOCKED` claim, delete on completion); and the
//! runs table's own floor, runs inserted into it with no check.

use std::time::Instant;

use mostrador_queue::thread::Thread;
use sqlx::PgPool;
use tokio::task::JoinSet;
use uuid::Uuid;

use crate::Args;

pub async fn reset(pool: &PgPool) -> anyhow::Result<()> {
    sqlx::raw_sql(
        "drop table if exists bench_jobs;
         create table bench_jobs (
             id bigint generated always as identity primary key,
             payload jsonb not null,
             state smallint not null default 0,
             priority int not null default 0,
             run_at timestamptz not null default now(),
             attempts int not null default 0,
             locked_by uuid
         );
         create index bench_jobs_claim on bench_jobs (priority, run_at, id) where state = 0;",
    )
    .execute(pool)
    .await?;
    Ok(())
}

async fn insert(pool: &PgPool, n: usize) -> anyhow::Result<()> {
    let payloads = vec![serde_json::json!({"messages": [{"role": "user", "content": "hola"}]}); n];
    sqlx::query("insert into bench_jobs (payload) select * from unnest($1::jsonb[])")
        .bind(&payloads)
        .execute(pool)
        .await?;
    Ok(())
}

pub async fn enqueue_batch(pool: &PgPool, args: &Args) -> anyhow::Result<f64> {
    let start = Instant::now();
    for _ in 0..args.batch_runs / args.batch_size {
        insert(pool, args.batch_size).await?;
    }
    Ok(args.batch_runs as f64 / start.elapsed().as_secs_f64())
}

/// `enqueue-batch`'s runs, one per thread, inserted straight into `mostrador.runs`: the columns
/// `run::enqueue_batch` writes (the others take their defaults), `--batch-size` rows a statement.
pub async fn table_enqueue_batch(
    pool: &PgPool,
    threads: &[Thread],
    args: &Args,
) -> anyhow::Result<f64> {
    let input = &args.batch_input;
    let start = Instant::now();
    for chunk in threads.chunks(args.batch_size) {
        let run_ids: Vec<Uuid> = chunk.iter().map(|_| Uuid::now_v7()).collect();
        let thread_ids: Vec<Uuid> = chunk.iter().map(|thread| thread.thread_id.0).collect();
        let graph_ids: Vec<&str> = chunk
            .iter()
            .map(|thread| thread.graph_id.as_deref().unwrap_or_default())
            .collect();
        let inputs = vec![input; chunk.len()];
        let owners: Vec<&str> = chunk.iter().map(|thread| thread.owner.as_str()).collect();
        let trace_ids: Vec<String> = run_ids.iter().map(|id| id.simple().to_string()).collect();
        sqlx::query(
            "insert into mostrador.runs (run_id, thread_id, graph_id, input, owner, trace_id)
             select * from unnest($1::uuid[], $2::uuid[], $3::text[], $4::jsonb[], $5::text[], $6::text[])",
        )
        .bind(&run_ids)
        .bind(&thread_ids)
        .bind(&graph_ids)
        .bind(&inputs)
        .bind(&owners)
        .bind(&trace_ids)
        .execute(pool)
        .await?;
    }
    Ok(threads.len() as f64 / start.elapsed().as_secs_f64())
}

pub async fn claim_complete(pool: &PgPool, args: &Args) -> anyhow::Result<f64> {
    for _ in 0..args.drain_runs / args.batch_size {
        insert(pool, args.batch_size).await?;
    }
    sqlx::raw_sql("analyze bench_jobs").execute(pool).await?;
    let start = Instant::now();
    let mut workers = JoinSet::new();
    for _ in 0..args.workers {
        let (pool, claim_batch) = (pool.clone(), args.claim_batch);
        workers.spawn(async move {
            let worker_id = Uuid::now_v7();
            let mut done = 0;
            loop {
                let ids: Vec<i64> = sqlx::query_scalar(
                    "with c as (
                         select id from bench_jobs
                         where state = 0 and run_at <= now()
                         order by priority, run_at, id
                         limit $1
                         for update skip locked
                     )
                     update bench_jobs j
                     set state = 1, attempts = j.attempts + 1, locked_by = $2
                     from c
                     where j.id = c.id
                     returning j.id",
                )
                .bind(claim_batch)
                .bind(worker_id)
                .fetch_all(&pool)
                .await?;
                if ids.is_empty() {
                    return anyhow::Ok(done);
                }
                sqlx::query("delete from bench_jobs where id = any($1)")
                    .bind(&ids)
                    .execute(&pool)
                    .await?;
                done += ids.len();
            }
        });
    }
    let mut done = 0;
    while let Some(res) = workers.join_next().await {
        done += res??;
    }
    anyhow::ensure!(
        done == args.drain_runs,
        "drained {done} of {}",
        args.drain_runs
    );
    Ok(done as f64 / start.elapsed().as_secs_f64())
}

/// Pickup latency of the raw-SQL queue: one statement inserts a job and notifies; an idle
/// claimer on its own LISTEN connection wakes, claims it with the `SKIP LOCKED` statement and
/// deletes it. Timed from the start of the insert to the claim's return.
pub async fn pickup(
    pool: &PgPool,
    n: usize,
) -> anyhow::Result<(std::time::Duration, std::time::Duration)> {
    let mut listener = sqlx::postgres::PgListener::connect_with(pool).await?;
    listener.listen("bench_jobs").await?;
    let (claimed_tx, mut claimed_rx) = tokio::sync::mpsc::channel::<Instant>(1);
    let claimer = {
        let pool = pool.clone();
        tokio::spawn(async move {
            loop {
                let ids: Vec<i64> = sqlx::query_scalar(
                    "with c as (
                         select id from bench_jobs
                         where state = 0 and run_at <= now()
                         order by priority, run_at, id
                         limit 1
                         for update skip locked
                     )
                     update bench_jobs j set state = 1, attempts = j.attempts + 1
                     from c where j.id = c.id
                     returning j.id",
                )
                .fetch_all(&pool)
                .await?;
                if ids.is_empty() {
                    listener.recv().await?;
                    continue;
                }
                let at = Instant::now();
                sqlx::query("delete from bench_jobs where id = any($1)")
                    .bind(&ids)
                    .execute(&pool)
                    .await?;
                if claimed_tx.send(at).await.is_err() {
                    return anyhow::Ok(());
                }
            }
        })
    };
    let mut latencies = Vec::with_capacity(n);
    let payload = serde_json::json!({"messages": [{"role": "user", "content": "hola"}]});
    for _ in 0..n {
        let start = Instant::now();
        sqlx::query("with job as (insert into bench_jobs (payload) values ($1)) select pg_notify('bench_jobs', '')")
            .bind(&payload)
            .execute(pool)
            .await?;
        let claimed_at =
            tokio::time::timeout(std::time::Duration::from_secs(10), claimed_rx.recv())
                .await?
                .ok_or_else(|| anyhow::anyhow!("claimer stopped"))?;
        latencies.push(claimed_at - start);
    }
    drop(claimed_rx);
    claimer.abort();
    latencies.sort();
    Ok((latencies[n / 2], latencies[n * 99 / 100]))
}
