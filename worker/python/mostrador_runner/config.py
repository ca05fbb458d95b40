"""A project's `langgraph.json`, read as `langgraph dev` reads it: its folders on the import path
and its environment. Light (no LangGraph import): the api's auth handler processes read it too."""

import json
import os
import sys
from collections.abc import Iterator


def load_config(path: str) -> dict:
    """The project's `langgraph.json`, its folders put where its imports look, as `langgraph dev`
    puts them: its local `dependencies`, then the project's own folder (for module paths such as
    `"my_agent.graph:graph"`). Its `env` (a mapping, or a file) joins the environment; a file
    that is missing is no error (a project as cloned ships `.env.example`), as officially."""
    with open(path) as f:
        config = json.load(f)
    base = os.path.dirname(os.path.abspath(path))
    for dependency in config.get("dependencies", []):
        if dependency.startswith(".") or dependency.startswith("/"):
            folder = os.path.normpath(os.path.join(base, dependency))
            if folder not in sys.path:
                sys.path.insert(0, folder)
    if base not in sys.path:
        sys.path.append(base)
    env = config.get("env")
    if isinstance(env, dict):
        os.environ.update({k: str(v) for k, v in env.items()})
    elif isinstance(env, str):
        env_path = os.path.join(base, env)
        if os.path.isfile(env_path):
            for key, value in _env_file(env_path):
                os.environ.setdefault(key, value)
        else:
            print(f"mostrador runner: no env file {env_path}: the graphs start without it", file=sys.stderr)
    config["_base"] = base
    return config


def _env_file(path: str) -> Iterator[tuple[str, str]]:
    """`KEY=VALUE` lines (`export` and quotes allowed, `#` comments), as dotenv reads them."""
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("export "):
                line = line[len("export ") :].lstrip()
            if not line or line.startswith("#") or "=" not in line:
                continue
            key, value = line.split("=", 1)
            value = value.strip()
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
                value = value[1:-1]
            elif " #" in value:
                value = value.split(" #", 1)[0].rstrip()
            yield key.strip(), value
