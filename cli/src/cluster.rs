//! Where `mostrador dev` keeps its data when it is given no database: the server that answers at
//! the default address (`postgres@127.0.0.1:5432`, or libpq's `PGUSER`, `PGHOST`, `PGPORT`), or
//! else a private cluster of its own.
//!
//! The private cluster is PostgreSQL's own `initdb` and `pg_ctl` (found on the `PATH`, through
//! `pg_config --bindir`, or in Debian's `/usr/lib/postgresql/*/bin`), run as the current user: its
//! data in a per-user folder (`$XDG_DATA_HOME/mostrador/pg`, or `--data-dir`), its socket there,
//! listening on a free loopback port. It is stopped when `dev` exits and started again, data
//! and all, the next time.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context, bail};
use sqlx::Connection;

/// The superuser of a private cluster (trust authentication, local connections only).
const SUPERUSER: &str = "postgres";

/// The database `dev` uses, and the private cluster it started, if any (stopped when dropped).
#[derive(Debug)]
pub(crate) struct DevDatabase {
    pub(crate) url: String,
    /// What to tell the user about it.
    pub(crate) description: String,
    cluster: Option<Cluster>,
}

impl DevDatabase {
    /// The server at the default address if it lets us in, else the private cluster in
    /// `data_dir` (or the per-user folder), created on first use.
    pub(crate) async fn find(data_dir: Option<&Path>) -> anyhow::Result<Self> {
        let env = |name: &str| std::env::var(name).ok().filter(|value| !value.is_empty());
        let user = env("PGUSER").unwrap_or_else(|| SUPERUSER.to_owned());
        // A socket folder is libpq's, not a TCP address.
        let host = env("PGHOST")
            .filter(|host| !host.starts_with('/'))
            .unwrap_or_else(|| "127.0.0.1".to_owned());
        let port = env("PGPORT").unwrap_or_else(|| "5432".to_owned());
        let server = format!("postgres://{user}@{host}:{port}");
        match answers(&format!("{server}/postgres")).await {
            Ok(()) => {
                return Ok(Self {
                    url: format!("{server}/mostrador"),
                    description: format!("the server at {host}:{port} (as {user})"),
                    cluster: None,
                });
            }
            Err(why) => {
                tracing::info!(%host, %port, %user, error = %why, "no server lets us in at the default address: using a private cluster");
            }
        }
        let data_dir = match data_dir {
            Some(dir) => dir.to_owned(),
            None => default_data_dir()?,
        };
        let cluster = Cluster::start(&data_dir)?;
        Ok(Self {
            url: format!(
                "postgres://{SUPERUSER}@127.0.0.1:{}/mostrador",
                cluster.port
            ),
            description: format!(
                "a private cluster in {} (127.0.0.1:{}){}",
                data_dir.display(),
                cluster.port,
                if cluster.stop_on_exit {
                    ""
                } else {
                    ", already running: left running at exit"
                }
            ),
            cluster: Some(cluster),
        })
    }

    /// Stops the private cluster this process started (also done when dropped).
    pub(crate) fn close(mut self) {
        if let Some(cluster) = self.cluster.take() {
            cluster.stop();
        }
    }
}

impl Drop for DevDatabase {
    fn drop(&mut self) {
        if let Some(cluster) = self.cluster.take() {
            cluster.stop();
        }
    }
}

/// Whether a server answers at `url` and lets us in.
async fn answers(url: &str) -> anyhow::Result<()> {
    let connected = tokio::time::timeout(Duration::from_secs(3), sqlx::PgConnection::connect(url))
        .await
        .context("timed out")??;
    connected.close().await?;
    Ok(())
}

/// `$XDG_DATA_HOME/mostrador/pg`, or `$HOME/.local/share/mostrador/pg`.
fn default_data_dir() -> anyhow::Result<PathBuf> {
    Ok(data_home()?.join("pg"))
}

/// This user's folder of `dev`'s data: `$XDG_DATA_HOME/mostrador`, or
/// `$HOME/.local/share/mostrador`.
pub(crate) fn data_home() -> anyhow::Result<PathBuf> {
    let data_home = std::env::var_os("XDG_DATA_HOME")
        .filter(|dir| !dir.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|dir| !dir.is_empty())
                .map(|home| PathBuf::from(home).join(".local/share"))
        })
        .context("neither XDG_DATA_HOME nor HOME is set: pass --data-dir or --database-url")?;
    Ok(data_home.join("mostrador"))
}

/// A PostgreSQL cluster run with its own binaries.
#[derive(Debug)]
struct Cluster {
    pg_ctl: PathBuf,
    data_dir: PathBuf,
    port: u16,
    /// This process started it (it was not already running).
    stop_on_exit: bool,
}

impl Cluster {
    fn start(data_dir: &Path) -> anyhow::Result<Self> {
        let bin = binaries().context(
            "no server answers at the default address and no PostgreSQL binaries (initdb, \
             pg_ctl) were found to start a private one: install PostgreSQL (Debian: \
             `apt install postgresql`; macOS: `brew install postgresql@17`), or pass \
             --database-url",
        )?;
        let pg_ctl = bin.join("pg_ctl");
        if !data_dir.join("PG_VERSION").exists() {
            std::fs::create_dir_all(data_dir)
                .with_context(|| format!("failed to create {}", data_dir.display()))?;
            tracing::info!(data_dir = %data_dir.display(), "creating a private cluster");
            run(Command::new(bin.join("initdb"))
                .arg("--pgdata")
                .arg(data_dir)
                .args([
                    "--username",
                    SUPERUSER,
                    "--auth",
                    "trust",
                    "--encoding",
                    "UTF8",
                ]))
            .context("initdb failed")?;
        }
        if let Some(port) = running_port(&pg_ctl, data_dir) {
            return Ok(Self {
                pg_ctl,
                data_dir: data_dir.to_owned(),
                port,
                stop_on_exit: false,
            });
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        // Unix socket paths are short (107 bytes): a long data folder's socket goes to /tmp.
        let socket_dir = if data_dir.as_os_str().len() < 80 {
            data_dir.to_owned()
        } else {
            std::env::temp_dir()
        };
        let options = format!(
            "-c listen_addresses=127.0.0.1 -p {port} -k {}",
            socket_dir.display()
        );
        run(Command::new(&pg_ctl)
            .arg("--pgdata")
            .arg(data_dir)
            .arg("--log")
            .arg(data_dir.join("server.log"))
            .args(["--wait", "--timeout", "60", "--options", &options, "start"]))
        .with_context(|| {
            format!(
                "the private cluster did not start (its log: {})",
                data_dir.join("server.log").display()
            )
        })?;
        Ok(Self {
            pg_ctl,
            data_dir: data_dir.to_owned(),
            port,
            stop_on_exit: true,
        })
    }

    fn stop(&self) {
        if !self.stop_on_exit {
            return;
        }
        let stopped = run(Command::new(&self.pg_ctl)
            .arg("--pgdata")
            .arg(&self.data_dir)
            .args(["--mode", "fast", "--wait", "stop"]));
        match stopped {
            Ok(()) => {
                tracing::info!(data_dir = %self.data_dir.display(), "private cluster stopped")
            }
            Err(err) => {
                tracing::warn!(data_dir = %self.data_dir.display(), error = %err, "stopping the private cluster failed");
            }
        }
    }
}

/// The port of the cluster already running on `data_dir` (another `dev`, or one killed before
/// it could stop it).
fn running_port(pg_ctl: &Path, data_dir: &Path) -> Option<u16> {
    let status = Command::new(pg_ctl)
        .arg("--pgdata")
        .arg(data_dir)
        .arg("status")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .ok()?;
    if !status.success() {
        return None;
    }
    // postmaster.pid: pid, data folder, start time, port, ...
    let pid_file = std::fs::read_to_string(data_dir.join("postmaster.pid")).ok()?;
    pid_file.lines().nth(3)?.trim().parse().ok()
}

/// Runs a PostgreSQL command in a process group of its own, so that a Ctrl-C meant for `dev` does
/// not reach the server before `dev` has drained.
fn run(command: &mut Command) -> anyhow::Result<()> {
    use std::os::unix::process::CommandExt;
    let output = command
        .process_group(0)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("failed to run {:?}", command.get_program()))?;
    if !output.status.success() {
        bail!(
            "{:?} exited with {}: {}",
            command.get_program(),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(())
}

/// The folder of PostgreSQL's own programs (`initdb`, `pg_ctl`, `pg_basebackup`).
pub fn binaries() -> Option<PathBuf> {
    binaries_in(
        std::env::var_os("PATH"),
        "pg_config",
        Path::new("/usr/lib/postgresql"),
    )
}

/// The folder of `initdb` and `pg_ctl`: on `path`, or `pg_config --bindir`'s, or the newest of
/// `debian_root/<major>/bin`.
fn binaries_in(
    path: Option<std::ffi::OsString>,
    pg_config: &str,
    debian_root: &Path,
) -> Option<PathBuf> {
    let has_both = |dir: &Path| dir.join("initdb").is_file() && dir.join("pg_ctl").is_file();
    let on_path = path
        .into_iter()
        .flat_map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .find(|dir| has_both(dir));
    if on_path.is_some() {
        return on_path;
    }
    let from_pg_config = Command::new(pg_config)
        .arg("--bindir")
        .output()
        .ok()
        .filter(|output| output.status.success())
        .map(|output| PathBuf::from(String::from_utf8_lossy(&output.stdout).trim()))
        .filter(|dir| has_both(dir));
    if from_pg_config.is_some() {
        return from_pg_config;
    }
    // Debian keeps them out of the PATH, one folder per major version: the newest.
    let mut debian: Vec<(u32, PathBuf)> = std::fs::read_dir(debian_root)
        .ok()?
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let version = entry.file_name().to_str()?.parse().ok()?;
            Some((version, entry.path().join("bin")))
        })
        .filter(|(_, dir)| has_both(dir))
        .collect();
    debian.sort();
    debian.pop().map(|(_, dir)| dir)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::binaries_in;

    fn with_binaries(dir: &Path) {
        std::fs::create_dir_all(dir).expect("a folder");
        for name in ["initdb", "pg_ctl"] {
            std::fs::write(dir.join(name), "").expect("a file");
        }
    }

    #[test]
    fn postgres_binaries_are_found_on_the_path_or_in_debians_newest_folder() {
        let root = std::env::temp_dir().join(format!("mostrador-bin-{}", std::process::id()));
        let no_pg_config = "mostrador-no-such-pg-config";
        assert_eq!(
            binaries_in(None, no_pg_config, &root.join("none")),
            None,
            "none anywhere"
        );
        with_binaries(&root.join("debian/13/bin"));
        with_binaries(&root.join("debian/15/bin"));
        assert_eq!(
            binaries_in(None, no_pg_config, &root.join("debian")),
            Some(root.join("debian/15/bin")),
            "Debian's newest"
        );
        with_binaries(&root.join("local/bin"));
        let path = std::env::join_paths([root.join("empty"), root.join("local/bin")]).ok();
        assert_eq!(
            binaries_in(path, no_pg_config, &root.join("debian")),
            Some(root.join("local/bin")),
            "the PATH first"
        );
        let _ = std::fs::remove_dir_all(&root);
    }
}
