//! `mostrador dockerfile`: the Dockerfile of a worker image for the Python graphs of a
//! `langgraph.json` (its JavaScript graphs: [`node`]). A Python base image, `langgraph` and the project's `dependencies` installed
//! with pip, the project copied with its layout (the runner resolves the config's relative paths
//! in the image as on disk), and the binary of the mostrador image, run as `mostrador worker`.
//!
//! It reads what the official `langgraph dockerfile` reads for a Python project: `dependencies`
//! (local folders, `.` being the project, and pip requirements), `python_version` and
//! `dockerfile_lines`. Every requirement it writes is JSON-quoted in an exec-form `RUN`, and
//! every path passes a strict character check, so no name in a project changes what an
//! instruction means.

use std::fmt::Write as _;
use std::path::{Component, Path, PathBuf};

use anyhow::Context;
use clap::Args;
use serde_json::Value;

/// The base image's Python when `langgraph.json` names none (the official CLI's default).
const PYTHON_VERSION_DEFAULT: &str = "3.11";

/// The oldest Python `langgraph` supports.
const PYTHON_VERSION_MIN: (u32, u32) = (3, 10);

/// The `langgraph` the runner is written for (drain needs `RunControl`; `tests/python` runs 1.2).
/// Every pip run names it, so that no dependency moves it out of that range unnoticed.
const LANGGRAPH_REQUIREMENT: &str = "langgraph>=1.2,<2";

/// The mostrador image whose binary is copied: this release, the chart's default image.
const MOSTRADOR_IMAGE_DEFAULT: &str =
    concat!("ghcr.io/mostrador/mostrador:", env!("CARGO_PKG_VERSION"));

/// Where the project is in the image.
const APP_DIR: &str = "/app";

/// The keys of `langgraph.json` this command reads, or whose choice (pip or uv, keeping pip in the
/// image) makes no difference to the graphs.
const KEYS_READ: &[&str] = &[
    "dependencies",
    "graphs",
    "env",
    "python_version",
    "dockerfile_lines",
    "pip_installer",
    "keep_pkg_tools",
];

#[derive(Debug, Args)]
pub(crate) struct DockerfileArgs {
    /// The project's `langgraph.json`; its folder is the build context.
    #[arg(long, default_value = "langgraph.json")]
    config: PathBuf,

    /// The image to build on, with Python (Node.js, for JavaScript graphs) and glibc 2.36 or later
    /// (Debian 12 and later) for the binary [default: python:<python_version>-slim-bookworm,
    /// python_version from langgraph.json or 3.11; node:<node_version>-bookworm-slim, 20].
    #[arg(long)]
    base_image: Option<String>,

    /// Write the Dockerfile to this file instead of stdout.
    #[arg(short, long)]
    output: Option<PathBuf>,
}

/// Writes the Dockerfile of `args.config`'s project to stdout or `args.output`.
///
/// # Errors
///
/// The config cannot be read or is invalid, a local dependency is not a folder, or a path could
/// not be written safely in a Dockerfile.
pub(crate) fn run(args: &DockerfileArgs) -> anyhow::Result<()> {
    let config_path = &args.config;
    let text = std::fs::read_to_string(config_path)
        .with_context(|| format!("failed to read {}", config_path.display()))?;
    // An image whose project the runtime would refuse is refused now, for the same reasons.
    let served = crate::langgraph::project(&text)
        .with_context(|| format!("{} cannot be served", config_path.display()))?;
    let config: Value = serde_json::from_str(&text)?;
    let path = std::fs::canonicalize(config_path)
        .with_context(|| format!("failed to resolve {}", config_path.display()))?;
    let (Some(project_dir), Some(config_file)) = (path.parent(), path.file_name()) else {
        anyhow::bail!("{} is not a file in a folder", path.display());
    };
    let config_file = config_file.to_string_lossy();
    let dockerfile = if served.javascript.is_empty() {
        let project = Project::read(&config, project_dir, &config_file, folder_contents)
            .with_context(|| format!("invalid {}", config_path.display()))?;
        let ignored = ignored_keys(&config);
        if !ignored.is_empty() {
            tracing::warn!(keys = ?ignored, "these keys of langgraph.json change nothing in the image");
        }
        project.dockerfile(args.base_image.as_deref())
    } else {
        anyhow::ensure!(
            served.javascript.len() == served.graphs.len(),
            "{} names Python and JavaScript graphs: an image of one language is written for a \
             project of one language; give each language a langgraph.json of its own (a worker \
             per image), or build an image with both interpreters yourself",
            config_path.display()
        );
        let has = |file: &str| project_dir.join(file).is_file();
        node::NodeProject::read(&config, &config_file, has)
            .with_context(|| format!("invalid {}", config_path.display()))?
            .dockerfile(args.base_image.as_deref())
    };
    match &args.output {
        Some(output) => std::fs::write(output, dockerfile)
            .with_context(|| format!("failed to write {}", output.display()))?,
        None => print!("{dockerfile}"),
    }
    Ok(())
}

/// What a local dependency's folder holds that pip installs.
#[derive(Debug, Clone, Copy)]
struct Contents {
    /// A `pyproject.toml` or `setup.py`: a package, installed editable (the official CLI's rule:
    /// then its `requirements.txt` is not read).
    package: bool,
    /// A `requirements.txt`.
    requirements: bool,
}

/// A local dependency, where it is in the image and how it gets there.
#[derive(Debug)]
struct Folder {
    /// On disk, absolute.
    dir: PathBuf,
    in_image: String,
    /// The named build context it is copied from, if it is outside the project.
    context: Option<BuildContext>,
    /// Its path from the project folder (the build context), when it is inside it.
    in_project: String,
    contents: Contents,
}

/// A folder outside the project, given to `docker build` as `--build-context name=path`.
#[derive(Debug, Clone)]
struct BuildContext {
    name: String,
    /// As `langgraph.json` writes it: relative to the project folder.
    path: String,
}

/// A `langgraph.json`'s project, as the image needs it.
#[derive(Debug)]
struct Project {
    python_version: String,
    dockerfile_lines: Vec<String>,
    requirements: Vec<String>,
    folders: Vec<Folder>,
    /// Where the project folder is in the image (`/app`, or below it when a dependency is
    /// outside the project and the common parent is copied to `/app`).
    project_in_image: String,
    config_in_image: String,
    /// The `env` file, where the runner looks for it in the image.
    env_file_in_image: Option<String>,
}

impl Project {
    /// Reads the project of the `langgraph.json` `config`, which is `config_file` in
    /// `project_dir` (absolute); `contents` inspects a local dependency's folder.
    fn read(
        config: &Value,
        project_dir: &Path,
        config_file: &str,
        contents: impl Fn(&Path) -> anyhow::Result<Contents>,
    ) -> anyhow::Result<Self> {
        let python_version = python_version(config)?;
        let dockerfile_lines = strings(config, "dockerfile_lines")?;
        let mut requirements = Vec::new();
        let mut locals = Vec::new();
        for dependency in strings(config, "dependencies")? {
            if dependency.starts_with('.') {
                let dir = normalize(&project_dir.join(&dependency));
                let found = contents(&dir).with_context(|| format!("dependency {dependency:?}"))?;
                locals.push((dependency, dir, found));
            } else if dependency.starts_with('/') {
                anyhow::bail!(
                    "dependency {dependency:?}: an absolute path is not in the build context; \
                     write it relative to the langgraph.json"
                );
            } else {
                requirements.push(dependency);
            }
        }
        // A project's own routes are an ASGI app, which the official image serves with Starlette
        // (its FastAPI, if any, the project names): the api's helper processes import it.
        if config
            .pointer("/http/app")
            .is_some_and(|app| !app.is_null())
            && !requirements.iter().any(|r| r.starts_with("starlette"))
        {
            requirements.push("starlette".to_owned());
        }
        // The folders outside the project come from build contexts of their own, laid out
        // under /app as on disk around the project.
        let mut top = project_dir.to_path_buf();
        for (_, dir, _) in &locals {
            top = common_ancestor(&top, dir);
        }
        let mut names: Vec<String> = Vec::new();
        let mut folders = Vec::new();
        for (dependency, dir, found) in locals {
            let in_image = image_path(&top, &dir)?;
            let folder = match dir.strip_prefix(project_dir) {
                Ok(inside) => Folder {
                    in_project: relative(inside),
                    dir,
                    in_image,
                    context: None,
                    contents: found,
                },
                Err(_) => {
                    let name = context_name(&dir, &names);
                    names.push(name.clone());
                    Folder {
                        dir,
                        in_image,
                        context: Some(BuildContext {
                            name,
                            path: dependency.trim_end_matches('/').to_owned(),
                        }),
                        in_project: String::new(),
                        contents: found,
                    }
                }
            };
            folders.push(folder);
        }
        let project_in_image = image_path(&top, project_dir)?;
        check_safe(config_file)?;
        let config_in_image = format!("{project_in_image}/{config_file}");
        let env_file_in_image = match config.get("env") {
            Some(Value::String(env)) => {
                // As the runner opens it: joined to the config's folder.
                let file = normalize(&Path::new(&project_in_image).join(env));
                let file = file.to_string_lossy().into_owned();
                check_safe(&file)?;
                Some(file)
            }
            _ => None,
        };
        for (graph_id, spec) in config["graphs"].as_object().into_iter().flatten() {
            check_graph_is_copied(spec, project_dir, &folders)
                .with_context(|| format!("graph {graph_id:?}"))?;
        }
        Ok(Self {
            python_version,
            dockerfile_lines,
            requirements,
            folders,
            project_in_image,
            config_in_image,
            env_file_in_image,
        })
    }

    /// The Dockerfile, on `base_image` or the official Python image of `python_version`.
    fn dockerfile(&self, base_image: Option<&str>) -> String {
        let base_image = base_image.map_or_else(
            || format!("python:{}-slim-bookworm", self.python_version),
            str::to_owned,
        );
        let contexts: Vec<&BuildContext> = self
            .folders
            .iter()
            .filter_map(|folder| folder.context.as_ref())
            .collect();
        let mut out = String::new();
        if !contexts.is_empty() {
            // Named build contexts need this frontend or a later one.
            out.push_str("# syntax=docker/dockerfile:1.4\n");
        }
        let build_contexts: String = contexts
            .iter()
            .map(|context| format!("--build-context {}={} ", context.name, context.path))
            .collect();
        write_head(
            &mut out,
            &Head {
                graphs: "Python",
                build: &format!("docker build {build_contexts}-t my-graphs ."),
                keep_out: ".git, .venv, .env and __pycache__",
                base_image: &base_image,
                dockerfile_lines: &self.dockerfile_lines,
            },
        );
        out.push_str(
            "\nENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore\n",
        );
        self.write_requirements(&mut out);
        out.push_str("\n# The project as it is on disk: langgraph.json's relative paths hold.\n");
        for folder in &self.folders {
            if let Some(context) = &folder.context {
                let _ = writeln!(out, "COPY --from={} . {}", context.name, folder.in_image);
            }
        }
        let _ = writeln!(out, "COPY . {}", self.project_in_image);
        let packages: Vec<&Folder> = self
            .folders
            .iter()
            .filter(|folder| folder.contents.package)
            .collect();
        if !packages.is_empty() {
            out.push_str("# The local packages (pyproject.toml or setup.py).\n");
            let mut args = vec![LANGGRAPH_REQUIREMENT.to_owned()];
            for folder in packages {
                args.push("-e".to_owned());
                args.push(folder.in_image.clone());
            }
            out.push_str(&pip_install(&args));
        }
        if let Some(env_file) = &self.env_file_in_image {
            let dir = env_file.rsplit_once('/').map_or("/", |(dir, _)| dir);
            let _ = write!(
                out,
                "\n# The runner reads langgraph.json's env file at start: it must exist. Keep yours\n\
                 # out of the image (.dockerignore) and give its variables to the pods instead.\n\
                 RUN mkdir -p {} && touch {env_file}\n",
                if dir.is_empty() { "/" } else { dir },
            );
        }
        write_tail(
            &mut out,
            &format!(
                "MOSTRADOR_PYTHON=python3 \\\n    MOSTRADOR_LANGGRAPH_CONFIG={}",
                self.config_in_image
            ),
            Some(&self.project_in_image),
            "",
        );
        out
    }

    /// `langgraph` and the requirements, from PyPI and from the folders' `requirements.txt`,
    /// copied alone first so that a change of the code does not reinstall them.
    fn write_requirements(&self, out: &mut String) {
        let files: Vec<&Folder> = self
            .folders
            .iter()
            .filter(|folder| folder.contents.requirements && !folder.contents.package)
            .collect();
        let mut args = vec![LANGGRAPH_REQUIREMENT.to_owned()];
        args.extend(self.requirements.iter().cloned());
        if !files.is_empty() {
            out.push_str(
                "# The requirements alone first: changing the code does not reinstall them.\n",
            );
        }
        for folder in files {
            let file = format!("{}/requirements.txt", folder.in_image);
            match &folder.context {
                Some(context) => {
                    let _ = writeln!(out, "COPY --from={} requirements.txt {file}", context.name);
                }
                None if folder.in_project.is_empty() => {
                    let _ = writeln!(out, "COPY requirements.txt {file}");
                }
                None => {
                    let _ = writeln!(out, "COPY {}/requirements.txt {file}", folder.in_project);
                }
            }
            args.push("-r".to_owned());
            args.push(file);
        }
        out.push_str(&pip_install(&args));
    }
}

/// What the first lines of an image say, for a project of one language.
struct Head<'a> {
    graphs: &'a str,
    /// The command that builds it.
    build: &'a str,
    /// What a `.dockerignore` should keep out of it.
    keep_out: &'a str,
    base_image: &'a str,
    dockerfile_lines: &'a [String],
}

/// How to build the image, the stage the mostrador binary comes from, the base image and the
/// project's `dockerfile_lines`.
fn write_head(out: &mut String, head: &Head<'_>) {
    let _ = write!(
        out,
        "# A mostrador worker image for the {graphs} graphs of this langgraph.json, written by\n\
         # `mostrador dockerfile`. Build it in the folder of langgraph.json:\n\
         #\n\
         #   {build}\n\
         #\n\
         # The mostrador binary comes from MOSTRADOR_IMAGE (--build-arg MOSTRADOR_IMAGE=... for\n\
         # another registry or release). The whole folder is copied: a .dockerignore keeps\n\
         # {keep_out} out. `docker run IMAGE` runs `mostrador worker`,\n\
         # and `docker run IMAGE api` the api, which reads the same langgraph.json.\n\
         \n\
         ARG MOSTRADOR_IMAGE={MOSTRADOR_IMAGE_DEFAULT}\n\
         FROM ${{MOSTRADOR_IMAGE}} AS mostrador\n\
         \n\
         FROM {base_image}\n",
        graphs = head.graphs,
        build = head.build,
        keep_out = head.keep_out,
        base_image = head.base_image,
    );
    if !head.dockerfile_lines.is_empty() {
        out.push_str("# dockerfile_lines of langgraph.json.\n");
        for line in head.dockerfile_lines {
            out.push_str(line);
            out.push('\n');
        }
    }
}

/// The mostrador binary with its settings (`env`, an `ENV` instruction's arguments), run as a
/// worker as the chart's user (in `workdir`, when the image has not set it already);
/// `read_only`, comment lines on what the read-only root filesystem asks of the image.
fn write_tail(out: &mut String, env: &str, workdir: Option<&str>, read_only: &str) {
    let workdir = workdir.map_or_else(String::new, |dir| format!("WORKDIR {dir}\n"));
    let _ = write!(
        out,
        "\nCOPY --from=mostrador /usr/local/bin/mostrador /usr/local/bin/mostrador\n\
         ENV {env}\n\
         {workdir}\
         # The chart runs pods as this user, with a read-only root filesystem.\n\
         {read_only}\
         USER 10001:10001\n\
         EXPOSE 9091 8123\n\
         ENTRYPOINT [\"/usr/local/bin/mostrador\"]\n\
         CMD [\"worker\"]\n"
    );
}

/// An exec-form `RUN` of pip: no shell reads the arguments, and JSON quotes them.
fn pip_install(args: &[String]) -> String {
    let words: Vec<String> = ["python3", "-m", "pip", "install"]
        .iter()
        .map(|word| (*word).to_owned())
        .chain(args.iter().cloned())
        .map(|word| Value::String(word).to_string())
        .collect();
    format!("RUN [{}]\n", words.join(", "))
}

/// `python_version`, checked as the official CLI checks it (`major.minor`).
fn python_version(config: &Value) -> anyhow::Result<String> {
    let Some(version) = config.get("python_version") else {
        return Ok(PYTHON_VERSION_DEFAULT.to_owned());
    };
    let parsed = version.as_str().and_then(|text| {
        let (major, minor) = text.split_once('.')?;
        Some((major.parse::<u32>().ok()?, minor.parse::<u32>().ok()?))
    });
    match parsed {
        Some(parsed) if parsed >= PYTHON_VERSION_MIN => Ok(format!("{}.{}", parsed.0, parsed.1)),
        _ => anyhow::bail!(
            "python_version must be \"major.minor\", {}.{} or later (got {version})",
            PYTHON_VERSION_MIN.0,
            PYTHON_VERSION_MIN.1
        ),
    }
}

/// A list of strings of the config, empty when absent.
fn strings(config: &Value, key: &str) -> anyhow::Result<Vec<String>> {
    let Some(value) = config.get(key) else {
        return Ok(Vec::new());
    };
    value
        .as_array()
        .and_then(|items| {
            items
                .iter()
                .map(|item| item.as_str().map(str::to_owned))
                .collect()
        })
        .with_context(|| format!("{key:?} must be a list of strings"))
}

/// The keys of the config that change nothing in the image (`$schema` and the like aside).
fn ignored_keys(config: &Value) -> Vec<String> {
    config
        .as_object()
        .into_iter()
        .flatten()
        .map(|(key, _)| key)
        .filter(|key| !key.starts_with('$') && !KEYS_READ.contains(&key.as_str()))
        .cloned()
        .collect()
}

/// A graph given by a file must be in a folder the image gets; a module name is imported.
fn check_graph_is_copied(
    spec: &Value,
    project_dir: &Path,
    folders: &[Folder],
) -> anyhow::Result<()> {
    let spec = spec
        .as_str()
        .or_else(|| spec.get("path").and_then(Value::as_str))
        .unwrap_or_default();
    let location = spec.rsplit_once(':').map_or(spec, |(location, _)| location);
    if !(location.contains('/') || location.ends_with(".py")) {
        return Ok(());
    }
    let file = normalize(&project_dir.join(location));
    let copied =
        file.starts_with(project_dir) || folders.iter().any(|folder| file.starts_with(&folder.dir));
    anyhow::ensure!(
        copied,
        "{location} is outside the project and its local dependencies: add its folder to \"dependencies\""
    );
    Ok(())
}

/// Where `path` (under `top`) is in the image, `top` being `/app`.
fn image_path(top: &Path, path: &Path) -> anyhow::Result<String> {
    let inside = path
        .strip_prefix(top)
        .with_context(|| format!("{} is not under {}", path.display(), top.display()))?;
    let inside = relative(inside);
    check_safe(&inside)?;
    Ok(if inside.is_empty() {
        APP_DIR.to_owned()
    } else {
        format!("{APP_DIR}/{inside}")
    })
}

/// A relative path with `/` separators (empty for the folder itself).
fn relative(path: &Path) -> String {
    path.components()
        .map(|component| component.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

/// Refuses what a Dockerfile would read as something else: spaces split arguments, `$` expands
/// variables, quotes and backslashes escape.
fn check_safe(path: &str) -> anyhow::Result<()> {
    let safe = |c: char| c.is_ascii_alphanumeric() || "._-+@/".contains(c);
    anyhow::ensure!(
        path.chars().all(safe),
        "{path:?}: a path in the image may hold only letters, digits and . _ - + @ (rename it)"
    );
    Ok(())
}

/// The path without `.` and `..`, resolved by name (the folders need not exist).
fn normalize(path: &Path) -> PathBuf {
    let mut normal = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                normal.pop();
            }
            other => normal.push(other),
        }
    }
    normal
}

fn common_ancestor(a: &Path, b: &Path) -> PathBuf {
    a.components()
        .zip(b.components())
        .take_while(|(a, b)| a == b)
        .map(|(a, _)| a)
        .collect()
}

/// A build context's name from its folder's, unlike the `taken` ones.
fn context_name(dir: &Path, taken: &[String]) -> String {
    let base: String = dir
        .file_name()
        .map(|name| name.to_string_lossy().to_lowercase())
        .unwrap_or_default()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let base = format!("dep-{}", base.trim_matches('-'));
    let mut name = base.clone();
    let mut n = 2;
    while taken.contains(&name) {
        name = format!("{base}-{n}");
        n += 1;
    }
    name
}

/// What a local dependency's folder holds, read from disk.
fn folder_contents(dir: &Path) -> anyhow::Result<Contents> {
    anyhow::ensure!(dir.is_dir(), "{} is not a folder", dir.display());
    Ok(Contents {
        package: dir.join("pyproject.toml").is_file() || dir.join("setup.py").is_file(),
        requirements: dir.join("requirements.txt").is_file(),
    })
}

mod node;

#[cfg(test)]
mod tests;
