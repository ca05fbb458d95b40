"""Serve this project (graphs written as LangGraph's templates write them) with the official
server (`langgraph dev`) and with mostrador, each from a copy of the project as cloned (no `.env`,
only `.env.example`), both against the same local fake OpenAI model; drive both with compare.py
and check the answers with check.py.

    python run.py --mostrador target/debug/mostrador --database postgres://... --out target/templates
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(1, str(HERE.parent))
import fake_openai  # noqa: E402
from run_official import free_port, stop  # noqa: E402


def wait_for(url: str, proc: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.3)
    raise RuntimeError(f"{url} did not answer in {timeout}s")


def copy_project(into: Path) -> Path:
    """The project as a user clones it: the files, no `.env`."""
    project = into / "project"
    shutil.copytree(HERE, project, ignore=shutil.ignore_patterns(
        "__pycache__", ".langgraph_api", "run.py", "compare.py", "check.py", "fake_openai.py", "run", ".env"))
    assert not (project / ".env").exists()
    return project


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mostrador", required=True, help="the mostrador binary")
    parser.add_argument("--database", required=True, help="an empty database for mostrador")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    python = sys.executable
    model = fake_openai.start()
    env = dict(
        os.environ,
        OPENAI_BASE_URL=f"http://127.0.0.1:{model.server_port}/v1",
        OPENAI_API_KEY="sk-fake",
        LANGSMITH_TRACING="false",
        LANGCHAIN_TRACING_V2="false",
        NO_COLOR="1",
    )
    procs: list[subprocess.Popen] = []
    try:
        with tempfile.TemporaryDirectory(prefix="templates-") as tmp:
            # The official server, in a copy of its own (its state file lands there).
            official_dir = copy_project(Path(tmp) / "official")
            port = free_port()
            with open(out / "official.log", "w") as log:
                official = subprocess.Popen(
                    [str(Path(python).parent / "langgraph"), "dev", "--no-browser", "--no-reload",
                     "--port", str(port), "--config", "langgraph.json"],
                    cwd=official_dir, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            procs.append(official)
            wait_for(f"http://127.0.0.1:{port}/ok", official, 120)
            code = subprocess.call([python, str(HERE / "compare.py"), "--url", f"http://127.0.0.1:{port}",
                                    "--out", str(out / "official.json")], env=env)
            if code:
                return code
            stop(official)

            # mostrador, on its own copy, started from another folder (it needs none).
            ours_dir = copy_project(Path(tmp) / "mostrador")
            port = free_port()
            with open(out / "mostrador.log", "w") as log:
                ours = subprocess.Popen(
                    [args.mostrador, "dev", "--database-url", args.database, "--listen", f"127.0.0.1:{port}",
                     "--config", str(ours_dir / "langgraph.json"), "--python", python],
                    cwd=tmp, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            procs.append(ours)
            # No key: as `langgraph dev`, `mostrador dev` takes the official clients without one
            # from this machine, as its development caller.
            wait_for(f"http://127.0.0.1:{port}/assistants/factory/schemas", ours, 120)
            code = subprocess.call([python, str(HERE / "compare.py"), "--url", f"http://127.0.0.1:{port}",
                                    "--out", str(out / "mostrador.json")], env=env)
            if code:
                return code
        code = subprocess.call([python, str(HERE / "check.py"), str(out / "official.json"), str(out / "mostrador.json")])
        if code:
            print("--- mostrador log (tail) ---")
            print((out / "mostrador.log").read_text()[-4000:])
        return code
    finally:
        for proc in procs:
            stop(proc)
        model.shutdown()


if __name__ == "__main__":
    sys.exit(main())
