//! A thread's files: written only under the run's lease, within the thread's limit, and carried
//! by its copies and deletions.

use mostrador_queue::run::lease::sweep;
use mostrador_queue::state::files::{self, NewFile};
use mostrador_queue::thread::{self, NewThread};
use mostrador_queue::{Error, ThreadId};
use sqlx::PgPool;

use crate::support::{claim_one, expire, new_run, new_worker};

fn file(path: &str, content: &str) -> NewFile {
    NewFile {
        path: path.into(),
        content: content.into(),
        is_binary: false,
    }
}

async fn paths(pool: &PgPool, thread_id: uuid::Uuid) -> Vec<String> {
    files::list(pool, thread_id, "/")
        .await
        .expect("list")
        .into_iter()
        .map(|f| f.path)
        .collect()
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn files_are_written_only_under_the_runs_lease(pool: PgPool) -> anyhow::Result<()> {
    new_run(&pool).await;
    let stale = new_worker(&pool).await;
    let claimed = claim_one(&pool, &stale).await.expect("claimed");
    let thread_id = claimed.thread_id.0;
    let lease = claimed.lease();
    files::write(
        &pool,
        &lease,
        thread_id,
        &[file("/a.txt", "a")],
        &[],
        1 << 20,
    )
    .await?;
    assert_eq!(paths(&pool, thread_id).await, ["/a.txt"]);

    // Another thread's run cannot write here with its own lease.
    new_run(&pool).await;
    let other = claim_one(&pool, &new_worker(&pool).await)
        .await
        .expect("claimed");
    let refused = files::write(
        &pool,
        &other.lease(),
        thread_id,
        &[file("/x", "x")],
        &[],
        1 << 20,
    )
    .await;
    assert!(
        matches!(refused, Err(Error::LeaseLost { .. })),
        "{refused:?}"
    );

    // Once the lease is lost, nothing is written or deleted.
    expire(&pool, &stale).await;
    sweep(&pool).await?;
    let refused = files::write(
        &pool,
        &lease,
        thread_id,
        &[file("/b.txt", "b")],
        &["/a.txt".to_owned()],
        1 << 20,
    )
    .await;
    assert!(
        matches!(refused, Err(Error::LeaseLost { .. })),
        "{refused:?}"
    );
    assert_eq!(paths(&pool, thread_id).await, ["/a.txt"]);
    Ok(())
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn a_write_past_the_threads_limit_changes_nothing(pool: PgPool) -> anyhow::Result<()> {
    new_run(&pool).await;
    let claimed = claim_one(&pool, &new_worker(&pool).await)
        .await
        .expect("claimed");
    let (thread_id, lease) = (claimed.thread_id.0, claimed.lease());
    files::write(&pool, &lease, thread_id, &[file("/a", "12345")], &[], 10).await?;
    // Replacing a file counts its new size, not both.
    files::write(
        &pool,
        &lease,
        thread_id,
        &[file("/a", "1234567890")],
        &[],
        10,
    )
    .await?;
    let refused = files::write(
        &pool,
        &lease,
        thread_id,
        &[file("/b", "1")],
        &["/c".to_owned()],
        10,
    )
    .await;
    assert!(
        matches!(refused, Err(Error::Invalid { field: "files", .. })),
        "{refused:?}"
    );
    assert_eq!(paths(&pool, thread_id).await, ["/a"]);
    assert_eq!(files::total(&pool, thread_id).await?, 10);
    // Deleting makes room, in the same write.
    files::write(
        &pool,
        &lease,
        thread_id,
        &[file("/b", "1")],
        &["/a".to_owned()],
        10,
    )
    .await?;
    assert_eq!(paths(&pool, thread_id).await, ["/b"]);
    // A path that is not absolute, or climbs out, is refused.
    for bad in ["b", "/x/../y"] {
        let refused = files::write(&pool, &lease, thread_id, &[file(bad, "")], &[], 10).await;
        assert!(
            matches!(refused, Err(Error::Invalid { field: "path", .. })),
            "{refused:?}"
        );
    }
    Ok(())
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn deleting_a_folder_deletes_what_is_below_it_and_nothing_else(
    pool: PgPool,
) -> anyhow::Result<()> {
    new_run(&pool).await;
    let claimed = claim_one(&pool, &new_worker(&pool).await)
        .await
        .expect("claimed");
    let (thread_id, lease) = (claimed.thread_id.0, claimed.lease());
    let all = [
        file("/src/a.py", "a"),
        file("/src/lib/b.py", "b"),
        file("/src2/c.py", "c"),
        file("/srcfile", "d"),
    ];
    files::write(&pool, &lease, thread_id, &all, &[], 1 << 20).await?;
    let listed: Vec<String> = files::list(&pool, thread_id, "/src")
        .await?
        .into_iter()
        .map(|f| f.path)
        .collect();
    assert_eq!(listed, ["/src/a.py", "/src/lib/b.py"]);
    let done = files::write(
        &pool,
        &lease,
        thread_id,
        &[],
        &["/src/".to_owned()],
        1 << 20,
    )
    .await?;
    assert_eq!(done.deleted, 2);
    assert_eq!(paths(&pool, thread_id).await, ["/src2/c.py", "/srcfile"]);
    Ok(())
}

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
async fn copies_get_the_files_and_deleting_a_thread_deletes_its_own(
    pool: PgPool,
) -> anyhow::Result<()> {
    new_run(&pool).await;
    let claimed = claim_one(&pool, &new_worker(&pool).await)
        .await
        .expect("claimed");
    let (thread_id, lease) = (claimed.thread_id.0, claimed.lease());
    files::write(&pool, &lease, thread_id, &[file("/a", "a")], &[], 1 << 20).await?;
    let copy = thread::create(&pool, &NewThread::new("g", "ana")).await?;
    files::copy(&pool, thread_id, copy.thread_id.0).await?;
    assert_eq!(paths(&pool, copy.thread_id.0).await, ["/a"]);
    thread::delete(&pool, ThreadId(copy.thread_id.0)).await?;
    assert!(paths(&pool, copy.thread_id.0).await.is_empty());
    assert_eq!(paths(&pool, thread_id).await, ["/a"]);
    Ok(())
}
