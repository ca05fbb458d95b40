//! The sandbox where a deep agent's commands run: an ephemeral, isolated process per command,
//! over a copy of its thread's files.
//!
//! Each command gets a fresh folder holding the thread's files, which becomes the sandbox's root:
//! the file `/src/a.py` of the thread is `/src/a.py` to the command, as it is to the agent's
//! file tools. The host's `/usr` is mounted read-only (the image needs Python and a POSIX shell
//! there), with `/bin`, `/lib`, `/lib64` and `/sbin` as links into it, a fresh `/proc`, `/dev` and
//! `/tmp`; these names are the sandbox's, and a thread's files under them are not seen there.
//! bubblewrap (`bwrap`) gives the command new namespaces (no network unless the operator allows
//! it, its own processes, an unprivileged user), and `prlimit` its limits of CPU time, memory and
//! file size; the worker kills it past its time limit. When it ends, and only once every one of its
//! processes has ended (its PID namespace is gone), what it created, changed or deleted among the
//! regular files is written back to the thread (fenced by the run's lease, within the thread's
//! limit; a link is never followed, a FIFO or device never opened), and the folder is removed:
//! nothing outlives the command but the thread's files.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use mostrador_queue::files::{self, File, NewFile};
use mostrador_queue::saver::Saver;
use tokio::io::AsyncReadExt;
use tokio::process::Command;
use uuid::Uuid;

/// Mount points of the sandbox: not the thread's files.
const RESERVED: [&str; 8] = ["bin", "dev", "lib", "lib64", "proc", "sbin", "tmp", "usr"];

/// How commands run, as the operator set it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxConfig {
    /// The bubblewrap binary.
    pub bwrap: PathBuf,
    /// The longest a command may run; a command asks for less with its own timeout.
    pub timeout: Duration,
    /// CPU seconds of a command (`RLIMIT_CPU`).
    pub cpu_seconds: u64,
    /// Address space of each of its processes, in MiB (`RLIMIT_AS`).
    pub memory_mib: u64,
    /// Whether commands reach the network (they have none unless the operator says so).
    pub network: bool,
    /// The most output kept: the rest is dropped and the answer says it was truncated.
    pub output_bytes: usize,
    /// Commands running at once in this process; the others wait their turn.
    pub commands: usize,
    /// Processes of the worker's user while a command forks (`RLIMIT_NPROC`, which the kernel
    /// counts with the worker's own and does not apply to root).
    pub processes: u64,
}

impl SandboxConfig {
    pub fn new(bwrap: PathBuf) -> Self {
        Self {
            bwrap,
            timeout: Duration::from_secs(120),
            cpu_seconds: 60,
            memory_mib: 1024,
            network: false,
            output_bytes: 100_000,
            commands: 4,
            processes: 1024,
        }
    }
}

/// What a command did: deepagents' `ExecuteResponse`, and the files it changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Executed {
    /// Its standard output and error, interleaved.
    pub output: String,
    /// `None` when it was killed (its time limit) or died of a signal.
    pub exit_code: Option<i32>,
    pub truncated: bool,
    /// Why its changes to the files were not kept, if they were not (over the thread's limit).
    pub files_error: Option<String>,
}

/// Runs `command` over the thread's files, then writes back what it changed among them.
///
/// # Errors
///
/// The sandbox could not be prepared or started, or its files read back (a message for the
/// agent), or the run's lease was lost ([`mostrador_queue::Error::LeaseLost`], nothing written).
pub async fn execute(
    config: &SandboxConfig,
    saver: &Saver,
    files_limit: i64,
    command: &str,
    timeout: Option<Duration>,
) -> Result<Executed, SandboxError> {
    // One worker's commands at once, whatever the runs that ask: the first configuration the
    // process uses sizes it.
    static RUNNING: std::sync::OnceLock<tokio::sync::Semaphore> = std::sync::OnceLock::new();
    let _turn = RUNNING
        .get_or_init(|| tokio::sync::Semaphore::new(config.commands.max(1)))
        .acquire()
        .await
        .map_err(|err| SandboxError::Io(std::io::Error::other(err)))?;
    let before = files::read_under(saver.pool(), saver.thread_id(), "/").await?;
    let folder = Folder::new()?;
    let root = folder.0.join("root");
    for file in &before {
        if let Some(path) = local(&root, &file.path) {
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(path, &file.content)?;
        }
    }
    let timeout = timeout.map_or(config.timeout, |t| t.min(config.timeout));
    let Ran {
        output,
        exit_code,
        truncated,
        ended,
    } = run(config, &root, files_limit, command, timeout).await?;
    if !ended {
        return Ok(Executed {
            output,
            exit_code,
            truncated,
            files_error: Some(
                "the command's processes could not be seen to end: its changes to the files were \
                 not kept"
                    .into(),
            ),
        });
    }
    // What it left is read only within the thread's limit: a command that made more (each file
    // is bounded, not their number) does not make the worker hold it all.
    let Some(after) = read_back(&root, files_limit)? else {
        return Ok(Executed {
            output,
            exit_code,
            truncated,
            files_error: Some(format!(
                "the command left more than the thread's limit of {files_limit} bytes of files"
            )),
        });
    };
    let (changed, deleted) = changes(&before, after);
    let files_error = if changed.is_empty() && deleted.is_empty() {
        None
    } else {
        match files::write(
            saver.pool(),
            &saver.lease(),
            saver.thread_id(),
            &changed,
            &deleted,
            files_limit,
        )
        .await
        {
            Ok(_) => None,
            Err(mostrador_queue::Error::Invalid { reason, .. }) => Some(reason),
            Err(err) => return Err(err.into()),
        }
    };
    Ok(Executed {
        output,
        exit_code,
        truncated,
        files_error,
    })
}

/// Why a command could not run.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("the sandbox failed: {0}")]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Queue(#[from] mostrador_queue::Error),
}

/// A folder of the worker's own, removed when dropped.
struct Folder(PathBuf);

impl Folder {
    fn new() -> std::io::Result<Self> {
        let path = std::env::temp_dir().join(format!("mostrador-sandbox-{}", Uuid::now_v7()));
        std::fs::create_dir(&path)?;
        std::fs::create_dir(path.join("root"))?;
        Ok(Self(path))
    }
}

impl Drop for Folder {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Where a thread's file is in the sandbox's root; `None` for the sandbox's own names.
fn local(root: &Path, path: &str) -> Option<PathBuf> {
    let relative = path.trim_start_matches('/');
    let top = relative.split('/').next().unwrap_or_default();
    if relative.is_empty() || RESERVED.contains(&top) {
        return None;
    }
    Some(root.join(relative))
}

/// What a command said, its exit code, whether its output was cut, and whether every one of its
/// processes is known to have ended (`false`: its folder may still change, and is not read).
struct Ran {
    output: String,
    exit_code: Option<i32>,
    truncated: bool,
    ended: bool,
}

async fn run(
    config: &SandboxConfig,
    root: &Path,
    files_limit: i64,
    command: &str,
    timeout: Duration,
) -> std::io::Result<Ran> {
    let mut sandbox = Command::new("prlimit");
    sandbox
        .arg(format!("--cpu={}", config.cpu_seconds))
        .arg(format!("--as={}", config.memory_mib * 1024 * 1024))
        .arg(format!("--fsize={}", files_limit.max(0)))
        .arg(format!("--nproc={}", config.processes))
        .arg("--")
        .arg(&config.bwrap)
        .args([
            "--unshare-all",
            "--unshare-user",
            "--uid",
            "65534",
            "--gid",
            "65534",
        ])
        .args(["--die-with-parent", "--new-session"]);
    if config.network {
        sandbox.arg("--share-net");
    }
    sandbox
        .arg("--bind")
        .arg(root)
        .arg("/")
        .args(["--ro-bind", "/usr", "/usr"])
        .args([
            "--symlink",
            "usr/bin",
            "/bin",
            "--symlink",
            "usr/sbin",
            "/sbin",
        ])
        .args([
            "--symlink",
            "usr/lib",
            "/lib",
            "--symlink",
            "usr/lib64",
            "/lib64",
        ])
        .args([
            "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--chdir", "/",
        ])
        .args([
            "--clearenv",
            "--setenv",
            "PATH",
            "/usr/local/bin:/usr/bin:/bin",
        ])
        .args(["--setenv", "HOME", "/", "--setenv", "LANG", "C.UTF-8"])
        .args(["/bin/sh", "-c"])
        .arg(format!("exec 2>&1\n{command}"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = sandbox.spawn()?;
    let mut stdout = child.stdout.take().expect("stdout is piped");
    let mut stderr = child.stderr.take().expect("stderr is piped");
    let limit = config.output_bytes;
    let collect = async {
        let mut output = Vec::new();
        let mut truncated = false;
        let mut chunk = [0u8; 8192];
        loop {
            let read = stdout.read(&mut chunk).await?;
            if read == 0 {
                break;
            }
            let room = limit.saturating_sub(output.len());
            output.extend_from_slice(&chunk[..read.min(room)]);
            truncated |= read > room;
        }
        // What the sandbox itself said (bubblewrap's own errors), after the command's output.
        let mut own = Vec::new();
        stderr.read_to_end(&mut own).await?;
        output.extend_from_slice(&own[..own.len().min(limit.saturating_sub(output.len()))]);
        let status = child.wait().await?;
        Ok::<_, std::io::Error>((output, status.code(), truncated))
    };
    match tokio::time::timeout(timeout, collect).await {
        // bubblewrap has ended, so has the command's PID namespace (see `end_all`).
        Ok(done) => {
            let (output, exit_code, truncated) = done?;
            Ok(Ran {
                output: String::from_utf8_lossy(&output).into_owned(),
                exit_code,
                truncated,
                ended: true,
            })
        }
        Err(_) => Ok(Ran {
            output: format!("the command was stopped after its time limit of {timeout:?}"),
            exit_code: None,
            truncated: false,
            ended: end_all(&mut child).await,
        }),
    }
}

/// Ends every process of a sandbox: its PID namespace's first process (bubblewrap's init, the
/// only child of bubblewrap) is killed, and the kernel lets it end only once every other process
/// of the namespace has been killed and has ended; bubblewrap, which waits for it, ends after
/// it. Killing bubblewrap alone would not wait: the command's processes would die a moment
/// later, while the worker read the folder they could still change. `false` when that end could
/// not be seen (bubblewrap's child not found, or not ended in time).
async fn end_all(bubblewrap: &mut tokio::process::Child) -> bool {
    let Some(pid) = bubblewrap.id() else {
        // Already waited for: it ended after its namespace did.
        return true;
    };
    let init = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .ok()
        .and_then(|children| children.split_whitespace().next()?.parse::<i32>().ok());
    let Some(init) = init else {
        let _ = bubblewrap.kill().await;
        return false;
    };
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(init),
        nix::sys::signal::Signal::SIGKILL,
    );
    if let Ok(Ok(_)) = tokio::time::timeout(ENDING, bubblewrap.wait()).await {
        return true;
    }
    let _ = bubblewrap.kill().await;
    false
}

/// How long a killed sandbox's processes may take to end.
const ENDING: Duration = Duration::from_secs(5);

/// The regular files under `root` after the command, by the thread's path; `None` when they take
/// more than `limit` bytes together.
fn read_back(root: &Path, limit: i64) -> std::io::Result<Option<HashMap<String, Vec<u8>>>> {
    let mut found = HashMap::new();
    let mut total: u64 = 0;
    let limit = u64::try_from(limit).unwrap_or(0);
    let mut folders = vec![root.to_path_buf()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder)? {
            let entry = entry?;
            let kind = entry.file_type()?;
            let path = entry.path();
            let Ok(relative) = path.strip_prefix(root) else {
                continue;
            };
            let name = format!("/{}", relative.to_string_lossy());
            if local(root, &name).is_none() {
                continue;
            }
            // Links are not followed: a command cannot make the worker read outside the folder.
            if kind.is_dir() {
                folders.push(path);
            } else if kind.is_file() {
                let Some(content) = regular_file(&path, limit.saturating_sub(total))? else {
                    continue;
                };
                total = total.saturating_add(content.len() as u64);
                if total > limit {
                    return Ok(None);
                }
                found.insert(name, content);
            }
        }
    }
    Ok(Some(found))
}

/// The content of the file at `path` if it is a regular one (`None`: a link, a FIFO, a device or
/// a socket, which is not the thread's), at most `room` bytes and one more (the caller tells
/// "too much" by it). Read after every process of the command has ended, and still as if one had
/// not: no link is followed, and nothing is opened that could block.
fn regular_file(path: &Path, room: u64) -> std::io::Result<Option<Vec<u8>>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;

    let flags = nix::fcntl::OFlag::O_NOFOLLOW | nix::fcntl::OFlag::O_NONBLOCK;
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags.bits())
        .open(path)
    {
        Ok(file) => file,
        Err(err) if err.raw_os_error() == Some(nix::libc::ELOOP) => return Ok(None),
        Err(err) => return Err(err),
    };
    if !file.metadata()?.is_file() {
        return Ok(None);
    }
    let mut content = Vec::new();
    file.take(room.saturating_add(1))
        .read_to_end(&mut content)?;
    Ok(Some(content))
}

/// The files to write (new or changed) and the paths to delete.
fn changes(before: &[File], mut after: HashMap<String, Vec<u8>>) -> (Vec<NewFile>, Vec<String>) {
    let mut deleted = Vec::new();
    for file in before {
        if local(Path::new("/"), &file.path).is_none() {
            continue;
        }
        match after.remove(&file.path) {
            None => deleted.push(file.path.clone()),
            Some(content) if content == file.content => {}
            Some(content) => {
                after.insert(file.path.clone(), content);
            }
        }
    }
    let mut changed: Vec<NewFile> = after
        .into_iter()
        .map(|(path, content)| NewFile {
            is_binary: std::str::from_utf8(&content).is_err(),
            path,
            content,
        })
        .collect();
    changed.sort_by(|a, b| a.path.cmp(&b.path));
    (changed, deleted)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, content: &str) -> File {
        File {
            path: path.into(),
            content: content.into(),
            is_binary: false,
            created_at: chrono::Utc::now(),
            modified_at: chrono::Utc::now(),
        }
    }

    #[test]
    fn only_what_the_command_changed_is_written_back() {
        let before = [
            file("/same.txt", "a"),
            file("/changed.txt", "b"),
            file("/gone.txt", "c"),
            file("/tmp/hidden.txt", "d"),
        ];
        let after = HashMap::from([
            ("/same.txt".to_owned(), b"a".to_vec()),
            ("/changed.txt".to_owned(), b"B".to_vec()),
            ("/new/bin.dat".to_owned(), vec![0xff, 0xfe]),
        ]);
        let (changed, deleted) = changes(&before, after);
        let written: Vec<(&str, bool)> = changed
            .iter()
            .map(|f| (f.path.as_str(), f.is_binary))
            .collect();
        assert_eq!(written, [("/changed.txt", false), ("/new/bin.dat", true)]);
        // A file under a name the sandbox mounts over was not seen, so it was not deleted.
        assert_eq!(deleted, ["/gone.txt"]);
    }

    #[test]
    fn what_a_command_left_is_read_back_within_the_limit_only() {
        let folder = Folder::new().expect("folder");
        let root = folder.0.join("root");
        std::fs::create_dir_all(root.join("a")).expect("dir");
        std::fs::write(root.join("a/one"), [1u8; 600]).expect("write");
        std::fs::write(root.join("two"), [2u8; 600]).expect("write");
        // The sandbox's own names are not read.
        std::fs::create_dir_all(root.join("tmp")).expect("dir");
        std::fs::write(root.join("tmp/big"), [3u8; 5000]).expect("write");
        let read = read_back(&root, 1200)
            .expect("read")
            .expect("within the limit");
        let mut paths: Vec<&String> = read.keys().collect();
        paths.sort();
        assert_eq!(paths, ["/a/one", "/two"]);
        assert!(read_back(&root, 1199).expect("read").is_none());
    }

    #[test]
    fn the_sandbox_names_are_not_the_threads_files() {
        let root = Path::new("/r");
        assert_eq!(local(root, "/a/b"), Some(PathBuf::from("/r/a/b")));
        assert_eq!(local(root, "/usr/x"), None);
        assert_eq!(local(root, "/"), None);
        assert_eq!(local(root, "/tmpfile"), Some(PathBuf::from("/r/tmpfile")));
    }
}
