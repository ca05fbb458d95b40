//! PostgreSQL out of disk under mostrador: a cluster of the test's own on a small filesystem (a
//! tmpfs it mounts, as root), filled while runs are created and executed, then given space back.
//! The api refuses what it cannot write with a 503 and `Retry-After` (never a 500, never a 200 for
//! what was not kept); a run whose checkpoint cannot be written waits, its attempts untouched,
//! instead of failing; and once there is room again every acknowledged run finishes, alone.
//!
//! It mounts a filesystem and runs a cluster of its own, so it is not part of the parallel suite:
//! `.ci/run` runs it on its own (`--run-ignored only`).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use sqlx::PgPool;
use uuid::Uuid;

use crate::failover::{Cluster, Folder, connect, pg};
use crate::support::{Worker, http_with_head};

/// The filesystem the cluster lives on: small enough to fill in a moment.
const DISK: &str = "size=64m";

/// Unmounts the filesystem when the test ends, however it ends.
struct Mounted(std::path::PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Writes zeros to `path` until the filesystem has no room left.
fn fill(path: &Path) {
    use std::io::Write as _;
    let mut file = std::fs::File::create(path).expect("the filler");
    let chunk = vec![0u8; 1 << 20];
    while file.write_all(&chunk).is_ok() {}
    // What is left is less than a chunk: take it too.
    while file.write_all(&[0u8; 4096]).is_ok() {}
    let _ = file.sync_all();
}

/// Starts a run of the store assistant (`tienda`: the model, its tools, its answer) on a new
/// thread, as a client of `dev`, due `after` seconds from now: the run's id when it was
/// acknowledged, or the refusal's status and whether it said when to retry.
async fn start_run(dev: &Worker, after: u32) -> Result<Uuid, (u16, bool, String)> {
    let json = [("content-type", "application/json")];
    let (status, head, body) = http_with_head(dev.addr().1, "POST", "/threads", &json, "{}")
        .await
        .map_err(|err| (0, false, err.to_string()))?;
    let retry = |head: &str| head.to_ascii_lowercase().contains("retry-after:");
    if status != 200 {
        return Err((status, retry(&head), body));
    }
    let thread: serde_json::Value = serde_json::from_str(&body).expect("a thread");
    let path = format!(
        "/threads/{}/runs",
        thread["thread_id"].as_str().expect("id")
    );
    let input = serde_json::json!({
        "assistant_id": "tienda",
        "input": {"messages": [{"role": "user", "content": "¿Quedan zapatillas de trail Cumbre 42?"}]},
        "after_seconds": after,
    })
    .to_string();
    let (status, head, body) = http_with_head(dev.addr().1, "POST", &path, &json, &input)
        .await
        .map_err(|err| (0, false, err.to_string()))?;
    if status != 200 {
        return Err((status, retry(&head), body));
    }
    let run: serde_json::Value = serde_json::from_str(&body).expect("a run");
    Ok(run["run_id"].as_str().expect("id").parse().expect("a uuid"))
}

/// Runs by status.
async fn statuses(pool: &PgPool) -> BTreeMap<String, i64> {
    sqlx::query_as::<_, (String, i64)>(
        "select status::text, count(*) from mostrador.runs group by 1",
    )
    .fetch_all(pool)
    .await
    .map(|rows| rows.into_iter().collect())
    .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "mounts a filesystem for a cluster of its own (root): .ci/run runs it alone"]
async fn a_database_out_of_disk_refuses_cleanly_and_resumes() {
    use std::os::unix::fs::MetadataExt as _;
    assert_eq!(
        std::fs::metadata("/proc/self").expect("procfs").uid(),
        0,
        "mounting the small filesystem needs root"
    );
    let folder = Folder::new("full-disk");
    let disk = folder.0.join("disk");
    std::fs::create_dir_all(&disk).expect("the mount point");
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", DISK, "tmpfs"])
        .arg(&disk)
        .status()
        .expect("mount");
    assert!(mounted.success(), "mount a tmpfs");
    let _mounted = Mounted(disk.clone());
    let chowned = Command::new("chown")
        .arg("postgres:postgres")
        .arg(&disk)
        .status()
        .expect("chown");
    assert!(chowned.success());
    let cluster = Cluster::new(disk.join("pg"));
    // WAL segments of 1 MiB, so that the cluster fits; what it recycles is kept.
    pg(
        &cluster.bin,
        "initdb",
        &[
            "-D",
            cluster.path(),
            "-U",
            "postgres",
            "--auth=trust",
            "--no-sync",
            "--wal-segsize=1",
        ],
    );
    cluster.configure(&format!(
        "port = {}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{}'\n\
         min_wal_size = '8MB'\nmax_wal_size = '16MB'",
        cluster.port,
        folder.0.display(),
    ));
    cluster.start();
    let admin = connect(cluster.options()).await;
    sqlx::query("create database mostrador")
        .execute(&admin)
        .await
        .expect("a database");
    admin.close().await;
    let pool = connect(cluster.options().database("mostrador")).await;
    mostrador_tests::MIGRATOR
        .run(&pool)
        .await
        .expect("migrations");
    let url = format!("postgres://postgres@127.0.0.1:{}/mostrador", cluster.port);
    let dev = Worker::spawn_at(&url, "full-disk-dev", "dev", &[]);
    dev.until_ready_is(200).await;

    // Runs now, and runs due in three seconds, when the disk will be full.
    let mut acknowledged = Vec::new();
    for after in [0, 3] {
        for _ in 0..10 {
            acknowledged.push(start_run(&dev, after).await.expect("room: acknowledged"));
        }
    }

    fill(&disk.join("filler"));
    // Full: every request is acknowledged (there was room for it) or refused with a 503 that
    // says when to retry; the runs due cannot write their checkpoints, and wait.
    let (mut refused, full_since) = (0, Instant::now());
    while full_since.elapsed() < Duration::from_secs(10) {
        match start_run(&dev, 0).await {
            Ok(run_id) => acknowledged.push(run_id),
            Err((503, true, _)) => refused += 1,
            Err(other) => panic!("full: neither acknowledged nor a 503 to retry: {other:?}"),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(refused > 0, "the disk was full, and nothing was refused");
    let full = statuses(&pool).await;
    assert_eq!(
        full.get("error"),
        None,
        "full: no run failed for it: {full:?}"
    );

    std::fs::remove_file(disk.join("filler")).expect("room again");
    let room_since = Instant::now();
    let ids: Vec<Uuid> = acknowledged.clone();
    loop {
        let finished: i64 = sqlx::query_scalar(
            "select count(*) from mostrador.runs where run_id = any($1) and status = 'success'",
        )
        .bind(&ids)
        .fetch_one(&pool)
        .await
        .unwrap_or(0);
        if finished == ids.len() as i64 {
            break;
        }
        assert!(
            room_since.elapsed() < Duration::from_secs(60),
            "{finished} of {} acknowledged runs finished a minute after the disk had room: {:?}\n{}",
            ids.len(),
            statuses(&pool).await,
            dev.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let resumed = room_since.elapsed();
    // Those that could not write waited for the database, their attempts untouched (counted
    // once there is room: a run's postponement is itself written only then).
    let (waited, failed_attempts): (i64, i64) = sqlx::query_as(
        "select count(*) filter (where drain_count > 0), count(*) filter (where error is not null)
         from mostrador.runs",
    )
    .fetch_one(&pool)
    .await
    .expect("runs");
    assert!(
        waited > 0,
        "no run met the full disk: the test did not test it"
    );
    assert_eq!(failed_attempts, 0, "a run used an attempt on the full disk");
    // Every run's events are whole: numbered from 1 without a gap, and one end.
    let events: Vec<(Uuid, Vec<i64>, i64)> = sqlx::query_as(
        "select run_id, array_agg(seq order by seq), count(*) filter (where event = 'end')
         from mostrador.run_events where run_id = any($1) group by run_id",
    )
    .bind(&ids)
    .fetch_all(&pool)
    .await
    .expect("events");
    assert_eq!(events.len(), ids.len(), "every run has its events");
    for (run_id, seqs, ends) in &events {
        let expected: Vec<i64> = (1..=seqs.len() as i64).collect();
        assert_eq!(
            seqs, &expected,
            "{run_id}: its events, numbered without a gap"
        );
        assert_eq!(*ends, 1, "{run_id}: one end");
    }
    assert!(start_run(&dev, 0).await.is_ok(), "new runs are taken again");
    println!(
        "out of disk: {} runs acknowledged, {refused} requests refused with 503 while full, \
         {waited} runs waited for the database, all finished {resumed:?} after the disk had room",
        ids.len()
    );
    drop(dev);
    pool.close().await;
}
