//! `retention-bench`: `mostrador retention` over 100,000 idle threads (each with a run, three
//! events, a checkpoint, two blobs and a pending write) beside as many recent ones that must stay.
//! Prints the plan of the candidate query as the queue's connections run it (a generic plan), and
//! the pass's time in bounded batches.
//!
//! It drops and recreates its own database on every start.

use std::time::Instant;

use clap::Parser;
use mostrador_queue::data::retention::{self, Sweep};
use mostrador_queue::db::DbConfig;
use mostrador_queue::schema;
use sqlx::migrate::MigrateDatabase;
use sqlx::{Executor, Row};

#[derive(Debug, Parser)]
struct Args {
    /// A database this benchmark may drop and recreate.
    #[arg(
        long,
        env = "BENCH_DATABASE_URL",
        default_value = "postgres://postgres@127.0.0.1:5432/mostrador_retention_bench"
    )]
    database_url: String,
    /// Idle threads (and as many recent ones).
    #[arg(long, default_value_t = 100_000)]
    threads: i64,
    #[arg(long, default_value_t = 500)]
    batch: i64,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if sqlx::Postgres::database_exists(&args.database_url).await? {
        sqlx::Postgres::force_drop_database(&args.database_url).await?;
    }
    sqlx::Postgres::create_database(&args.database_url).await?;
    let pool = DbConfig {
        pool_size: 4,
        ..DbConfig::new(&args.database_url, "retention-bench")
    }
    .connect_lazy()?;
    schema::migrate(&pool, &[]).await?;

    let loading = Instant::now();
    let n = args.threads;
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "insert into mostrador.threads (thread_id, graph_id, owner, last_activity_at)
         select gen_random_uuid(), 'tienda', 'u' || i,
                case when i <= {n} then now() - interval '10 days' else now() - interval '1 day' end
                    - i * interval '1 second'
         from generate_series(1, 2 * {n}) i;
         insert into mostrador.runs (run_id, thread_id, graph_id, status)
         select gen_random_uuid(), thread_id, graph_id, 'success' from mostrador.threads;
         insert into mostrador.run_events (run_id, seq, event, data)
         select run_id, s, 'values', '{{}}' from mostrador.runs, generate_series(1, 3) s;
         insert into mostrador.checkpoints (thread_id, checkpoint_id, step)
         select thread_id, gen_random_uuid(), 1 from mostrador.threads;
         insert into mostrador.checkpoint_blobs (thread_id, channel, version, value)
         select thread_id, c, 1, '[]' from mostrador.threads, unnest(array['messages', 'store']) c;
         insert into mostrador.checkpoint_writes (thread_id, checkpoint_id, task_id, idx, channel, value)
         select thread_id, gen_random_uuid(), '0:agent', 0, 'messages', '[]' from mostrador.threads;
         analyze;"
    )))
    .execute(&pool)
    .await?;
    println!(
        "loaded {} threads ({n} idle) in {:.1} s",
        2 * n,
        loading.elapsed().as_secs_f64()
    );

    let mut conn = pool.acquire().await?;
    conn.execute("set plan_cache_mode = force_generic_plan")
        .await?;
    conn.execute(
        "prepare idle(text, int, timestamptz, uuid, bigint) as
         select thread_id, graph_id, last_activity_at from mostrador.threads
         where graph_id = $1 and deleted_at is null
           and last_activity_at < now() - make_interval(days => $2)
           and (last_activity_at, thread_id) > ($3, $4)
         order by last_activity_at, thread_id limit $5",
    )
    .await?;
    let plan = sqlx::query(
        "explain (analyze, costs off, timing off) execute idle('tienda', 7, '-infinity', '00000000-0000-0000-0000-000000000000', 500)",
    )
    .fetch_all(&mut *conn)
    .await?;
    println!("\nthe candidate query's generic plan (first batch):");
    for row in plan {
        println!("  {}", row.get::<String, _>(0));
    }
    drop(conn);

    let started = Instant::now();
    let report = retention::sweep(
        &pool,
        &Sweep {
            graph: None,
            batch: args.batch,
            dry_run: false,
        },
        |_| {},
    )
    .await?;
    let elapsed = started.elapsed().as_secs_f64();
    println!(
        "\nretention, batch {}: deleted {} threads ({} runs, {} events, {} checkpoints, {} blobs, {} writes), skipped {}, in {elapsed:.1} s: {:.0} threads/s",
        args.batch,
        report.deleted,
        report.rows.runs,
        report.rows.events,
        report.rows.checkpoints,
        report.rows.blobs,
        report.rows.writes,
        report.skipped,
        report.deleted as f64 / elapsed
    );
    let left: i64 =
        sqlx::query_scalar("select count(*) from mostrador.threads where purged_at is null")
            .fetch_one(&pool)
            .await?;
    anyhow::ensure!(
        left == n,
        "{left} threads left, expected the {n} recent ones"
    );
    println!("the {n} recent threads are untouched");
    pool.close().await;
    Ok(())
}
