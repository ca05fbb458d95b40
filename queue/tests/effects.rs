//! Tools with external effects: once per idempotency key, even when two runs of the tool race.

use mostrador_queue::data::effects::{claim, record};
use serde_json::json;
use sqlx::PgPool;
use uuid::Uuid;

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn an_effect_recorded_under_a_key_is_returned_not_repeated(
    pool: PgPool,
) -> anyhow::Result<()> {
    let (thread, run) = (Uuid::now_v7(), Uuid::now_v7());
    let mut tx = pool.begin().await?;
    assert_eq!(
        claim(&mut tx, "k1", "refund", thread, run).await?,
        None,
        "first: do it"
    );
    record(&mut tx, "k1", &json!({"refund_id": 7})).await?;
    tx.commit().await?;

    let mut again = pool.begin().await?;
    assert_eq!(
        claim(&mut again, "k1", "refund", thread, run).await?,
        Some(json!({"refund_id": 7})),
        "second: the recorded result"
    );
    again.commit().await?;
    let mut other = pool.begin().await?;
    assert_eq!(
        claim(&mut other, "k2", "refund", thread, run).await?,
        None,
        "another key is another effect"
    );
    Ok(())
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_racing_second_claim_waits_for_the_first_and_gets_its_result(
    pool: PgPool,
) -> anyhow::Result<()> {
    let (thread, run) = (Uuid::now_v7(), Uuid::now_v7());
    let mut first = pool.begin().await?;
    assert_eq!(claim(&mut first, "k", "refund", thread, run).await?, None);

    let racing = {
        let pool = pool.clone();
        tokio::spawn(async move {
            let mut second = pool.begin().await?;
            let seen = claim(&mut second, "k", "refund", thread, run).await?;
            second.commit().await?;
            Ok::<_, sqlx::Error>(seen)
        })
    };
    // The second claim blocks on the key's row until the first transaction ends.
    let waiting: i64 = loop {
        let n = sqlx::query_scalar(
            "select count(*) from pg_stat_activity where wait_event_type = 'Lock' and datname = current_database()",
        )
        .fetch_one(&pool)
        .await?;
        if n > 0 {
            break n;
        }
        tokio::task::yield_now().await;
    };
    assert_eq!(waiting, 1);
    record(&mut first, "k", &json!({"status": "refunded"})).await?;
    first.commit().await?;
    assert_eq!(racing.await??, Some(json!({"status": "refunded"})));
    Ok(())
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_claim_rolled_back_leaves_the_key_free(pool: PgPool) -> anyhow::Result<()> {
    let (thread, run) = (Uuid::now_v7(), Uuid::now_v7());
    let mut failed = pool.begin().await?;
    assert_eq!(claim(&mut failed, "k", "refund", thread, run).await?, None);
    failed.rollback().await?;
    let mut retried = pool.begin().await?;
    assert_eq!(
        claim(&mut retried, "k", "refund", thread, run).await?,
        None,
        "the effect never happened: do it"
    );
    Ok(())
}
