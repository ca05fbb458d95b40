//! The Dockerfile's text for a few shapes of `langgraph.json`, read against folders described in
//! memory (a path to what it holds).

use std::path::Path;

use serde_json::{Value, json};

use super::{Contents, Project};

const PROJECT: &str = "/home/ana/support";

/// The Dockerfile of `config` in `PROJECT`, whose folders hold what `folders` says.
fn dockerfile(config: &Value, folders: &[(&str, Contents)], base_image: Option<&str>) -> String {
    project(config, folders)
        .expect("the project is valid")
        .dockerfile(base_image)
}

fn project(config: &Value, folders: &[(&str, Contents)]) -> anyhow::Result<Project> {
    let contents = |dir: &Path| {
        folders
            .iter()
            .find(|(path, _)| Path::new(path) == dir)
            .map(|(_, contents)| *contents)
            .ok_or_else(|| anyhow::anyhow!("{} is not a folder", dir.display()))
    };
    Project::read(config, Path::new(PROJECT), "langgraph.json", contents)
}

const NOTHING: Contents = Contents {
    package: false,
    requirements: false,
};
const REQUIREMENTS: Contents = Contents {
    package: false,
    requirements: true,
};
const PACKAGE: Contents = Contents {
    package: true,
    requirements: true,
};

/// The Dockerfile's lines that are instructions (no comments, no blank lines).
fn instructions(text: &str) -> Vec<&str> {
    text.lines()
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .collect()
}

#[test]
fn a_project_with_requirements_installs_them_before_copying_the_code() {
    let config = json!({"dependencies": ["."], "graphs": {"agent": "./agent.py:graph"}});
    let text = dockerfile(&config, &[(PROJECT, REQUIREMENTS)], None);
    let lines = instructions(&text);
    let copy_requirements = lines
        .iter()
        .position(|line| *line == "COPY requirements.txt /app/requirements.txt");
    let install = lines.iter().position(|line| {
        *line
            == r#"RUN ["python3", "-m", "pip", "install", "langgraph>=1.2,<2", "-r", "/app/requirements.txt"]"#
    });
    let copy_project = lines.iter().position(|line| *line == "COPY . /app");
    assert!(
        copy_requirements < install && install < copy_project && copy_requirements.is_some(),
        "{text}"
    );
    // Nothing is a package: no second pip run.
    assert_eq!(text.matches("pip\", \"install").count(), 1, "{text}");
}

#[test]
fn the_image_runs_a_worker_on_the_copied_langgraph_json_as_the_charts_user() {
    let config = json!({"dependencies": ["."], "graphs": {"agent": "./agent.py:graph"}});
    let text = dockerfile(&config, &[(PROJECT, NOTHING)], None);
    let lines = instructions(&text);
    assert_eq!(
        lines[..3],
        [
            "ARG MOSTRADOR_IMAGE=ghcr.io/mostrador/mostrador:0.1.0",
            "FROM ${MOSTRADOR_IMAGE} AS mostrador",
            "FROM python:3.11-slim-bookworm",
        ],
        "{text}"
    );
    assert_eq!(
        lines[lines.len() - 8..],
        [
            "COPY --from=mostrador /usr/local/bin/mostrador /usr/local/bin/mostrador",
            "ENV MOSTRADOR_PYTHON=python3 \\",
            "    MOSTRADOR_LANGGRAPH_CONFIG=/app/langgraph.json",
            "WORKDIR /app",
            "USER 10001:10001",
            "EXPOSE 9091 8123",
            r#"ENTRYPOINT ["/usr/local/bin/mostrador"]"#,
            r#"CMD ["worker"]"#,
        ],
        "{text}"
    );
    assert!(!text.contains("# syntax="), "no named context: {text}");
}

#[test]
fn pip_requirements_are_json_quoted_so_no_shell_reads_them() {
    let config = json!({
        "dependencies": ["langchain-openai>=0.3", "langchain[anthropic]", "pkg @ git+https://x/y.git"],
        "graphs": {"agent": "my_package.agent:graph"}
    });
    let text = dockerfile(&config, &[], None);
    assert!(
        text.contains(
            r#"RUN ["python3", "-m", "pip", "install", "langgraph>=1.2,<2", "langchain-openai>=0.3", "langchain[anthropic]", "pkg @ git+https://x/y.git"]"#
        ),
        "{text}"
    );
}

#[test]
fn local_packages_are_installed_editable_after_the_copy_with_langgraph_kept_in_range() {
    let config = json!({
        "dependencies": [".", "./libs/tools"],
        "graphs": {"agent": "./src/agent/graph.py:graph"}
    });
    let tools = format!("{PROJECT}/libs/tools");
    let text = dockerfile(&config, &[(PROJECT, PACKAGE), (&tools, REQUIREMENTS)], None);
    let lines = instructions(&text);
    // A package's requirements.txt is its own business (pyproject.toml or setup.py install it);
    // a plain folder's is installed.
    assert!(
        lines.contains(&"COPY libs/tools/requirements.txt /app/libs/tools/requirements.txt"),
        "{text}"
    );
    assert!(!text.contains("COPY requirements.txt"), "{text}");
    let copy_project = lines.iter().position(|line| *line == "COPY . /app");
    let packages = lines.iter().position(|line| {
        *line == r#"RUN ["python3", "-m", "pip", "install", "langgraph>=1.2,<2", "-e", "/app"]"#
    });
    assert!(copy_project.is_some() && copy_project < packages, "{text}");
}

#[test]
fn python_version_picks_the_base_image_and_a_base_image_replaces_it() {
    let config = json!({"python_version": "3.12", "graphs": {"a": "./a.py:g"}});
    let text = dockerfile(&config, &[], None);
    assert!(
        text.contains("\nFROM python:3.12-slim-bookworm\n"),
        "{text}"
    );
    let text = dockerfile(&config, &[], Some("registry.example.com/python:3.12-gpu"));
    assert!(
        text.contains("\nFROM registry.example.com/python:3.12-gpu\n"),
        "{text}"
    );
    assert!(!text.contains("slim-bookworm"), "{text}");
}

#[test]
fn python_version_must_be_major_minor_of_a_python_langgraph_supports() {
    for version in [
        json!("3.9"),
        json!("3.12.1"),
        json!("3"),
        json!(3.12),
        json!("three"),
    ] {
        let config = json!({"python_version": version, "graphs": {"a": "./a.py:g"}});
        assert!(project(&config, &[]).is_err(), "{version} accepted");
    }
    let config = json!({"python_version": "3.13", "graphs": {"a": "./a.py:g"}});
    assert!(project(&config, &[]).is_ok());
}

#[test]
fn dockerfile_lines_follow_the_base_image_before_any_install() {
    let config = json!({
        "dockerfile_lines": ["RUN apt-get update && apt-get install -y --no-install-recommends gcc", "ENV A=1"],
        "dependencies": ["psycopg[c]"],
        "graphs": {"a": "./a.py:g"}
    });
    let text = dockerfile(&config, &[], None);
    let lines = instructions(&text);
    let from = lines
        .iter()
        .position(|line| *line == "FROM python:3.11-slim-bookworm")
        .expect("the base image");
    assert_eq!(
        lines[from + 1..from + 3],
        [
            "RUN apt-get update && apt-get install -y --no-install-recommends gcc",
            "ENV A=1"
        ],
        "{text}"
    );
}

#[test]
fn a_dependency_outside_the_project_comes_from_a_named_build_context_in_the_same_layout() {
    let config = json!({
        "dependencies": [".", "../shared/"],
        "graphs": {"agent": "./agent.py:graph", "other": "../shared/other.py:graph"}
    });
    let text = dockerfile(
        &config,
        &[(PROJECT, NOTHING), ("/home/ana/shared", PACKAGE)],
        None,
    );
    assert!(
        text.starts_with("# syntax=docker/dockerfile:1.4\n"),
        "{text}"
    );
    assert!(
        text.contains("#   docker build --build-context dep-shared=../shared -t my-graphs .\n"),
        "{text}"
    );
    let lines = instructions(&text);
    // /home/ana is /app: "../shared" from /app/support is still /app/shared.
    assert!(
        lines.contains(&"COPY --from=dep-shared . /app/shared"),
        "{text}"
    );
    assert!(lines.contains(&"COPY . /app/support"), "{text}");
    assert!(
        lines.contains(
            &r#"RUN ["python3", "-m", "pip", "install", "langgraph>=1.2,<2", "-e", "/app/shared"]"#
        ),
        "{text}"
    );
    assert!(lines.contains(&"    MOSTRADOR_LANGGRAPH_CONFIG=/app/support/langgraph.json"));
    assert!(lines.contains(&"WORKDIR /app/support"), "{text}");
}

#[test]
fn a_graph_outside_every_copied_folder_is_refused() {
    let config = json!({"dependencies": ["."], "graphs": {"a": "../elsewhere/a.py:g"}});
    let err = project(&config, &[(PROJECT, NOTHING)]).expect_err("refused");
    assert!(format!("{err:#}").contains("add its folder"), "{err:#}");
}

#[test]
fn an_env_file_exists_in_the_image_even_when_kept_out_of_it() {
    let config =
        json!({"dependencies": ["."], "graphs": {"a": "./a.py:g"}, "env": "./config/.env"});
    let text = dockerfile(&config, &[(PROJECT, NOTHING)], None);
    assert!(
        instructions(&text).contains(&"RUN mkdir -p /app/config && touch /app/config/.env"),
        "{text}"
    );
    let config = json!({"graphs": {"a": "./a.py:g"}, "env": {"A": "1"}});
    assert!(!dockerfile(&config, &[], None).contains("touch"));
}

#[test]
fn paths_a_dockerfile_would_read_otherwise_and_missing_folders_are_refused() {
    let spaced = format!("{PROJECT}/my libs");
    let config = json!({"dependencies": ["./my libs"], "graphs": {"a": "./a.py:g"}});
    assert!(project(&config, &[(&spaced, NOTHING)]).is_err());
    let config = json!({"dependencies": ["./$HOME"], "graphs": {"a": "./a.py:g"}});
    assert!(project(&config, &[(&format!("{PROJECT}/$HOME"), NOTHING)]).is_err());
    let config = json!({"dependencies": ["/opt/libs"], "graphs": {"a": "./a.py:g"}});
    assert!(project(&config, &[("/opt/libs", NOTHING)]).is_err());
    let config = json!({"dependencies": ["./missing"], "graphs": {"a": "./a.py:g"}});
    assert!(project(&config, &[]).is_err());
    let config = json!({"dependencies": "langchain", "graphs": {"a": "./a.py:g"}});
    assert!(project(&config, &[]).is_err());
}

#[test]
fn keys_that_change_nothing_in_the_image_are_named() {
    let config = json!({
        "$schema": "https://example.com/schema.json",
        "dependencies": ["."],
        "graphs": {"a": "./a.py:g"},
        "auth": {"path": "./auth.py:auth"},
        "http": {"app": "./app.py:app"},
        "python_version": "3.12"
    });
    assert_eq!(super::ignored_keys(&config), ["auth", "http"]);
}

#[test]
fn a_project_with_its_own_routes_gets_starlette() {
    let config = json!({"dependencies": ["."], "graphs": {"agent": "./agent.py:graph"},
                        "http": {"app": "./app.py:app"}, "auth": {"path": "./auth.py:auth"}});
    let text = dockerfile(&config, &[(PROJECT, NOTHING)], None);
    assert!(
        instructions(&text).contains(
            &r#"RUN ["python3", "-m", "pip", "install", "langgraph>=1.2,<2", "starlette"]"#
        ),
        "{text}"
    );
}

mod node {
    //! The Dockerfile of JavaScript graphs.

    use serde_json::json;

    use super::instructions;
    use crate::dockerfile::node::{Installer, NodeProject};

    fn dockerfile(config: &serde_json::Value, files: &[&str]) -> anyhow::Result<String> {
        let has = |file: &str| files.contains(&file);
        Ok(NodeProject::read(config, "langgraph.json", has)?.dockerfile(None))
    }

    #[test]
    fn a_typescript_project_installs_its_locked_packages_then_copies_its_code() {
        let config = json!({"node_version": "22", "dependencies": ["."],
            "graphs": {"agent": "./src/agent.ts:graph"}});
        let text = dockerfile(&config, &["package.json", "package-lock.json"]).expect("written");
        let lines = instructions(&text);
        assert_eq!(
            lines[0],
            format!(
                "ARG MOSTRADOR_IMAGE={}",
                crate::dockerfile::MOSTRADOR_IMAGE_DEFAULT
            )
        );
        assert_eq!(
            lines[1..],
            [
                "FROM ${MOSTRADOR_IMAGE} AS mostrador",
                "FROM node:22-bookworm-slim",
                "WORKDIR /app",
                "COPY package.json package-lock.json /app/",
                r#"RUN ["npm", "ci", "--no-audit", "--no-fund"]"#,
                "COPY . /app",
                "COPY --from=mostrador /usr/local/bin/mostrador /usr/local/bin/mostrador",
                "ENV MOSTRADOR_NODE=node \\",
                "    MOSTRADOR_LANGGRAPH_CONFIG=/app/langgraph.json",
                "USER 10001:10001",
                "EXPOSE 9091 8123",
                r#"ENTRYPOINT ["/usr/local/bin/mostrador"]"#,
                r#"CMD ["worker"]"#,
            ]
        );
    }

    #[test]
    fn the_lock_file_names_the_package_manager() {
        let of = |files: &[&str]| Installer::of(|file| files.contains(&file));
        assert_eq!(of(&["package.json"]), Installer::Npm { locked: false });
        assert_eq!(of(&["package-lock.json"]), Installer::Npm { locked: true });
        assert_eq!(of(&["yarn.lock"]), Installer::Yarn);
        assert_eq!(
            of(&["pnpm-lock.yaml", "package-lock.json"]),
            Installer::Pnpm
        );
        let config = json!({"graphs": {"agent": "./src/agent.ts:graph"}});
        let text = dockerfile(&config, &["package.json", "yarn.lock"]).expect("written");
        assert!(text.contains("FROM node:20-bookworm-slim"), "{text}");
        assert!(text.contains("COPY package.json yarn.lock /app/"), "{text}");
        assert!(text.contains("yarn install --frozen-lockfile"), "{text}");
    }

    #[test]
    fn what_the_image_cannot_honour_is_refused_by_name() {
        let graphs = json!({"agent": "./src/agent.ts:graph"});
        for (config, files, named) in [
            (
                json!({"graphs": graphs, "node_version": "18"}),
                &["package.json"][..],
                "node_version",
            ),
            (
                json!({"graphs": graphs, "node_version": "lts"}),
                &["package.json"][..],
                "node_version",
            ),
            (
                json!({"graphs": graphs, "dependencies": ["../shared"]}),
                &["package.json"][..],
                "../shared",
            ),
            (json!({"graphs": graphs}), &[][..], "package.json"),
        ] {
            let message = format!("{:#}", dockerfile(&config, files).expect_err("refused"));
            assert!(message.contains(named), "{named}: {message}");
        }
    }
}
