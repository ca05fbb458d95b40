//! Crons: schedules and the scheduler's tick (exactly one run per due cron per tick, however many
//! workers tick at once).

use chrono::{DateTime, Utc};
use mostrador_queue::data::cron::{self, NewCron, RunTemplate, Schedule};
use mostrador_queue::thread::{self, NewThread};
use serde_json::json;
use sqlx::PgPool;

use crate::support::{GRAPH, count_runs, wide_pool};

fn at(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text)
        .expect("time")
        .with_timezone(&Utc)
}

fn next(schedule: &str, after: &str) -> String {
    next_in(schedule, after, None)
}

fn next_in(schedule: &str, after: &str, zone: Option<&str>) -> String {
    Schedule::parse(schedule)
        .expect("valid")
        .next_after(at(after), cron::zone(zone).expect("a zone"))
        .expect("fires")
        .to_rfc3339()
}

#[test]
fn schedules_fire_on_the_minutes_they_name() {
    assert_eq!(
        next("*/15 * * * *", "2026-11-30T10:07:30Z"),
        "2026-11-30T10:15:00+00:00"
    );
    assert_eq!(
        next("0 6 * * *", "2026-11-30T06:00:00Z"),
        "2026-12-01T06:00:00+00:00",
        "strictly after"
    );
    // 2026-12-05 is a Saturday.
    assert_eq!(
        next("30 3 * * mon-fri", "2026-12-05T12:00:00Z"),
        "2026-12-07T03:30:00+00:00"
    );
    assert_eq!(
        next("0 0 * * 7", "2026-12-05T12:00:00Z"),
        "2026-12-06T00:00:00+00:00",
        "7 is Sunday"
    );
    assert_eq!(
        next("0 12 1 jan *", "2026-11-30T00:00:00Z"),
        "2027-01-01T12:00:00+00:00"
    );
    // Day of month and day of week both given: either matches (2026-12-01 is a Tuesday).
    assert_eq!(
        next("0 0 15 * tue", "2026-11-30T00:00:00Z"),
        "2026-12-01T00:00:00+00:00"
    );
    assert_eq!(
        next("5-10/5 * * * *", "2026-11-30T10:06:00Z"),
        "2026-11-30T10:10:00+00:00"
    );
    assert_eq!(
        next("0 0 29 2 *", "2026-11-30T00:00:00Z"),
        "2028-02-29T00:00:00+00:00"
    );
}

#[test]
fn schedules_fire_on_the_clocks_of_their_time_zone() {
    let madrid = Some("Europe/Madrid");
    // 09:00 in Madrid is 08:00 UTC in winter (CET) and 07:00 UTC in summer (CEST).
    assert_eq!(
        next_in("0 9 * * *", "2026-12-01T12:00:00Z", madrid),
        "2026-12-02T08:00:00+00:00"
    );
    assert_eq!(
        next_in("0 9 * * *", "2026-07-01T12:00:00Z", madrid),
        "2026-07-02T07:00:00+00:00"
    );
    // A day is the zone's: Monday 00:30 in Madrid is Sunday 23:30 UTC.
    assert_eq!(
        next_in("30 0 * * mon", "2026-12-05T12:00:00Z", madrid),
        "2026-12-06T23:30:00+00:00"
    );
    // 2026-03-29 02:30 does not happen in Madrid (02:00 CET becomes 03:00 CEST): the next day's.
    assert_eq!(
        next_in("30 2 * * *", "2026-03-28T12:00:00Z", madrid),
        "2026-03-30T00:30:00+00:00"
    );
    // 2026-10-25 02:30 happens twice in Madrid (03:00 CEST becomes 02:00 CET): once, the first.
    let first = next_in("30 2 * * *", "2026-10-24T12:00:00Z", madrid);
    assert_eq!(first, "2026-10-25T00:30:00+00:00");
    assert_eq!(
        next_in("30 2 * * *", &first, madrid),
        "2026-10-26T01:30:00+00:00",
        "not again an hour later"
    );
    assert_eq!(
        next_in("0 9 * * *", "2026-12-01T12:00:00Z", Some("UTC")),
        next("0 9 * * *", "2026-12-01T12:00:00Z")
    );
    let err = cron::zone(Some("Mars/Olympus")).expect_err("no such zone");
    assert!(err.contains("Invalid timezone: 'Mars/Olympus'"), "{err}");
}

#[test]
fn bad_schedules_say_why() {
    for (schedule, why) in [
        ("* * * *", "five fields"),
        ("60 * * * *", "minute"),
        ("* 5-1 * * *", "backwards"),
        ("*/0 * * * *", "step"),
        ("0 0 31 2 *", "never fires"),
        ("0 0 * * funday", "day of week"),
    ] {
        let err = Schedule::parse(schedule).expect_err(schedule);
        assert!(err.contains(why), "{schedule}: {err}");
    }
}

/// A cron of ana's, every minute, in UTC.
fn every_minute(thread_id: Option<mostrador_queue::ThreadId>) -> NewCron {
    NewCron {
        graph_id: GRAPH.into(),
        thread_id,
        owner: "ana".into(),
        tenant: Some("madrid-centro".into()),
        schedule: "* * * * *".into(),
        timezone: None,
        payload: RunTemplate {
            input: Some(json!({"n": 1})),
            ..RunTemplate::default()
        },
        metadata: json!({}),
        enabled: true,
        end_time: None,
        on_run_completed: "keep".into(),
        api_key: None,
    }
}

async fn due_cron(pool: &PgPool, thread_id: Option<mostrador_queue::ThreadId>) -> uuid::Uuid {
    let cron = cron::create(pool, &every_minute(thread_id), 100)
        .await
        .expect("cron");
    make_due(pool, cron.cron_id).await;
    cron.cron_id
}

/// The tick that was due a second ago (time moved with SQL).
async fn make_due(pool: &PgPool, cron_id: uuid::Uuid) {
    sqlx::query(
        "update mostrador.crons set next_run_at = now() - interval '1 second' where cron_id = $1",
    )
    .bind(cron_id)
    .execute(pool)
    .await
    .expect("due");
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn concurrent_ticks_enqueue_one_run_per_due_cron(pool: PgPool) {
    let pool = wide_pool(&pool, 8).await;
    let stateless = due_cron(&pool, None).await;
    let thread = thread::create(&pool, &NewThread::new(GRAPH, "ana"))
        .await
        .expect("thread");
    let threaded = due_cron(&pool, Some(thread.thread_id)).await;
    for tick in 1..=3 {
        let (a, b, c) = tokio::join!(
            cron::tick(&pool, None),
            cron::tick(&pool, None),
            cron::tick(&pool, None)
        );
        let enqueued = a.expect("tick") + b.expect("tick") + c.expect("tick");
        assert_eq!(
            enqueued, 2,
            "tick {tick}: one run per cron, whoever won the lock"
        );
        assert_eq!(count_runs(&pool).await, 2 * tick as i64);
        let quiet = cron::tick(&pool, None).await.expect("tick");
        assert_eq!(quiet, 0, "nothing is due until the next minute");
        make_due(&pool, stateless).await;
        make_due(&pool, threaded).await;
    }
    let on_thread: i64 =
        sqlx::query_scalar("select count(*) from mostrador.runs where thread_id = $1")
            .bind(thread.thread_id.0)
            .fetch_one(&pool)
            .await
            .expect("count");
    assert_eq!(on_thread, 3, "the thread cron's runs queue on its thread");
    let stateless_threads: i64 = sqlx::query_scalar(
        "select count(*) from mostrador.threads where metadata->>'cron_id' = $1::text and owner = 'ana'",
    )
    .bind(stateless)
    .fetch_one(&pool)
    .await
    .expect("count");
    assert_eq!(
        stateless_threads, 3,
        "a new thread of the creator per stateless run"
    );
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_cron_past_its_end_time_or_without_its_thread_stops(pool: PgPool) {
    let ended = due_cron(&pool, None).await;
    sqlx::query(
        "update mostrador.crons set end_time = now() - interval '1 hour' where cron_id = $1",
    )
    .bind(ended)
    .execute(&pool)
    .await
    .expect("end");
    let thread = thread::create(&pool, &NewThread::new(GRAPH, "ana"))
        .await
        .expect("thread");
    let orphan = due_cron(&pool, Some(thread.thread_id)).await;
    thread::delete(&pool, thread.thread_id)
        .await
        .expect("delete");
    assert_eq!(cron::tick(&pool, None).await.expect("tick"), 0);
    let enabled: Vec<bool> = sqlx::query_scalar(
        "select enabled from mostrador.crons where cron_id = any($1) order by cron_id",
    )
    .bind(vec![ended, orphan])
    .fetch_all(&pool)
    .await
    .expect("enabled");
    assert_eq!(enabled, [false, false]);
    assert_eq!(count_runs(&pool).await, 0);
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_reject_cron_on_a_busy_thread_skips_its_run_and_holds_back_no_other(pool: PgPool) {
    let busy = thread::create(&pool, &NewThread::new(GRAPH, "ana"))
        .await
        .expect("thread");
    mostrador_queue::run::enqueue::enqueue(
        &pool,
        &mostrador_queue::NewRun::new(busy.thread_id, GRAPH),
        None,
    )
    .await
    .expect("a run in flight");
    let rejecting = due_cron(&pool, Some(busy.thread_id)).await;
    sqlx::query(
        r#"update mostrador.crons set payload = '{"multitask_strategy": "reject"}' where cron_id = $1"#,
    )
    .bind(rejecting)
    .execute(&pool)
    .await
    .expect("reject");
    due_cron(&pool, None).await;

    assert_eq!(
        cron::tick(&pool, None).await.expect("the tick goes on"),
        1,
        "the other cron's run"
    );
    let (enabled, moved_on): (bool, bool) = sqlx::query_as(
        "select enabled, next_run_at > now() from mostrador.crons where cron_id = $1",
    )
    .bind(rejecting)
    .fetch_one(&pool)
    .await
    .expect("cron");
    assert!(
        enabled && moved_on,
        "the busy thread's occurrence is skipped, not retried every tick"
    );
    assert_eq!(
        count_runs(&pool).await,
        2,
        "the run in flight and the other cron's"
    );
}

/// A template its runs cannot take (written by hand, or by a release that read it otherwise) is
/// never run otherwise than it says: an unknown stream mode is not dropped, an unknown strategy
/// is not read as `enqueue`. Its cron is disabled, saying why; the others run.
#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_template_its_runs_cannot_take_disables_its_cron_and_holds_back_no_other(pool: PgPool) {
    let mut unreadable = Vec::new();
    for payload in [
        r#"{"stream_mode": ["values", "nonsense"]}"#,
        r#"{"multitask_strategy": "later"}"#,
        r#"{"config": {"recursion_limit": 0}}"#,
        r#"{"assistant_id": "not an id"}"#,
    ] {
        let cron_id = due_cron(&pool, None).await;
        sqlx::query("update mostrador.crons set payload = $2::jsonb where cron_id = $1")
            .bind(cron_id)
            .bind(payload)
            .execute(&pool)
            .await
            .expect("payload");
        unreadable.push(cron_id);
    }
    due_cron(&pool, None).await;

    assert_eq!(
        cron::tick(&pool, None).await.expect("the tick goes on"),
        1,
        "the readable cron's run"
    );
    let enabled: Vec<bool> =
        sqlx::query_scalar("select enabled from mostrador.crons where cron_id = any($1)")
            .bind(&unreadable)
            .fetch_all(&pool)
            .await
            .expect("crons");
    assert_eq!(enabled, [false; 4]);
    assert_eq!(count_runs(&pool).await, 1);
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_crons_run_waits_while_its_graph_is_over_the_queue_limit(pool: PgPool) {
    let limit = mostrador_queue::QueueLimit {
        retry_after: std::time::Duration::from_secs(1),
        ..mostrador_queue::QueueLimit::new(1)
    };
    // The graph holds its one pending run already.
    crate::support::new_run(&pool).await;
    let cron_id = due_cron(&pool, None).await;
    assert_eq!(cron::tick(&pool, Some(limit)).await.expect("tick"), 0);
    assert_eq!(count_runs(&pool).await, 1, "the cron enqueued nothing");
    // Still due: the next tick, once the queue has room, enqueues it.
    sqlx::query("update mostrador.runs set status = 'interrupted'")
        .execute(&pool)
        .await
        .expect("drain the queue");
    assert_eq!(cron::tick(&pool, Some(limit)).await.expect("tick"), 1);
    let runs: i64 = sqlx::query_scalar(
        "select count(*) from mostrador.runs where status = 'pending' and metadata ->> 'cron_id' = $1",
    )
    .bind(cron_id.to_string())
    .fetch_one(&pool)
    .await
    .expect("count");
    assert_eq!(runs, 1);
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_caller_has_at_most_its_share_of_crons(pool: PgPool) {
    let new = |owner: &str| NewCron {
        owner: owner.into(),
        schedule: "0 3 * * *".into(),
        ..every_minute(None)
    };
    for _ in 0..2 {
        cron::create(&pool, &new("ana"), 2)
            .await
            .expect("within the share");
    }
    let refused = cron::create(&pool, &new("ana"), 2).await;
    assert!(
        matches!(
            refused,
            Err(mostrador_queue::Error::Invalid { field: "crons", .. })
        ),
        "{refused:?}"
    );
    // Another caller's share is their own.
    cron::create(&pool, &new("luis"), 2)
        .await
        .expect("luis's first");
    let count: i64 = sqlx::query_scalar("select count(*) from mostrador.crons")
        .fetch_one(&pool)
        .await
        .expect("count");
    assert_eq!(count, 3);
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_tick_moves_a_cron_on_by_the_clocks_of_its_time_zone(pool: PgPool) {
    // 09:00 in Kolkata (UTC+05:30, no summer time) is 03:30 UTC.
    let created = cron::create(
        &pool,
        &NewCron {
            schedule: "0 9 * * *".into(),
            timezone: Some("Asia/Kolkata".into()),
            ..every_minute(None)
        },
        100,
    )
    .await
    .expect("cron");
    assert_eq!(created.next_run_at.format("%H:%M").to_string(), "03:30");
    make_due(&pool, created.cron_id).await;
    assert_eq!(cron::tick(&pool, None).await.expect("tick"), 1);
    let moved = cron::get(&pool, created.cron_id, Some("ana"))
        .await
        .expect("get")
        .expect("the cron");
    assert_eq!(moved.next_run_at.format("%H:%M").to_string(), "03:30");
    assert!(moved.next_run_at > Utc::now());
    assert_eq!(
        cron::get(&pool, created.cron_id, Some("luis"))
            .await
            .expect("get"),
        None,
        "another's cron is not found"
    );
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_crons_runs_carry_its_webhook(pool: PgPool) {
    let cron_id = due_cron(&pool, None).await;
    sqlx::query(
        "update mostrador.crons set payload = payload || '{\"webhook\": \"https://hooks.example.com/x\"}' where cron_id = $1",
    )
    .bind(cron_id)
    .execute(&pool)
    .await
    .expect("a webhook");
    assert_eq!(cron::tick(&pool, None).await.expect("tick"), 1);
    let webhook: Option<String> = sqlx::query_scalar("select webhook from mostrador.runs")
        .fetch_one(&pool)
        .await
        .expect("the run");
    assert_eq!(webhook.as_deref(), Some("https://hooks.example.com/x"));
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_stateless_crons_thread_goes_with_its_run_unless_it_keeps_them(pool: PgPool) {
    use mostrador_queue::run::ending::Ending;

    let worker = crate::support::new_worker(&pool).await;
    let mut threads = Vec::new();
    for completed in ["delete", "keep"] {
        let cron = cron::create(
            &pool,
            &NewCron {
                on_run_completed: completed.into(),
                ..every_minute(None)
            },
            100,
        )
        .await
        .expect("cron");
        assert_eq!(cron.on_run_completed, completed);
        make_due(&pool, cron.cron_id).await;
        assert_eq!(cron::tick(&pool, None).await.expect("tick"), 1);
        let held = crate::support::claim_one(&pool, &worker)
            .await
            .expect("the cron's run");
        threads.push(held.thread_id);
        held.end(&pool, Ending::Success).await.expect("complete");
    }
    assert!(
        thread::get(&pool, threads[0]).await.is_err(),
        "deleted with its run"
    );
    assert!(thread::get(&pool, threads[1]).await.is_ok(), "kept");
}

/// A cron made with an API key stops when the key is taken back: at once when it is revoked, at
/// the next tick when it has expired. Changed with a credential that holds, it runs again; a cron
/// made with a token is not touched.
#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_cron_stops_when_the_key_it_was_made_with_is_revoked_or_expires(pool: PgPool) {
    use mostrador_queue::data::api_keys::{self, NewApiKey};

    let key = || async {
        let new = NewApiKey {
            subject: "ana".into(),
            roles: vec!["customer".into()],
            tenant: Some("madrid-centro".into()),
            expires_in: None,
        };
        api_keys::create(&pool, &new).await.expect("key").0.key_id
    };
    let (revoked, expiring, fresh) = (key().await, key().await, key().await);
    let cron_with = |api_key| {
        let pool = pool.clone();
        async move {
            let new = NewCron {
                api_key,
                ..every_minute(None)
            };
            cron::create(&pool, &new, 100).await.expect("cron").cron_id
        }
    };
    let enabled = |cron_id| {
        let pool = pool.clone();
        async move {
            sqlx::query_scalar::<_, bool>("select enabled from mostrador.crons where cron_id = $1")
                .bind(cron_id)
                .fetch_one(&pool)
                .await
                .expect("cron")
        }
    };
    let of_revoked = cron_with(Some(revoked)).await;
    let of_expiring = cron_with(Some(expiring)).await;
    let of_token = cron_with(None).await;

    api_keys::revoke(&pool, revoked).await.expect("revoke");
    assert!(
        !enabled(of_revoked).await,
        "revoking the key disables its cron"
    );
    assert!(enabled(of_expiring).await && enabled(of_token).await);

    sqlx::query(
        "update mostrador.api_keys set expires_at = now() - interval '1 second' where key_id = $1",
    )
    .bind(expiring.0)
    .execute(&pool)
    .await
    .expect("expire");
    for cron_id in [of_revoked, of_expiring, of_token] {
        make_due(&pool, cron_id).await;
    }
    assert_eq!(
        cron::tick(&pool, None).await.expect("tick"),
        1,
        "the token's cron alone"
    );
    assert!(
        !enabled(of_expiring).await,
        "an expired key's cron is disabled"
    );
    assert!(enabled(of_token).await);

    // Enabled again by its maker with a key that holds: bound to it, it runs.
    let change = cron::CronUpdate {
        enabled: Some(true),
        ..cron::CronUpdate::default()
    };
    cron::update(&pool, of_revoked, Some("ana"), Some(fresh), &change)
        .await
        .expect("update")
        .expect("the cron");
    make_due(&pool, of_revoked).await;
    assert_eq!(cron::tick(&pool, None).await.expect("tick"), 1);
    assert!(enabled(of_revoked).await);
}
