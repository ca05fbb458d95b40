"""SIGTERM during a delegation: the run goes on on another worker, and no file is lost.

Worker A runs the example agent until its subagent is inside a slow sandboxed command; then
worker B starts and A gets SIGTERM. A hands the run back past its drain timeout (the command is
killed with it: nothing of the sandbox outlives it), B resumes from the last checkpoint (the
files written before stay, since they never were in it), the delegation runs again there, and
the run ends with the report written. Real `mostrador api` and `mostrador worker` processes.

    python sigterm.py --bin mostrador --python PY --database URL --bwrap BWRAP --out DIR
"""

import argparse
import asyncio
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

from langgraph_sdk import get_client

CONFIG = Path(__file__).resolve().parent.parent / "langgraph.json"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def sql(query: str) -> str:
    return subprocess.run(["psql", "-qAtX", ARGS.database, "-c", query], check=True, capture_output=True, text=True).stdout.strip()


def spawn(name: str, command: str, *args: str) -> subprocess.Popen:
    log = open(Path(ARGS.out) / f"{name}.log", "wb")  # noqa: SIM115 - the process's, closed at exit
    return subprocess.Popen(
        [ARGS.bin, command, "--database-url", ARGS.database, "--config", str(CONFIG), "--python", ARGS.python, *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=log,
    )


def worker(name: str) -> subprocess.Popen:
    return spawn(
        name, "worker", "--name", name, "--graphs", "investigador", "--listen", f"127.0.0.1:{free_port()}",
        "--poll-interval", "200ms", "--sweep-interval", "300ms", "--drain-timeout", "1s", "--grace-period", "10s",
        "--sandbox-bwrap", ARGS.bwrap,
    )  # fmt: skip


def sandboxes() -> list[str]:
    """The sandboxes running now: processes whose command line names the sandbox's shell."""
    found = subprocess.run(["pgrep", "-f", "mostrador-sandbox"], capture_output=True, text=True).stdout.split()
    return [pid for pid in found if pid != str(os.getpid())]


async def until(what: str, probe, timeout: float = 60) -> object:
    deadline = time.monotonic() + timeout
    while not (value := probe()):
        assert time.monotonic() < deadline, f"{what}: not within {timeout:.0f}s"
        await asyncio.sleep(0.1)
    return value


async def main() -> None:
    port = free_port()
    processes = [spawn("api", "api", "--listen", f"127.0.0.1:{port}")]
    try:
        a = worker("a")
        processes.append(a)
        sdk = get_client(url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {ARGS.token}"})
        await until("the api", lambda: subprocess.run(["curl", "-sf", "-o", "/dev/null", f"http://127.0.0.1:{port}/ok"]).returncode == 0)
        thread_id = (await sdk.threads.create())["thread_id"]
        ask = {"messages": [{"role": "user", "content": "Analiza las ventas despacio"}]}
        run = await sdk.runs.create(thread_id, "investigador", input=ask)
        await until("the subagent's command running in the sandbox", sandboxes)
        saved = sql(f"select count(*) from mostrador.thread_files where thread_id = '{thread_id}' and path = '/ventas.csv'")
        assert saved == "1", f"/ventas.csv was written before the delegation: {saved}"

        b = worker("b")
        processes.append(b)
        a.send_signal(signal.SIGTERM)
        assert a.wait(30) == 0, "A exits 0 after handing its run back"
        assert not sandboxes() or await until("A's sandbox gone", lambda: not sandboxes(), 5)

        await sdk.runs.join(thread_id, run["run_id"])
        ended = await sdk.runs.get(thread_id, run["run_id"])
        assert ended["status"] == "success", ended
        attempt, drains = sql(f"select attempt, drain_count from mostrador.runs where run_id = '{run['run_id']}'").split("|")
        assert (int(attempt), int(drains)) == (2, 1), (attempt, drains)
        files = {f["path"] for f in await sdk.http.get(f"/threads/{thread_id}/files")}
        assert files == {"/ventas.csv", "/informe.md"}, files
        report = await sdk.http.get(f"/threads/{thread_id}/files/content", params={"path": "/informe.md"})
        assert "Total: 300.00 EUR" in report["content"], report
        values = (await sdk.threads.get_state(thread_id))["values"]
        assert "total=300.00" in values["messages"][-1]["content"], values["messages"][-1]
        assert not sandboxes(), "a sandbox outlived its worker"
        print("deep-agent: SIGTERM during a delegation: another worker finished the run, no file lost, no sandbox left", flush=True)
    finally:
        for process in processes:
            if process.poll() is None:
                process.terminate()
                process.wait(15)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    for flag in ("--bin", "--python", "--database", "--bwrap", "--out", "--token"):
        parser.add_argument(flag, required=True)
    ARGS = parser.parse_args()
    asyncio.run(main())
