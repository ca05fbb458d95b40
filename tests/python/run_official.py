"""Start a fresh official server (`langgraph dev`) on the graphs, run compare.py
against it, and stop it.

    python run_official.py --out official.json [--port 2130] [--langgraph .venv/bin/langgraph]

The graphs and langgraph.json are copied into a temporary directory first, so
the server's in-memory state file (.langgraph_api/) never lands in the repo
and every run starts from an empty server. The server runs in its own process
group, which is killed at the end (also on error or Ctrl-C).
"""

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerExited(RuntimeError):
    pass


def wait_ok(url: str, proc: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise ServerExited(f"server exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url + "/ok", timeout=2) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"server not ready after {timeout}s")


def serve(command: list[str], cwd: Path, log: Path, port: int, env: dict) -> subprocess.Popen:
    """Starts a server in a process group of its own, its output to `log`, and waits for its
    `/ok` on `port`."""
    with open(log, "w") as out:
        proc = subprocess.Popen(command, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    wait_ok(f"http://127.0.0.1:{port}", proc, 120)
    return proc


def stop(proc: subprocess.Popen) -> None:
    """Ends the server's process group (what it started too)."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    except ProcessLookupError:
        pass


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--port", type=int, default=0, help="default: a free port")
    parser.add_argument("--langgraph", default=str(Path(sys.executable).parent / "langgraph"))
    parser.add_argument("--log", default=None, help="server log file (default: in the temp dir, deleted)")
    args = parser.parse_args()
    port = args.port or free_port()
    url = f"http://127.0.0.1:{port}"

    with tempfile.TemporaryDirectory(prefix="lg-official-") as tmp:
        shutil.copytree(HERE / "graphs", Path(tmp) / "graphs", ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copy(HERE / "langgraph.json", tmp)
        log_path = Path(args.log) if args.log else Path(tmp) / "server.log"
        env = dict(os.environ, LANGSMITH_TRACING="false", LANGCHAIN_TRACING_V2="false", NO_COLOR="1")
        log_path.write_text("")
        proc = None
        try:
            # `langgraph dev` has died while starting, before writing a line (SIGSEGV, once in
            # many CI runs): one that exits before it answers is started again, twice at most.
            for attempt in range(3):
                with open(log_path, "a") as log:
                    proc = subprocess.Popen(
                        [args.langgraph, "dev", "--no-browser", "--no-reload", "--port", str(port), "--config", "langgraph.json"],
                        cwd=tmp,
                        env=env,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
                try:
                    wait_ok(url, proc, timeout=90)
                    break
                except ServerExited as exited:
                    if attempt == 2:
                        raise
                    stop(proc)
                    shutil.rmtree(Path(tmp) / ".langgraph_api", ignore_errors=True)
                    print(f"official {exited} before it answered: starting it again", file=sys.stderr)
            print(f"official server up at {url} (pid {proc.pid})", file=sys.stderr)
            return subprocess.call([sys.executable, str(HERE / "compare.py"), "--url", url, "--out", args.out])
        except Exception:
            sys.stderr.write(log_path.read_text()[-4000:])
            raise
        finally:
            if proc is not None:
                stop(proc)


if __name__ == "__main__":
    sys.exit(main())
