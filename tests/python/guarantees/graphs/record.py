"""What the guarantees' graphs share: every node records its starts and finishes (with the
runner process that ran it and that runner's worker), and a node can wait for a gate the driver
opens, so that the driver kills, drains or cancels while the node is in flight without sleeping.

The driver passes the folder of the records and gates in `GUARANTEES_DIR`: the worker's
environment, which its runner processes inherit.
"""

import json
import os
import time
from collections.abc import Callable

from langchain_core.runnables import RunnableConfig

DIR = os.environ["GUARANTEES_DIR"]
# Long enough for any test; a gate never opened fails the node rather than hanging a runner.
GATE_TIMEOUT_SECONDS = 120


def thread_of(config: RunnableConfig) -> str:
    return str(config["configurable"]["thread_id"])


def forked() -> bool:
    """Whether this runner was forked from its worker's warm template (`runner.py ...
    --template`), not started by the worker itself."""
    try:
        with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
            return f.read().split(b"\0")[-2:-1] == [b"--template"]
    except OSError:
        return False


def worker_pid() -> int:
    """The worker this runner serves: its parent, or its parent's when it was forked."""
    parent = os.getppid()
    if forked():
        try:
            with open(f"/proc/{parent}/stat") as f:
                return int(f.read().rsplit(")", 1)[1].split()[1])
        except OSError:
            pass
    return parent


def record(config: RunnableConfig, node: str, phase: str) -> None:
    """One line per start or finish; appends of one short line are atomic (`O_APPEND`)."""
    line = json.dumps(
        {
            "thread_id": thread_of(config),
            "node": node,
            "phase": phase,
            "runner": os.getpid(),
            "worker": worker_pid(),
            "forked": forked(),
            "attempt": (config.get("metadata") or {}).get("run_attempt"),
        }
    )
    fd = os.open(os.path.join(DIR, "executions.jsonl"), os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def gate_path(thread_id: str) -> str:
    return os.path.join(DIR, "gates", thread_id)


def wait_for_gate(config: RunnableConfig, opened: Callable[[], bool] = lambda: False) -> None:
    """Returns once the driver opened the thread's gate (or `opened()` holds)."""
    path = gate_path(thread_of(config))
    deadline = time.monotonic() + GATE_TIMEOUT_SECONDS
    while not (os.path.exists(path) or opened()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"the gate {path} was never opened")
        time.sleep(0.01)
