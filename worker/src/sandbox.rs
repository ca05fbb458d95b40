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

use mostrador_queue::state::files::{self, File, NewFile};
use mostrador_queue::state::saver::Saver;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

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
    let archive = pack(&before)?;
    let timeout = timeout.map_or(config.timeout, |t| t.min(config.timeout));
    let Ran {
        output,
        exit_code,
        truncated,
        left,
    } = run(config, archive, files_limit, command, timeout).await?;
    let after = match left {
        Left::Files(after) => after,
        Left::TooMuch => {
            return Ok(Executed {
                output,
                exit_code,
                truncated,
                files_error: Some(format!(
                    "the command left more than the thread's limit of {files_limit} bytes of files"
                )),
            });
        }
        Left::Unknown(why) => {
            return Ok(Executed {
                output,
                exit_code,
                truncated,
                files_error: Some(format!(
                    "the command's changes to the files were not kept: {why}"
                )),
            });
        }
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

/// The thread's files as a tar archive, by their paths under the sandbox's root (not the
/// sandbox's own names).
fn pack(files: &[File]) -> std::io::Result<Vec<u8>> {
    let mut archive = tar::Builder::new(Vec::new());
    for file in files {
        let Some(path) = local(Path::new(""), &file.path) else {
            continue;
        };
        let mut header = tar::Header::new_gnu();
        header.set_size(file.content.len() as u64);
        header.set_mode(0o644);
        header.set_mtime(u64::try_from(file.modified_at.timestamp()).unwrap_or(0));
        header.set_entry_type(tar::EntryType::Regular);
        archive.append_data(&mut header, path, file.content.as_slice())?;
    }
    archive.into_inner()
}

/// Where a thread's file is under the sandbox's `root`; `None` for the sandbox's own names.
fn local(root: &Path, path: &str) -> Option<PathBuf> {
    let relative = path.trim_start_matches('/');
    let top = relative.split('/').next().unwrap_or_default();
    if relative.is_empty() || RESERVED.contains(&top) {
        return None;
    }
    Some(root.join(relative))
}

/// What a command said, its exit code, whether its output was cut, and what it left.
struct Ran {
    output: String,
    exit_code: Option<i32>,
    truncated: bool,
    left: Left,
}

/// The files a command left, by the thread's path.
enum Left {
    Files(HashMap<String, Vec<u8>>),
    /// More than the thread's limit.
    TooMuch,
    /// They could not be read back: why.
    Unknown(String),
}

/// The shell that runs in the sandbox: it unpacks the thread's files (the archive on its standard
/// input) into the root, runs the command (`$1`, killed after `$2` seconds) with its output on
/// standard output and no way to the archive's channel, then packs the root's files as an archive
/// on the channel (standard error), and exits with the command's code. What it packs is the
/// command's to forge: the worker takes only regular files from it, within the thread's limit.
const WRAPPER: &str = r#"tar -xf - -C / --no-same-owner 2>&1 || exit 125
exec </dev/null 3>&2 2>&1
timeout -s KILL "$2" /bin/sh -c "$1" 3>&-
code=$?
tar -cf - -C / --one-file-system --hard-dereference . >&3 2>/dev/null
exit $code
"#;

/// Time the sandbox has beyond the command's own to unpack and pack the files.
const PACKING: Duration = Duration::from_secs(30);

/// A tmpfs of the sandbox's (`/dev/shm`) sized for semaphores and small buffers only.
const SHM_BYTES: i64 = 8 << 20;

/// A user of no files of the host's: the one the sandbox runs as when the worker is root, so that
/// the kernel holds its processes to `RLIMIT_NPROC`, which it does not apply to root.
const NOBODY: u32 = 65534;

async fn run(
    config: &SandboxConfig,
    archive: Vec<u8>,
    files_limit: i64,
    command: &str,
    timeout: Duration,
) -> std::io::Result<Ran> {
    let files_limit = files_limit.max(0);
    let mut sandbox = if nix::unistd::geteuid().is_root() {
        let mut nobody = Command::new("setpriv");
        nobody.args([
            &format!("--reuid={NOBODY}"),
            &format!("--regid={NOBODY}"),
            "--clear-groups",
            "--inh-caps=-all",
            "--bounding-set=-all",
            "--",
            "prlimit",
        ]);
        nobody
    } else {
        Command::new("prlimit")
    };
    sandbox
        .arg(format!("--cpu={}", config.cpu_seconds))
        .arg(format!("--as={}", config.memory_mib * 1024 * 1024))
        .arg(format!("--fsize={files_limit}"))
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
    // Every folder it may write to is a tmpfs of a bounded size: the root (the thread's files)
    // and `/tmp` the thread's limit each, `/dev/shm` a little; `/dev` itself read-only.
    let sized = |bytes: i64| bytes.max(4096).to_string();
    sandbox
        .args(["--size", &sized(files_limit), "--tmpfs", "/"])
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
        .args(["--proc", "/proc", "--dev", "/dev", "--remount-ro", "/dev"])
        .args(["--size", &sized(SHM_BYTES), "--tmpfs", "/dev/shm"])
        .args(["--size", &sized(files_limit), "--tmpfs", "/tmp"])
        .args(["--chdir", "/"])
        .args([
            "--clearenv",
            "--setenv",
            "PATH",
            "/usr/local/bin:/usr/bin:/bin",
        ])
        .args(["--setenv", "HOME", "/", "--setenv", "LANG", "C.UTF-8"])
        // `mostrador-sandbox` names the shell (`$0`): what finds a sandbox's processes.
        .args(["/bin/sh", "-c", WRAPPER, "mostrador-sandbox", command])
        .arg(timeout.as_secs().max(1).to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let started = std::time::Instant::now();
    let mut child = sandbox.spawn()?;
    let mut stdin = child.stdin.take().expect("stdin is piped");
    let mut stdout = child.stdout.take().expect("stdout is piped");
    let mut stderr = child.stderr.take().expect("stderr is piped");
    let limit = config.output_bytes;
    // The archive of what it left: the thread's limit of content, and room for its headers.
    let archive_limit = u64::try_from(files_limit).unwrap_or(0) * 2 + (1 << 20);
    let give = async {
        // A sandbox that ends before it read it all is not an error of the worker's.
        let _ = stdin.write_all(&archive).await;
        drop(stdin);
    };
    let said = async {
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
        Ok::<_, std::io::Error>((output, truncated))
    };
    let packed = async {
        let mut packed = Vec::new();
        (&mut stderr)
            .take(archive_limit + 1)
            .read_to_end(&mut packed)
            .await?;
        // Drained, so that a sandbox writing more does not block on a full pipe.
        tokio::io::copy(&mut stderr, &mut tokio::io::sink()).await?;
        Ok::<_, std::io::Error>(packed)
    };
    let all = async {
        let ((), said, packed) = tokio::join!(give, said, packed);
        let status = child.wait().await?;
        Ok::<_, std::io::Error>((said?, packed?, status.code()))
    };
    match tokio::time::timeout(timeout + PACKING, all).await {
        // bubblewrap has ended, so has every process of the sandbox (its PID namespace ended
        // with the shell, its first process's only child).
        Ok(done) => {
            let ((mut output, truncated), packed, code) = done?;
            let stopped = code == Some(137) && started.elapsed() >= timeout;
            let left = if packed.len() as u64 > archive_limit {
                Left::TooMuch
            } else {
                match unpack(&packed, files_limit) {
                    Ok(left) => left,
                    Err(why) => {
                        // Not an archive: what bubblewrap itself said, if it could not start.
                        output.extend_from_slice(&packed[..packed.len().min(limit / 2)]);
                        Left::Unknown(why)
                    }
                }
            };
            let mut output = String::from_utf8_lossy(&output).into_owned();
            if stopped {
                output.push_str(&format!(
                    "\nthe command was stopped after its time limit of {timeout:?}"
                ));
            }
            Ok(Ran {
                output,
                exit_code: if stopped { None } else { code },
                truncated,
                left,
            })
        }
        Err(_) => {
            end_all(&mut child).await;
            Ok(Ran {
                output: format!("the command was stopped after its time limit of {timeout:?}"),
                exit_code: None,
                truncated: false,
                left: Left::Unknown("the sandbox did not end in time".into()),
            })
        }
    }
}

/// The regular files of the archive a sandbox left, by the thread's path: links, FIFOs, devices
/// and folders are not the thread's; neither are names outside the root or the sandbox's own.
/// [`Left::TooMuch`] past `limit` bytes of content; an error for what is not an archive.
fn unpack(packed: &[u8], limit: i64) -> Result<Left, String> {
    if packed.is_empty() {
        return Err("the sandbox packed nothing".into());
    }
    let limit = u64::try_from(limit).unwrap_or(0);
    let mut found = HashMap::new();
    let mut total: u64 = 0;
    let mut archive = tar::Archive::new(packed);
    let not_an_archive = |err: std::io::Error| format!("its files could not be read: {err}");
    for entry in archive.entries().map_err(not_an_archive)? {
        let mut entry = entry.map_err(not_an_archive)?;
        if entry.header().entry_type() != tar::EntryType::Regular {
            continue;
        }
        let path = entry.path().map_err(not_an_archive)?.into_owned();
        let mut name = String::new();
        for part in path.components() {
            match part {
                std::path::Component::Normal(part) => {
                    name.push('/');
                    name.push_str(&part.to_string_lossy());
                }
                std::path::Component::CurDir => {}
                // Absolute, or climbing out: not a name under the root.
                _ => {
                    name.clear();
                    break;
                }
            }
        }
        if local(Path::new("/"), &name).is_none() {
            continue;
        }
        total = total.saturating_add(entry.header().size().map_err(not_an_archive)?);
        if total > limit {
            return Ok(Left::TooMuch);
        }
        let mut content = Vec::new();
        std::io::Read::read_to_end(&mut entry, &mut content).map_err(not_an_archive)?;
        found.insert(name, content);
    }
    Ok(Left::Files(found))
}

/// Ends every process of a sandbox: its PID namespace's first process (bubblewrap's init, the
/// only child of bubblewrap) is killed, and the kernel lets it end only once every other process
/// of the namespace has been killed and has ended; bubblewrap, which waits for it, ends after it.
async fn end_all(bubblewrap: &mut tokio::process::Child) {
    let Some(pid) = bubblewrap.id() else {
        return;
    };
    let init = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .ok()
        .and_then(|children| children.split_whitespace().next()?.parse::<i32>().ok());
    if let Some(init) = init {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(init),
            nix::sys::signal::Signal::SIGKILL,
        );
        if let Ok(Ok(_)) = tokio::time::timeout(ENDING, bubblewrap.wait()).await {
            return;
        }
    }
    let _ = bubblewrap.kill().await;
}

/// How long a killed sandbox's processes may take to end.
const ENDING: Duration = Duration::from_secs(5);

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
        let mut archive = tar::Builder::new(Vec::new());
        let mut add = |path: &str, kind: tar::EntryType, content: &[u8]| {
            let mut header = tar::Header::new_gnu();
            header.set_size(content.len() as u64);
            header.set_mode(0o644);
            header.set_entry_type(kind);
            if kind == tar::EntryType::Symlink {
                header.set_link_name("/etc/passwd").expect("link name");
            }
            archive
                .append_data(&mut header, path, content)
                .expect("append");
        };
        add("./a/one", tar::EntryType::Regular, &[1u8; 600]);
        add("./two", tar::EntryType::Regular, &[2u8; 600]);
        // The sandbox's own names, links and FIFOs are not the thread's.
        add("./tmp/big", tar::EntryType::Regular, &[3u8; 5000]);
        add("./link", tar::EntryType::Symlink, &[]);
        add("./fifo", tar::EntryType::Fifo, &[]);
        let packed = archive.into_inner().expect("archive");
        let Ok(Left::Files(read)) = unpack(&packed, 1200) else {
            panic!("within the limit");
        };
        let mut paths: Vec<&String> = read.keys().collect();
        paths.sort();
        assert_eq!(paths, ["/a/one", "/two"]);
        assert!(matches!(unpack(&packed, 1199), Ok(Left::TooMuch)));
        assert!(unpack(b"bwrap: no permission", 1200).is_err());
        // What the worker packs reads back the same.
        let before = [file("/x/y.txt", "y"), file("/usr/z", "z")];
        let Ok(Left::Files(same)) = unpack(&pack(&before).expect("pack"), 100) else {
            panic!("read back");
        };
        assert_eq!(
            same,
            HashMap::from([("/x/y.txt".to_owned(), b"y".to_vec())])
        );
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
