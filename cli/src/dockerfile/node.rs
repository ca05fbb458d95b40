//! The Dockerfile of a worker image for the JavaScript graphs of a `langgraph.json`: the official
//! Node.js image of its `node_version`, the project's packages installed by the package manager
//! its lock file names (as the official JS CLI installs them), the project copied, and the binary
//! of the mostrador image, run as `mostrador worker`.

use anyhow::Context;
use serde_json::Value;
use std::fmt::Write as _;

use super::{Head, check_safe, strings, write_head, write_tail};

/// The base image's Node.js when `langgraph.json` names none (the official JS CLI's default).
const NODE_VERSION_DEFAULT: u32 = 20;

/// The oldest Node.js the runner is written for.
const NODE_VERSION_MIN: u32 = 20;

/// How the project's packages are installed, from its lock file: the lock file's own manager,
/// installing exactly what it locks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Installer {
    Npm { locked: bool },
    Yarn,
    Pnpm,
}

impl Installer {
    /// The installer of the project whose folder holds `has(file)`.
    pub(super) fn of(has: impl Fn(&str) -> bool) -> Self {
        if has("pnpm-lock.yaml") {
            Self::Pnpm
        } else if has("yarn.lock") {
            Self::Yarn
        } else {
            Self::Npm {
                locked: has("package-lock.json"),
            }
        }
    }

    /// The files copied before the install, so that changing the code does not reinstall.
    fn manifests(self) -> &'static [&'static str] {
        match self {
            Self::Npm { locked: true } => &["package.json", "package-lock.json"],
            Self::Npm { locked: false } => &["package.json"],
            Self::Yarn => &["package.json", "yarn.lock"],
            Self::Pnpm => &["package.json", "pnpm-lock.yaml"],
        }
    }

    /// The install, in exec form. Development dependencies are kept: a TypeScript graph is
    /// compiled as it is imported, by the project's `tsx`.
    fn command(self) -> &'static str {
        match self {
            Self::Npm { locked: true } => r#"RUN ["npm", "ci", "--no-audit", "--no-fund"]"#,
            Self::Npm { locked: false } => r#"RUN ["npm", "install", "--no-audit", "--no-fund"]"#,
            Self::Yarn => {
                r#"RUN ["sh", "-c", "corepack enable && yarn install --frozen-lockfile"]"#
            }
            Self::Pnpm => {
                r#"RUN ["sh", "-c", "corepack enable && pnpm install --frozen-lockfile"]"#
            }
        }
    }
}

/// A JavaScript project, as its image needs it.
#[derive(Debug)]
pub(super) struct NodeProject {
    node_version: u32,
    dockerfile_lines: Vec<String>,
    installer: Installer,
    config_file: String,
}

/// Where the project is in the image.
const APP_DIR: &str = "/app";

impl NodeProject {
    /// Reads the project of `config`, the `langgraph.json` named `config_file`; `has(file)` says
    /// whether the project's folder holds `file`.
    pub(super) fn read(
        config: &Value,
        config_file: &str,
        has: impl Fn(&str) -> bool,
    ) -> anyhow::Result<Self> {
        let node_version = node_version(config)?;
        for dependency in strings(config, "dependencies")? {
            // The project's own packages (`package.json`) are what a JavaScript project depends
            // on; a folder beside it would need its own install.
            anyhow::ensure!(
                matches!(dependency.as_str(), "." | "./"),
                "dependency {dependency:?}: an image of JavaScript graphs installs the project's \
                 own package.json (\".\") only; make the folder a workspace package of the project"
            );
        }
        anyhow::ensure!(
            has("package.json"),
            "the project has no package.json: JavaScript graphs import LangGraph.js from its \
             node_modules"
        );
        // A missing env file is no error for the runner: the pods give the variables.
        check_safe(config_file)?;
        Ok(Self {
            node_version,
            dockerfile_lines: strings(config, "dockerfile_lines")?,
            installer: Installer::of(has),
            config_file: config_file.to_owned(),
        })
    }

    /// The Dockerfile, on `base_image` or the official Node.js image of `node_version`.
    pub(super) fn dockerfile(&self, base_image: Option<&str>) -> String {
        let base_image = base_image.map_or_else(
            || format!("node:{}-bookworm-slim", self.node_version),
            str::to_owned,
        );
        let mut out = String::new();
        write_head(
            &mut out,
            &Head {
                graphs: "JavaScript",
                build: "docker build -t my-graphs .",
                keep_out: ".git, node_modules and .env",
                base_image: &base_image,
                dockerfile_lines: &self.dockerfile_lines,
            },
        );
        let _ = write!(
            out,
            "\nWORKDIR {APP_DIR}\n\
             # The packages alone first: changing the code does not reinstall them.\n\
             COPY {manifests} {APP_DIR}/\n\
             {install}\n\
             # The project as it is on disk: langgraph.json's relative paths hold.\n\
             COPY . {APP_DIR}\n",
            manifests = self.installer.manifests().join(" "),
            install = self.installer.command(),
        );
        write_tail(
            &mut out,
            &format!(
                "MOSTRADOR_NODE=node \\\n    MOSTRADOR_LANGGRAPH_CONFIG={APP_DIR}/{}",
                self.config_file
            ),
            None,
            "# TypeScript is compiled into the temporary folder, which the chart mounts.\n",
        );
        out
    }
}

/// `node_version`, checked as the official JS CLI checks it: a major version.
fn node_version(config: &Value) -> anyhow::Result<u32> {
    let Some(version) = config.get("node_version") else {
        return Ok(NODE_VERSION_DEFAULT);
    };
    let parsed = match version {
        Value::String(text) => text.parse::<u32>().ok(),
        Value::Number(number) => number.as_u64().and_then(|n| u32::try_from(n).ok()),
        _ => None,
    };
    parsed
        .filter(|major| *major >= NODE_VERSION_MIN)
        .with_context(|| {
            format!(
                "node_version must be a major version, {NODE_VERSION_MIN} or later (got {version})"
            )
        })
}
