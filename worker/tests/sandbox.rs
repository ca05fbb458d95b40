//! The sandbox's write-back with real bubblewrap processes: a command cannot make the worker read
//! anything outside its folder, nor make it wait, however it races the worker's read.
//! Run by `.ci/run` once bubblewrap is installed (`--run-ignored only`).

use std::time::{Duration, Instant};

use mostrador_queue::state::files::{self, NewFile};
use mostrador_queue::state::saver::Saver;
use mostrador_worker::sandbox::{self, SandboxConfig};
use sqlx::PgPool;

use crate::support::{claim_next, enqueue};

const LIMIT: i64 = 1 << 20;

#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
#[ignore = "needs bubblewrap (bwrap): .ci/run runs it once installed"]
async fn a_sandboxed_command_cannot_make_the_worker_read_or_wait_outside_its_folder(
    pool: PgPool,
) -> anyhow::Result<()> {
    let bwrap = std::env::var("MOSTRADOR_TEST_BWRAP").unwrap_or_else(|_| "/usr/bin/bwrap".into());
    let config = SandboxConfig::new(bwrap.into());
    enqueue(&pool, None, |new| new).await;
    let claimed = claim_next(&pool).await;
    let saver = Saver::fenced(pool.clone(), &claimed);
    let thread_id = claimed.thread_id.0;

    // What the worker can read and the sandbox cannot see: a file and a folder of the worker's.
    let outside = std::env::temp_dir().join(format!("mostrador-outside-{}", uuid::Uuid::now_v7()));
    std::fs::create_dir_all(outside.join("folder"))?;
    let secret = format!("SECRET-{}", uuid::Uuid::now_v7());
    std::fs::write(outside.join("secret"), &secret)?;
    std::fs::write(outside.join("folder/secret"), &secret)?;
    let (file, folder) = (outside.join("secret"), outside.join("folder"));
    let (file, folder) = (file.display(), folder.display());

    let commands = [
        // Still swapping when its time is up, as fast as it can (perl: a rename per system
        // call), several processes at once: files that are links to the worker's files half of
        // the time, FIFOs, a folder that is a link to the worker's folder.
        (
            format!(
                r#"mkdir -p /d; echo d > /d/in.txt
                 perl -e 'for (1..40) {{ open F, ">/n$_.txt"; print F "n"; close F }}
                     while (1) {{ for my $n (1..40) {{
                         symlink("{file}", "/l$$"); rename("/l$$", "/n$n.txt");
                         open F, ">/r$$"; print F "r"; close F; rename("/r$$", "/n$n.txt");
                     }} }}' &
                 perl -e 'use POSIX; while (1) {{
                         POSIX::mkfifo("/p$$", 0600); rename("/p$$", "/f.txt");
                         open F, ">/q$$"; print F "q"; close F; rename("/q$$", "/f.txt");
                         symlink("{folder}", "/e$$"); rename("/e$$", "/d") or
                             do {{ unlink "/d/in.txt"; rmdir "/d"; rename("/e$$", "/d") }};
                         unlink "/d"; mkdir "/d"; open F, ">/d/in.txt"; print F "d"; close F;
                     }}' &
                 sleep 60"#
            ),
            Some(Duration::from_secs(1)),
        ),
        // Left behind as they are: a FIFO, a link to a file, a folder replaced by a link, hard
        // links (within the folder; /usr is another mount).
        (
            format!(
                "mkfifo /fifo.txt; ln -s {file} /link.txt; rm -rf /d; ln -s {folder} /d
                 echo h > /h.txt; ln /h.txt /hard.txt; ln /usr/bin/env /env 2>/dev/null; true"
            ),
            None,
        ),
        // A FIFO kept open by a process that outlives its command.
        (
            "mkfifo /held.txt; (sleep 1000 > /held.txt &) ; (exec 3<>/held.txt; sleep 1000) & true"
                .to_owned(),
            Some(Duration::from_secs(2)),
        ),
    ];
    for round in 0..4 {
        for (command, timeout) in &commands {
            files::write(
                &pool,
                &saver.lease(),
                thread_id,
                &[NewFile {
                    path: "/a.txt".into(),
                    content: b"before".to_vec(),
                    is_binary: false,
                }],
                &[],
                LIMIT,
            )
            .await?;
            let started = Instant::now();
            let executed = tokio::time::timeout(
                Duration::from_secs(30),
                sandbox::execute(&config, &saver, LIMIT, command, *timeout),
            )
            .await
            .map_err(|_| anyhow::anyhow!("round {round}: the worker waited: {command}"))??;
            assert!(
                started.elapsed() < Duration::from_secs(15),
                "round {round}: {command}"
            );
            let kept = files::read_under(&pool, thread_id, "/").await?;
            for file in &kept {
                let content = String::from_utf8_lossy(&file.content);
                assert!(
                    !content.contains(&secret),
                    "round {round}: {} holds what is outside the folder ({executed:?})",
                    file.path
                );
                assert!(
                    !["/fifo.txt", "/link.txt", "/held.txt", "/env"].contains(&file.path.as_str()),
                    "round {round}: {} is not a regular file of the command's",
                    file.path
                );
            }
        }
    }
    let kept = files::read_under(&pool, thread_id, "/").await?;
    let paths: Vec<&str> = kept.iter().map(|file| file.path.as_str()).collect();
    assert!(
        paths.contains(&"/hard.txt"),
        "a hard link within the folder is a file: {paths:?}"
    );
    std::fs::remove_dir_all(&outside)?;
    Ok(())
}

/// A worker's sandboxed commands run a few at a time (`--sandbox-commands`), whatever the runs
/// that ask: one more waits its turn.
#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
#[ignore = "needs bubblewrap (bwrap): .ci/run runs it once installed"]
async fn a_worker_runs_its_sandboxed_commands_a_few_at_a_time(pool: PgPool) -> anyhow::Result<()> {
    let bwrap = std::env::var("MOSTRADOR_TEST_BWRAP").unwrap_or_else(|_| "/usr/bin/bwrap".into());
    let config = SandboxConfig {
        commands: 2,
        ..SandboxConfig::new(bwrap.into())
    };
    enqueue(&pool, None, |new| new).await;
    let claimed = claim_next(&pool).await;
    let saver = Saver::fenced(pool.clone(), &claimed);
    // Each command says when it started and when it ended, in milliseconds.
    let command = "date +%s%3N; sleep 1; date +%s%3N";
    let run = || sandbox::execute(&config, &saver, LIMIT, command, None);
    let (first, second, third) = tokio::join!(run(), run(), run());
    let mut spans: Vec<(u128, u128)> = Vec::new();
    for executed in [first, second, third] {
        let output = executed?.output;
        let times: Vec<u128> = output
            .lines()
            .filter_map(|line| line.trim().parse().ok())
            .collect();
        anyhow::ensure!(times.len() == 2, "{output}");
        spans.push((times[0], times[1]));
    }
    let at_once = |t: u128| spans.iter().filter(|(s, e)| *s <= t && t < *e).count();
    let most = spans
        .iter()
        .map(|(start, _)| at_once(*start))
        .max()
        .unwrap_or(0);
    anyhow::ensure!(
        most == 2,
        "at most two at once, and two did run together: {spans:?}"
    );
    Ok(())
}

/// A command is bounded as a whole, not process by process: everything it may write is a tmpfs
/// of a bounded size (its root, the thread's files, and `/tmp` at the thread's limit, `/dev/shm` a
/// little, `/dev` read-only), so it writes nothing to the worker's disk and no more than that to
/// its memory; its processes are counted together (as a user the kernel holds to
/// `RLIMIT_NPROC`, even under a root worker), so a fork bomb stops short.
#[sqlx::test(migrator = "mostrador_queue::MIGRATOR")]
#[ignore = "needs bubblewrap (bwrap): .ci/run runs it once installed"]
async fn a_sandboxed_command_is_bounded_as_a_whole(pool: PgPool) -> anyhow::Result<()> {
    let bwrap = std::env::var("MOSTRADOR_TEST_BWRAP").unwrap_or_else(|_| "/usr/bin/bwrap".into());
    let config = SandboxConfig {
        processes: 64,
        ..SandboxConfig::new(bwrap.into())
    };
    enqueue(&pool, None, |new| new).await;
    let claimed = claim_next(&pool).await;
    let saver = Saver::fenced(pool.clone(), &claimed);

    // Three files of 900 kB each under a 1 MiB limit, then /tmp, /dev/shm and /dev.
    let disk = "for i in 1 2 3; do head -c 900000 /dev/zero > /f$i || echo f$i=full; done
        head -c 2000000 /dev/zero > /tmp/x || echo tmp=full
        head -c 20000000 /dev/zero > /dev/shm/x || echo shm=full
        echo x > /dev/x || echo dev=read-only
        df -k / | tail -1";
    let executed = sandbox::execute(&config, &saver, LIMIT, disk, None).await?;
    let output = &executed.output;
    for refused in ["f2=full", "tmp=full", "shm=full", "dev=read-only"] {
        anyhow::ensure!(output.contains(refused), "{refused}: {output}");
    }
    let root_kib: u64 = output
        .lines()
        .last()
        .and_then(|line| line.split_whitespace().nth(1))
        .and_then(|size| size.parse().ok())
        .ok_or_else(|| anyhow::anyhow!("df: {output}"))?;
    // Its root is a tmpfs of the limit (the worker's disk holds nothing of the command's: the
    // files come back through an archive, read within the limit).
    anyhow::ensure!(root_kib <= 1024, "the root holds the limit: {output}");
    // What it left within the limit is kept: the first file.
    let kept = files::read_under(&pool, claimed.thread_id.0, "/").await?;
    anyhow::ensure!(
        kept.iter()
            .any(|file| file.path == "/f1" && file.content.len() == 900_000),
        "{executed:?}"
    );

    // A fork bomb: far more processes than it may have, each waiting.
    // (Counted with the shell's builtins alone: no process is left to fork.)
    let bomb = r#"sh -c 'for i in $(seq 300); do sleep 20 & done' 2>/tmp/forks
        while read -r line; do echo "$line"; done < /tmp/forks
        n=0; for p in /proc/[0-9]*; do n=$((n+1)); done; echo "processes=$n""#;
    let started = Instant::now();
    let executed =
        sandbox::execute(&config, &saver, LIMIT, bomb, Some(Duration::from_secs(5))).await?;
    let processes: usize = executed
        .output
        .lines()
        .find_map(|line| line.strip_prefix("processes=")?.parse().ok())
        .ok_or_else(|| anyhow::anyhow!("{executed:?}"))?;
    anyhow::ensure!(
        executed.output.contains("Cannot fork") && processes <= 64,
        "the processes stop at the bound: {executed:?}"
    );
    anyhow::ensure!(started.elapsed() < Duration::from_secs(15), "{executed:?}");
    Ok(())
}
