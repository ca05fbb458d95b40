"""mostrador's guarantees for Python graphs, proven with real processes: `mostrador-e2e api` and
`worker` processes, their Python runner processes (LangGraph's own engine), Postgres, and the
official `langgraph_sdk` client. Nothing is mocked; signals are real signals.

    python guarantees.py --bin target/debug/mostrador-e2e --python <venv>/bin/python \
        --out target/python-guarantees [--only NAME ...]

Each test gets a database of its own (created, migrated, dropped), an api, the workers it needs,
and a folder where the graphs' nodes record every start and finish (with the runner process that
ran them and that runner's worker) and wait for gates that the test opens
(`graphs/record.py`). So a test waits for "node s3 started in worker A" by reading that record,
polling every few milliseconds against a deadline, and never sleeps to synchronize.

Each test is named after the guarantee it proves; its docstring says how. Exit status 1 if any
failed; `<out>/results.json` keeps what was measured.
"""

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import traceback
import uuid
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from langgraph_sdk import get_sync_client
from langgraph_sdk.errors import NotFoundError

HERE = Path(__file__).resolve().parent
CONFIG = HERE / "langgraph.json"
JWT_SECRET = "python-guarantees-secret"
# Generous deadlines: a run that makes progress finishes far sooner; one that does not fails the
# test instead of hanging it.
DEADLINE = 60.0
POLL = 0.02
TERMINAL = {"success", "error", "interrupted", "timeout"}


class Failed(AssertionError):
    pass


def check(condition: Any, message: str) -> None:
    if not condition:
        raise Failed(message)


def until(what: str, probe: Callable[[], Any], timeout: float = DEADLINE) -> Any:
    """`probe()`'s first truthy value, asked every `POLL` seconds for at most `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise Failed(f"{what}: not within {timeout:.0f}s")
        time.sleep(POLL)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def process_gone(pid: int) -> bool:
    """Exited (or a zombie no one reaped yet: it runs no code any more)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


# ---------------------------------------------------------------------------------------------
# Processes.


class Process:
    """One `mostrador-e2e` process (api or worker) on a free port, its stderr in a log file."""

    def __init__(
        self, world: "World", name: str, command: str, args: list[str], env: dict | None = None
    ) -> None:
        self.name = name
        self.port = free_port()
        self.log = world.dir / f"{name}.log"
        env = {
            **os.environ,
            "MOSTRADOR_JWT_SECRET": JWT_SECRET,
            "GUARANTEES_DIR": str(world.dir),
            "RUST_LOG": "info,sqlx=warn",
            # The database's address in the environment, as a deployment gives it (an argument
            # is readable by every process of the machine).
            "MOSTRADOR_DATABASE_URL": world.url,
            **(env or {}),
        }
        with open(self.log, "wb") as log:
            self.popen = subprocess.Popen(
                [
                    str(world.opts.bin),
                    command,
                    "--listen",
                    f"127.0.0.1:{self.port}",
                    "--config",
                    str(world.opts.config),
                    "--python",
                    str(world.opts.python),
                    *args,
                ],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
            )
        self.pid = self.popen.pid

    def get(self, path: str) -> int | None:
        """The HTTP status of `GET path`, None if nothing answers."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=5) as r:
                return r.status
        except urllib.error.HTTPError as err:
            return err.code
        except OSError:
            return None

    def until_ready(self, timeout: float = DEADLINE) -> None:
        def ready() -> bool:
            check(self.popen.poll() is None, f"{self.name} exited: {self.tail()}")
            return self.get("/ready") == 200

        until(f"{self.name} ready", ready, timeout)

    def alive(self) -> bool:
        return self.popen.poll() is None and self.get("/live") == 200

    def signal(self, signum: int) -> None:
        self.popen.send_signal(signum)

    def wait(self, timeout: float = DEADLINE) -> int:
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired as err:
            raise Failed(f"{self.name} still running after {timeout:.0f}s") from err

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(15)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()

    def tail(self, lines: int = 30) -> str:
        try:
            text = self.log.read_text(errors="replace").splitlines()
        except FileNotFoundError:
            return ""
        return "\n".join(text[-lines:])


class World:
    """One test's world: its database, an api, its workers, its records and gates."""

    def __init__(self, opts: argparse.Namespace, name: str, number: int) -> None:
        self.opts = opts
        # Postgres names are at most 63 bytes: numbered, not named after the test.
        self.database = f"mostrador_guarantees_{number}"
        self.url = f"{opts.postgres.rstrip('/')}/{self.database}"
        self.dir = opts.out / name
        self.processes: list[Process] = []

    def open(self) -> None:
        """The database, migrated, and the api, ready. `close` undoes whatever was done."""
        opts = self.opts
        shutil.rmtree(self.dir, ignore_errors=True)
        (self.dir / "gates").mkdir(parents=True)
        admin = f"{opts.postgres.rstrip('/')}/postgres"
        self.psql(f"drop database if exists {self.database} with (force)", url=admin)
        self.psql(f"create database {self.database}", url=admin)
        migrated = subprocess.run(
            [str(opts.bin), "migrate", "--database-url", self.url],
            capture_output=True,
            text=True,
        )
        check(migrated.returncode == 0, f"migrate: {migrated.stderr}")
        self.api = self.spawn("api", "api", [])
        self.client = self.client_of("ana", "s1")
        self.api.until_ready()

    def token_of(self, subject: str, tenant: str) -> str:
        """A bearer token of `subject` of `tenant`."""
        return subprocess.run(
            [str(self.opts.bin), "token", "--sub", subject, "--role", "customer", "--store", tenant],
            check=True,
            capture_output=True,
            text=True,
            env={**os.environ, "MOSTRADOR_JWT_SECRET": JWT_SECRET},
        ).stdout.strip()

    def client_of(self, subject: str, tenant: str) -> Any:
        """The official client, as `subject` of `tenant`."""
        return get_sync_client(
            url=f"http://127.0.0.1:{self.api.port}",
            headers={"Authorization": f"Bearer {self.token_of(subject, tenant)}"},
        )

    def spawn(self, name: str, command: str, args: list[str], env: dict | None = None) -> Process:
        process = Process(self, name, command, args, env)
        self.processes.append(process)
        return process

    def worker(self, name: str, *args: str, env: dict | None = None) -> Process:
        """A worker, ready (its first runner has loaded the graphs); short poll and sweep
        intervals, as the Rust end-to-end tests use."""
        worker = self.spawn(
            name,
            "worker",
            ["--name", name, "--poll-interval", "200ms", "--sweep-interval", "300ms", *args],
            env,
        )
        worker.until_ready()
        return worker

    def close(self) -> None:
        for process in self.processes:
            process.stop()
        # Runners exit when their worker's pipe closes; one that did not would be a leak.
        for runner in {e["runner"] for e in self.executions()}:
            try:
                until(f"runner {runner} exits", lambda: process_gone(runner), 5)
            except Failed:
                print(f"  ! runner {runner} outlived its worker: killing it", file=sys.stderr)
                os.kill(runner, signal.SIGKILL)
        if not self.opts.keep:
            admin = f"{self.opts.postgres.rstrip('/')}/postgres"
            self.psql(f"drop database if exists {self.database} with (force)", url=admin)

    # Postgres, for what the api does not show (attempts, drains, saved writes).

    def psql(self, query: str, url: str | None = None) -> list[str]:
        done = subprocess.run(
            ["psql", url or self.url, "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-c", query],
            check=True,
            capture_output=True,
            text=True,
        )
        return [line for line in done.stdout.splitlines() if line]

    def row(self, query: str) -> dict:
        rows = self.psql(f"select row_to_json(r) from ({query}) r")
        check(len(rows) == 1, f"one row from {query}: {rows}")
        return json.loads(rows[0])

    def run_row(self, run: dict) -> dict:
        return self.row(
            "select status, attempt, drain_count, max_attempts, error from mostrador.runs"
            f" where run_id = '{run['run_id']}'"
        )

    # The graphs' records and gates.

    def executions(self, thread_id: str | None = None, phase: str | None = None) -> list[dict]:
        try:
            lines = (self.dir / "executions.jsonl").read_text().splitlines()
        except FileNotFoundError:
            return []
        found = [json.loads(line) for line in lines if line]
        return [
            e
            for e in found
            if (thread_id is None or e["thread_id"] == thread_id)
            and (phase is None or e["phase"] == phase)
        ]

    def started(self, thread_id: str, node: str) -> dict:
        """The first record of `node` starting on the thread, once there is one."""
        return until(
            f"{node} started on thread {thread_id}",
            lambda: next(
                (e for e in self.executions(thread_id, "start") if e["node"] == node), None
            ),
        )

    def open_gate(self, thread_id: str) -> None:
        (self.dir / "gates" / thread_id).touch()

    # Runs, through the official client.

    def start(
        self, graph: str, graph_input: dict, *, gate_open: bool = False, client: Any = None
    ) -> dict:
        client = client or self.client
        thread = client.threads.create()
        if gate_open:
            self.open_gate(thread["thread_id"])
        return client.runs.create(thread["thread_id"], graph, input=graph_input)

    def until_ended(self, run: dict, timeout: float = DEADLINE, client: Any = None) -> dict:
        client = client or self.client

        def ended() -> dict | None:
            now = client.runs.get(run["thread_id"], run["run_id"])
            return now if now["status"] in TERMINAL else None

        return until(f"run {run['run_id']} ended", ended, timeout)

    def values(self, thread_id: str) -> dict:
        return self.client.threads.get_state(thread_id)["values"]

    def uninterrupted(self, graph: str, graph_input: dict) -> dict:
        """The final state of a run of the same input that nothing disturbed."""
        run = self.start(graph, graph_input, gate_open=True)
        ended = self.until_ended(run)
        check(ended["status"] == "success", f"the uninterrupted run: {ended}")
        return self.values(run["thread_id"])


def starts(world: World, thread_id: str) -> list[tuple[str, int, int]]:
    """`(node, runner pid, worker pid)` of each start on the thread, in order."""
    return [(e["node"], e["runner"], e["worker"]) for e in world.executions(thread_id, "start")]


# ---------------------------------------------------------------------------------------------
# The guarantees.


def sigterm_drains_at_a_superstep_boundary_and_another_worker_finishes_the_run(
    world: World, measured: dict
) -> None:
    """Worker A runs `linear` with `s3` held until its run is drained (LangGraph's
    `Runtime.drain_requested`: only a `RunControl.request_drain()` lets it finish). Worker B is
    started, then A gets SIGTERM. A must relay the drain to its runner, let `s3` finish, release
    the run at the boundary after `s3` without using an attempt, and exit 0; B must resume it from
    that checkpoint and finish it, each node having run exactly once, `s1..s3` under A and
    `s4..s6` under B, to the final state of an uninterrupted run; the client does nothing."""
    a = world.worker("a", "--drain-timeout", "20s", "--grace-period", "25s")
    graph_input = {"hold": "s3"}
    run = world.start("linear", graph_input)
    thread_id = run["thread_id"]
    world.started(thread_id, "s3")
    b = world.worker("b")

    sigterm = time.monotonic()
    a.signal(signal.SIGTERM)
    code = a.wait()
    measured["drain_seconds"] = round(time.monotonic() - sigterm, 3)
    check(code == 0, f"A exits 0 after draining, not {code}: {a.tail()}")

    ended = world.until_ended(run)
    check(ended["status"] == "success", f"the run succeeds: {ended}")
    row = world.run_row(run)
    check(
        (row["drain_count"], row["attempt"] - row["drain_count"]) == (1, 1),
        f"one drain, and it used no attempt: {row}",
    )
    ran = starts(world, thread_id)
    expected = [(f"s{i}", a.pid if i <= 3 else b.pid) for i in range(1, 7)]
    check(
        [(node, worker) for node, _, worker in ran] == expected,
        f"every node ran once, s1..s3 under A ({a.pid}), s4..s6 under B ({b.pid}): {ran}",
    )
    values = world.values(thread_id)
    check(values["log"] == [f"s{i}" for i in range(1, 7)], f"final state: {values}")
    reference = world.uninterrupted("linear", graph_input)
    check(values == reference, f"the final state {values} is an uninterrupted run's {reference}")
    check(b.alive(), "B still serves")


def an_a2a_message_and_an_mcp_tool_call_survive_a_workers_sigterm_answered_once(
    world: World, measured: dict
) -> None:
    """An A2A `message/send` and an MCP `tools/call` each wait for a run of `linear` (a data part,
    the tool's arguments: `{"hold": "s3"}`) held at `s3` on worker A. Worker B is started, then A
    gets SIGTERM: both runs drain at the boundary after `s3` and B finishes them. Each caller gets
    one answer, the final state of an uninterrupted run, and every node ran once, `s1..s3` under A
    and `s4..s6` under B."""
    import ast
    from concurrent.futures import ThreadPoolExecutor

    import httpx

    a = world.worker("a", "--drain-timeout", "20s", "--grace-period", "25s")
    base = f"http://127.0.0.1:{world.api.port}"
    headers = {
        "Authorization": f"Bearer {world.token_of('ana', 's1')}",
        "Accept": "application/json, text/event-stream",
    }
    linear = next(
        found["assistant_id"]
        for found in world.client.assistants.search(graph_id="linear")
        if (found.get("metadata") or {}).get("created_by") == "system"
    )
    held = {"hold": "s3"}
    a2a_message = {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": {
        "role": "user", "messageId": "m1", "parts": [{"kind": "data", "data": held}]}}}
    tool_call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                 "params": {"name": "linear", "arguments": held}}

    def post(path: str, body: dict) -> dict:
        answered = httpx.post(f"{base}{path}", json=body, headers=headers, timeout=DEADLINE)
        answered.raise_for_status()
        return answered.json()

    with ThreadPoolExecutor(2) as calls:
        a2a = calls.submit(post, f"/a2a/{linear}", a2a_message)
        mcp = calls.submit(post, "/mcp", tool_call)

        def both_held() -> list[dict] | None:
            found = [e for e in world.executions(phase="start") if e["node"] == "s3"]
            return found if len(found) == 2 else None

        threads = [e["thread_id"] for e in until("both runs hold s3 under A", both_held)]
        b = world.worker("b")
        sigterm = time.monotonic()
        a.signal(signal.SIGTERM)
        code = a.wait()
        check(code == 0, f"A exits 0 after draining, not {code}: {a.tail()}")
        sent, called = a2a.result(timeout=DEADLINE), mcp.result(timeout=DEADLINE)
        measured["answered_after_sigterm_seconds"] = round(time.monotonic() - sigterm, 3)

    final = {"hold": "s3", "log": [f"s{i}" for i in range(1, 7)]}
    task = sent.get("result") or {}
    check(task.get("status", {}).get("state") == "completed", f"the A2A task completed: {sent}")
    text = task["artifacts"][0]["parts"][0]["text"]
    # A turn of data alone answers the state with the run's messages (none), as officially.
    check(
        ast.literal_eval(text) == {**final, "messages": []},
        f"the A2A answer is the final state: {text}",
    )
    result = called.get("result") or {}
    check(not result.get("isError"), f"the tool call succeeded: {called}")
    text = result["content"][0]["text"]
    check(ast.literal_eval(text) == final, f"the tool's answer is the final state: {text}")
    for thread_id in threads:
        ran = [(node, worker) for node, _, worker in starts(world, thread_id)]
        expected = [(f"s{i}", a.pid if i <= 3 else b.pid) for i in range(1, 7)]
        check(ran == expected, f"every node ran once, s1..s3 under A, s4..s6 under B: {ran}")
    check(b.alive(), "B still serves")


def a_thread_stream_run_survives_a_workers_sigterm_its_events_numbered_once(
    world: World, measured: dict
) -> None:
    """A run of the thread-centric stream protocol (`run.start`, as `client.threads.stream`
    starts one) of `linear`, held at `s3` on worker A, followed by a stream of the thread's
    events. Worker B is started, then A gets SIGTERM: the run drains and B finishes it. The
    stream carries the root's `running` once and its `completed` once, each `seq` once and in
    order, and a `values` of the final state of an uninterrupted run; a stream opened afterwards
    replays the same events with the same `seq` and `event_id`."""
    from concurrent.futures import ThreadPoolExecutor

    import httpx

    a = world.worker("a", "--drain-timeout", "20s", "--grace-period", "25s")
    base = f"http://127.0.0.1:{world.api.port}"
    headers = {"Authorization": f"Bearer {world.token_of('ana', 's1')}"}
    thread_id = str(uuid.uuid4())
    held = {"hold": "s3"}

    def events() -> list[dict]:
        """The thread's events until its run's root ends."""
        found = []
        body = {"channels": ["lifecycle", "values"]}
        with httpx.stream("POST", f"{base}/threads/{thread_id}/stream/events", json=body,
                          headers=headers, timeout=DEADLINE) as answer:
            answer.raise_for_status()
            for line in answer.iter_lines():
                if not line.startswith("data: "):
                    continue
                event = json.loads(line[len("data: "):])
                found.append(event)
                data = event["params"]["data"]
                if event["method"] == "lifecycle" and not event["params"]["namespace"] \
                        and data.get("event") in ("completed", "failed", "interrupted"):
                    return found
        return found

    with ThreadPoolExecutor(1) as reader:
        live = reader.submit(events)
        command = {"id": 1, "method": "run.start", "params": {"assistant_id": "linear", "input": held}}
        started = httpx.post(f"{base}/threads/{thread_id}/commands", json=command, headers=headers,
                             timeout=DEADLINE).json()
        check(started.get("type") == "success", f"run.start: {started}")
        world.started(thread_id, "s3")
        b = world.worker("b")
        a.signal(signal.SIGTERM)
        code = a.wait()
        check(code == 0, f"A exits 0 after draining, not {code}: {a.tail()}")
        seen = live.result(timeout=DEADLINE)

    seqs = [event["seq"] for event in seen]
    check(seqs == list(range(1, len(seqs) + 1)), f"each seq once, in order: {seqs}")
    root = [event["params"]["data"]["event"] for event in seen
            if event["method"] == "lifecycle" and not event["params"]["namespace"]]
    check(root == ["running", "completed"], f"the root runs once and completes once: {root}")
    final = {"hold": "s3", "log": [f"s{i}" for i in range(1, 7)]}
    last = [event["params"]["data"] for event in seen if event["method"] == "values"][-1]
    check(last == final, f"the last state is an uninterrupted run's: {last}")
    ran = [(node, worker) for node, _, worker in starts(world, thread_id)]
    expected = [(f"s{i}", a.pid if i <= 3 else b.pid) for i in range(1, 7)]
    check(ran == expected, f"every node ran once, s1..s3 under A, s4..s6 under B: {ran}")
    replayed = events()
    check(
        [(e["seq"], e["event_id"], e["params"]["data"]) for e in replayed]
        == [(e["seq"], e["event_id"], e["params"]["data"]) for e in seen],
        "a later stream replays the same events, seqs and ids",
    )
    check(b.alive(), "B still serves")


def sigkill_mid_superstep_reruns_only_the_unfinished_task(world: World, measured: dict) -> None:
    """`fanout` runs `fast` and `slow` in one superstep. Once `fast`'s pending write is saved
    and `slow` is in flight, worker A gets SIGKILL. Its runner must not outlive it; worker B
    (started after the kill) must take the run back when A's lease expires and re-run only
    `slow`: `fast` runs once, `slow` twice, `join` once, to an uninterrupted run's state."""
    a = world.worker("a", "--lease", "2s")
    run = world.start("fanout", {})
    thread_id = run["thread_id"]
    slow = world.started(thread_id, "slow")

    def saved_channels() -> list[str]:
        return world.psql(
            "select distinct channel from mostrador.checkpoint_writes"
            f" where thread_id = '{thread_id}' order by 1"
        )

    until("fast's pending write saved", lambda: "fast" in saved_channels())
    a.signal(signal.SIGKILL)
    a.wait()
    killed = time.monotonic()
    saved = saved_channels()
    check("slow" not in saved, f"the kill landed while slow was in flight: saved {saved}")
    until("A's runner exits with its worker", lambda: process_gone(slow["runner"]), 10)

    world.open_gate(thread_id)
    b = world.worker("b", "--lease", "2s")
    ended = world.until_ended(run)
    measured["recovery_seconds"] = round(time.monotonic() - killed, 3)
    check(ended["status"] == "success", f"the run succeeds: {ended}")
    row = world.run_row(run)
    check((row["attempt"], row["drain_count"]) == (2, 0), f"a second attempt: {row}")

    values = world.values(thread_id)
    reference = world.uninterrupted("fanout", {})
    check(values == reference, f"the final state {values} is an uninterrupted run's {reference}")
    ran = starts(world, thread_id)
    by_node = {
        node: [worker for name, _, worker in ran if name == node]
        for node in ("fast", "slow", "join")
    }
    check(
        by_node == {"fast": [a.pid], "slow": [a.pid, b.pid], "join": [b.pid]},
        f"fast ran once (A {a.pid}), slow twice (A, then B {b.pid}), join once (B): {ran}",
    )
    finishes = [e["node"] for e in world.executions(thread_id, "finish")]
    check(finishes.count("slow") == 1, f"the killed slow never finished: {finishes}")


def sigkill_of_the_runner_alone_fails_the_run_retryably_and_it_resumes_from_its_checkpoint(
    world: World, measured: dict
) -> None:
    """Worker A runs `linear` with `s3` held; its runner process (not the worker) gets SIGKILL.
    The worker must fail the run retryably and keep serving; the next attempt, in a new runner of
    the same worker, resumes from the checkpoint after `s2`: `s3` runs twice, every other node
    once, to an uninterrupted run's state."""
    a = world.worker("a")
    graph_input = {"hold": "s3"}
    run = world.start("linear", graph_input)
    thread_id = run["thread_id"]
    held = world.started(thread_id, "s3")
    check(held["worker"] == a.pid, f"A's runner runs it: {held}")
    os.kill(held["runner"], signal.SIGKILL)
    killed = time.monotonic()
    until("the runner is gone", lambda: process_gone(held["runner"]), 10)
    world.open_gate(thread_id)

    ended = world.until_ended(run)
    measured["recovery_seconds"] = round(time.monotonic() - killed, 3)
    check(ended["status"] == "success", f"the run succeeds: {ended}")
    row = world.run_row(run)
    check((row["attempt"], row["drain_count"]) == (2, 0), f"failed once, retried: {row}")
    check(a.alive(), f"the worker keeps running: {a.tail()}")

    ran = starts(world, thread_id)
    check(
        [node for node, _, _ in ran] == ["s1", "s2", "s3", "s3", "s4", "s5", "s6"],
        f"only s3 ran again: {ran}",
    )
    runners = [runner for _, runner, _ in ran]
    check(
        runners[:3] == [held["runner"]] * 3
        and held["runner"] not in runners[3:]
        and all(worker == a.pid for _, _, worker in ran),
        f"s1..s3 in the killed runner, the rest in another runner of the same worker: {ran}",
    )
    values = world.values(thread_id)
    reference = world.uninterrupted("linear", graph_input)
    check(values == reference, f"the final state {values} is an uninterrupted run's {reference}")


# A cancel reaches a node blocked in a thread or in an await at once; a node blocking the
# runner's event loop when its process is killed, `CANCEL_GRACE` (1 s) later.
CANCEL_WITHIN_SECONDS = {"sleep_sync": 1.0, "sleep_async": 1.0, "block_loop": 1.5}


def cancel_reaches_a_blocked_node_within_a_second_with_interrupt_and_rollback(
    world: World, measured: dict
) -> None:
    """`blocked` runs `first`, then a node blocked for ten minutes: in `time.sleep` on
    LangGraph's thread pool, in `await asyncio.sleep`, or in `time.sleep` on the runner's event
    loop. For each, `runs.cancel` with `interrupt` and with `rollback`, timed from the request
    to the run's end as the client sees it. `interrupt`: the run ends `interrupted`, the thread
    `idle` with the checkpoints so far (after `first`, `next` the blocked node). `rollback`: the
    run is gone (404) and so are its checkpoints (an empty state and history)."""
    a = world.worker("a")
    client = world.client
    for mode in world.opts.cancel_modes:
        within = CANCEL_WITHIN_SECONDS[mode]
        for action in ("interrupt", "rollback"):
            run = world.start("blocked", {"mode": mode})
            thread_id = run["thread_id"]
            world.started(thread_id, mode)
            requested = time.monotonic()
            client.runs.cancel(thread_id, run["run_id"], action=action)
            if action == "interrupt":
                ended = world.until_ended(run)
            else:

                def deleted() -> bool:
                    try:
                        client.runs.get(thread_id, run["run_id"])
                    except NotFoundError:
                        return True
                    return False

                until("the rolled back run is deleted", deleted)
            took = round(time.monotonic() - requested, 3)
            measured[f"{mode}/{action}_seconds"] = took
            check(took <= within, f"{mode}/{action}: the cancel took {took}s (at most {within}s)")

            state = client.threads.get_state(thread_id)
            history = client.threads.get_history(thread_id)
            if action == "interrupt":
                check(ended["status"] == "interrupted", f"{mode}: {ended}")
                check(
                    state["values"] == {"mode": mode, "log": ["first"]}
                    and list(state["next"]) == [mode],
                    f"{mode}: interrupt keeps the checkpoints so far: {state}",
                )
                check(len(history) >= 2, f"{mode}: the history is kept: {history}")
            else:
                check(
                    not state["values"] and not history,
                    f"{mode}: rollback deletes the run's checkpoints: {state} {history}",
                )
                left = world.psql(
                    f"select count(*) from mostrador.checkpoints where thread_id = '{thread_id}'"
                )
                check(left == ["0"], f"{mode}: no checkpoint left in Postgres: {left}")
            thread = client.threads.get(thread_id)
            check(thread["status"] == "idle", f"{mode}/{action}: the thread rests: {thread}")
            finishes = [e["node"] for e in world.executions(thread_id, "finish")]
            check(finishes == ["first"], f"{mode}/{action}: the blocked node never finished")
    check(a.alive(), f"the worker keeps running: {a.tail()}")
    after = world.start("linear", {}, gate_open=True)
    check(world.until_ended(after)["status"] == "success", "the worker still runs graphs")


def segfault_and_memory_exhaustion_fail_only_their_own_runs_isolated_by_run(
    world: World, measured: dict
) -> None:
    """One worker, a runner process per run (`--python-isolation run`), runs two `linear` runs,
    held at `s3`, while a `segfault` run (a null pointer dereference) and a `memory` run (leaking
    past a capped address space) go through every attempt. Each bad run must fail retryably, be
    retried in a new runner, and end `error` after its `max_attempts`; the worker keeps running;
    a run started afterwards on the same worker succeeds (no runner left poisoned); the held
    runs, released at last, finish on their first attempt in the runner they started in, with
    the right state."""
    a = world.worker("a", "--python-isolation", "run")
    good = [world.start("linear", {"hold": "s3"}) for _ in range(2)]
    for run in good:
        world.started(run["thread_id"], "s3")
    bad = {graph: world.start(graph, {}) for graph in ("memory", "segfault")}
    began = time.monotonic()
    for graph, run in bad.items():
        ended = world.until_ended(run)
        row = world.run_row(run)
        check(
            ended["status"] == "error" and row["attempt"] == row["max_attempts"] > 1,
            f"{graph}: retried until its attempts ran out, then error: {row}",
        )
        crashed = world.executions(run["thread_id"], "start")
        runners = [e["runner"] for e in crashed if e["node"] != "before"]
        check(
            len(runners) == row["max_attempts"] == len(set(runners)),
            f"{graph}: each attempt in a new runner: {crashed}",
        )
    measured["bad_runs_seconds"] = round(time.monotonic() - began, 3)
    check(a.alive(), f"the worker keeps running: {a.tail()}")
    for run in good:
        row = world.run_row(run)
        check(row["status"] == "running" and row["attempt"] == 1, f"held run unharmed: {row}")

    later = world.start("linear", {}, gate_open=True)
    ended = world.until_ended(later)
    check(ended["status"] == "success", f"a later run on the same worker succeeds: {ended}")

    for run in good:
        world.open_gate(run["thread_id"])
    for run in good:
        ended = world.until_ended(run)
        check(ended["status"] == "success", f"held run: {ended}")
        check(world.run_row(run)["attempt"] == 1, "held run: never retried")
        ran = starts(world, run["thread_id"])
        check(
            [node for node, _, _ in ran] == [f"s{i}" for i in range(1, 7)]
            and len({runner for _, runner, _ in ran}) == 1,
            f"held run: each node once, in one runner: {ran}",
        )
        values = world.values(run["thread_id"])
        check(values["log"] == [f"s{i}" for i in range(1, 7)], f"held run: {values}")


def held_runs(world: World, n: int) -> list[dict]:
    """`n` runs of `linear` held at `s3`, once all have started it."""
    runs = [world.start("linear", {"hold": "s3"}) for _ in range(n)]
    for run in runs:
        world.started(run["thread_id"], "s3")
    return runs


def finished(world: World, thread_id: str) -> list[str]:
    return [e["node"] for e in world.executions(thread_id, "finish")]


def resumed_whole(world: World, runs: list[dict], attempt: int) -> None:
    """Each run succeeded on `attempt`, every node finished once, to an uninterrupted state."""
    reference = None
    for run in runs:
        ended = world.until_ended(run)
        check(ended["status"] == "success", f"the run succeeds: {ended}")
        row = world.run_row(run)
        check(row["attempt"] == attempt, f"attempt {attempt}: {row}")
        nodes = finished(world, run["thread_id"])
        check(nodes == [f"s{i}" for i in range(1, 7)], f"every node finished once: {nodes}")
        reference = reference or world.uninterrupted("linear", {"hold": "s3"})
        values = world.values(run["thread_id"])
        check(values == reference, f"the final state {values} is an uninterrupted run's {reference}")


def a_crash_in_a_shared_runner_fails_its_runs_retryably_and_they_resume_from_their_checkpoints(
    world: World, measured: dict
) -> None:
    """One runner process (`--python-processes 1`, shared) hosts three `linear` runs held at `s3`
    when a fourth run, `segfault` with `once`, crashes it. Every run it hosted fails retryably;
    the next attempts, in the new runner the worker starts, resume from their checkpoints: the
    crashed run succeeds on its second attempt without re-running `before`, and the held runs,
    released, finish every node once."""
    a = world.worker("a", "--python-processes", "1")
    held = held_runs(world, 3)
    runner = world.started(held[0]["thread_id"], "s3")["runner"]
    check(
        all(world.started(run["thread_id"], "s3")["runner"] == runner for run in held),
        "the held runs share one runner",
    )
    crashing = world.start("segfault", {"once": True})
    crashed = time.monotonic()
    until("the shared runner is gone", lambda: process_gone(runner), 30)
    ended = world.until_ended(crashing)
    check(ended["status"] == "success", f"the crashed run succeeds on a retry: {ended}")
    check(world.run_row(crashing)["attempt"] == 2, "the crashed run: retried once")
    nodes = finished(world, crashing["thread_id"])
    check(nodes == ["before", "crash"], f"before finished once, crash once: {nodes}")
    for run in held:
        again = until(
            "the held run started s3 again",
            lambda run=run: len([e for e in world.executions(run["thread_id"], "start") if e["node"] == "s3"]) == 2,
        )
        check(again, "s3 again")
        world.open_gate(run["thread_id"])
    resumed_whole(world, held, attempt=2)
    measured["recovery_seconds"] = round(time.monotonic() - crashed, 3)
    check(a.alive(), f"the worker keeps running: {a.tail()}")


def sigkill_of_a_runner_hosting_many_runs_loses_none_and_repeats_no_finished_superstep(
    world: World, measured: dict
) -> None:
    """One runner process hosts four `linear` runs held at `s3`; it gets SIGKILL. Each run fails
    retryably and resumes in a new runner from its checkpoint: `s1` and `s2` never run again,
    every node finishes once."""
    a = world.worker("a", "--python-processes", "1")
    held = held_runs(world, 4)
    runner = world.started(held[0]["thread_id"], "s3")["runner"]
    os.kill(runner, signal.SIGKILL)
    killed = time.monotonic()
    for run in held:
        world.open_gate(run["thread_id"])
    resumed_whole(world, held, attempt=2)
    measured["recovery_seconds"] = round(time.monotonic() - killed, 3)
    for run in held:
        ran = starts(world, run["thread_id"])
        check(
            [node for node, _, _ in ran] == ["s1", "s2", "s3", "s3", "s4", "s5", "s6"],
            f"only s3 ran again: {ran}",
        )
    check(a.alive(), f"the worker keeps running: {a.tail()}")


def cancel_of_one_run_leaves_the_runs_beside_it_untouched(world: World, measured: dict) -> None:
    """Three `linear` runs held at `s3` share one runner process; one is cancelled. It ends
    `interrupted` within a second; the two beside it, released, finish on their first attempt in
    the same process."""
    world.worker("a", "--python-processes", "1")
    held = held_runs(world, 3)
    runner = world.started(held[0]["thread_id"], "s3")["runner"]
    cancelled = held.pop()
    began = time.monotonic()
    world.client.runs.cancel(cancelled["thread_id"], cancelled["run_id"], action="interrupt")
    ended = world.until_ended(cancelled)
    measured["cancel_seconds"] = round(time.monotonic() - began, 3)
    check(ended["status"] == "interrupted", f"the cancelled run: {ended}")
    check(measured["cancel_seconds"] < 1.5, f"cancelled within a second: {measured}")
    check(not process_gone(runner), "the shared runner lives on")
    for run in held:
        world.open_gate(run["thread_id"])
    resumed_whole(world, held, attempt=1)
    for run in held:
        check(
            {r for _, r, _ in starts(world, run["thread_id"])} == {runner},
            "the runs beside it finished in the same runner",
        )


SECRET = "platform-secret-7f3a"


def runner_processes_hold_no_secret_of_the_platform(world: World, measured: dict) -> None:
    """A worker holds the platform's secrets in its environment (its database, JWT secret, the
    binary's model key, the exporter's headers) beside a variable the graphs need. A run's code
    finds the graphs' variable and none of the secrets in its own environment, and cannot read
    its worker's environment or memory."""
    worker = world.worker(
        "a",
        env={
            "MODEL_API_KEY": SECRET,
            "OTEL_EXPORTER_OTLP_HEADERS": f"authorization={SECRET}",
            "MOSTRADOR_API_KEY_PEPPER": SECRET,
            "GRAPHS_OWN_SETTING": "kept",
        },
    )
    run = world.start("secrets", {"worker": worker.pid})
    ended = world.until_ended(run)
    check(ended["status"] == "success", f"the probe ran: {ended}")
    seen = world.values(run["thread_id"])["seen"]
    environ = seen["environ"]
    check(environ.get("GRAPHS_OWN_SETTING") == "kept", "the graphs' own variable is there")
    secrets = (SECRET, JWT_SECRET, world.url)
    leaked = {k: v for k, v in environ.items() if any(secret in v for secret in secrets)}
    check(not leaked, f"no secret in the runner's environment: {leaked}")
    named = [k for k in environ if k.startswith(("MOSTRADOR_", "OTEL_")) or k in ("DATABASE_URL", "MODEL_API_KEY")]
    check(not named, f"none of the platform's variables: {named}")
    for what in ("worker_environ", "worker_mem"):
        check(seen[what].startswith("refused"), f"{what}: {seen[what][:200]}")
    measured["worker_environ"] = seen["worker_environ"]


def a_runner_process_serves_one_tenant_at_a_time_when_isolated_by_tenant(
    world: World, measured: dict
) -> None:
    """Isolated by tenant (`--python-isolation tenant`): two runs of tenant s1 share a process;
    a run of tenant s2, at the same time, gets another; once they have all ended, later runs of
    each tenant never land in the other's process."""
    world.worker("a", "--python-isolation", "tenant", "--python-processes", "1")
    other = world.client_of("jordi", "s2")
    ana = held_runs(world, 2)
    jordi = world.start("linear", {"hold": "s3"}, client=other)
    runner_of = lambda run: world.started(run["thread_id"], "s3")["runner"]  # noqa: E731
    ana_runner, jordi_runner = runner_of(ana[0]), runner_of(jordi)
    check(runner_of(ana[1]) == ana_runner, "one tenant's runs share its process")
    check(ana_runner != jordi_runner, "another tenant's run is in another process")
    for run in [*ana, jordi]:
        world.open_gate(run["thread_id"])
    for run, client in [(ana[0], None), (ana[1], None), (jordi, other)]:
        check(world.until_ended(run, client=client)["status"] == "success", "the runs succeed")
    later = {
        "s1": world.start("linear", {"hold": "s3"}, gate_open=True),
        "s2": world.start("linear", {"hold": "s3"}, gate_open=True, client=other),
    }
    for tenant, run in later.items():
        client = other if tenant == "s2" else None
        check(world.until_ended(run, client=client)["status"] == "success", "the later runs succeed")
        runner = runner_of(run)
        forbidden = jordi_runner if tenant == "s1" else ana_runner
        check(runner != forbidden, f"{tenant}'s later run is not in the other tenant's process")


def a_run_blocking_the_event_loop_fails_alone_and_its_runner_is_replaced(
    world: World, measured: dict
) -> None:
    """Three `linear` runs held at `s3` share one runner process with a `blocked` run whose async
    node calls `time.sleep` (`block_loop`): the event loop they share stops. Past
    `--python-blocked-after` (2 s), the blocking run ends `error` (`BlockedEventLoop`, not
    retried) and its process is replaced; the held runs resume from their checkpoints in the new
    one and finish every node once."""
    world.worker("a", "--python-processes", "1", "--python-blocked-after", "2s")
    held = held_runs(world, 3)
    blocking = world.start("blocked", {"mode": "block_loop"})
    world.started(blocking["thread_id"], "block_loop")
    began = time.monotonic()
    ended = world.until_ended(blocking)
    measured["detected_seconds"] = round(time.monotonic() - began, 3)
    check(ended["status"] == "error", f"the blocking run fails: {ended}")
    row = world.run_row(blocking)
    check(
        row["error"]["error"] == "BlockedEventLoop" and row["attempt"] == 1,
        f"as blocking its event loop, not retried: {row}",
    )
    for run in held:
        world.open_gate(run["thread_id"])
    resumed_whole(world, held, attempt=2)


def new_runners_fork_from_a_warm_template_and_never_wait_for_imports(
    world: World, measured: dict
) -> None:
    """A process per run (`--python-isolation run`), one kept ready: eight runs at once each get a
    new runner, forked from the worker's template (which loaded the graphs once), so none waits
    for an interpreter to import LangGraph; all succeed, each in a runner of its own."""
    world.worker("a", "--python-isolation", "run", "--python-processes", "1")
    began = time.monotonic()
    runs = [world.start("linear", {}, gate_open=True) for _ in range(8)]
    for run in runs:
        check(world.until_ended(run)["status"] == "success", "the run succeeds")
    measured["eight_runs_seconds"] = round(time.monotonic() - began, 3)
    first = [world.started(run["thread_id"], "s1") for run in runs]
    check(all(e["forked"] for e in first), f"every runner forked from the template: {first}")
    check(len({e["runner"] for e in first}) == len(runs), f"a runner per run: {first}")


TESTS = [
    sigterm_drains_at_a_superstep_boundary_and_another_worker_finishes_the_run,
    an_a2a_message_and_an_mcp_tool_call_survive_a_workers_sigterm_answered_once,
    a_thread_stream_run_survives_a_workers_sigterm_its_events_numbered_once,
    sigkill_mid_superstep_reruns_only_the_unfinished_task,
    sigkill_of_the_runner_alone_fails_the_run_retryably_and_it_resumes_from_its_checkpoint,
    cancel_reaches_a_blocked_node_within_a_second_with_interrupt_and_rollback,
    segfault_and_memory_exhaustion_fail_only_their_own_runs_isolated_by_run,
    a_crash_in_a_shared_runner_fails_its_runs_retryably_and_they_resume_from_their_checkpoints,
    sigkill_of_a_runner_hosting_many_runs_loses_none_and_repeats_no_finished_superstep,
    cancel_of_one_run_leaves_the_runs_beside_it_untouched,
    a_run_blocking_the_event_loop_fails_alone_and_its_runner_is_replaced,
    runner_processes_hold_no_secret_of_the_platform,
    a_runner_process_serves_one_tenant_at_a_time_when_isolated_by_tenant,
    new_runners_fork_from_a_warm_template_and_never_wait_for_imports,
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bin", type=Path, required=True, help="the mostrador-e2e binary")
    parser.add_argument("--python", type=Path, required=True, help="the runners' interpreter")
    parser.add_argument("--out", type=Path, required=True, help="logs and records go here")
    parser.add_argument("--postgres", default="postgres://postgres@127.0.0.1:5432")
    parser.add_argument("--keep", action="store_true", help="keep the databases, to look")
    parser.add_argument("--only", nargs="*", default=[], help="tests whose name contains one")
    parser.add_argument(
        "--config", type=Path, default=CONFIG,
        help="the project whose graphs `linear`, `fanout`, `blocked`... the tests run (the same "
        "graphs in JavaScript: tests/langgraphjs/project/langgraph.json)",
    )
    parser.add_argument(
        "--cancel-modes", nargs="*", default=list(CANCEL_WITHIN_SECONDS),
        choices=list(CANCEL_WITHIN_SECONDS), help="how `blocked` blocks, each cancelled",
    )
    opts = parser.parse_args()
    # Absolute, but not resolved: a venv's interpreter is a symlink out of the venv. (Runners
    # start in the folder of `langgraph.json`.)
    opts.python = Path(os.path.abspath(opts.python))
    opts.bin, opts.out, opts.config = opts.bin.resolve(), opts.out.resolve(), opts.config.resolve()
    opts.out.mkdir(parents=True, exist_ok=True)

    results, failed = {}, 0
    for number, test in enumerate(TESTS, 1):
        name = test.__name__
        if opts.only and not any(part in name for part in opts.only):
            continue
        began = time.monotonic()
        measured: dict = {}
        world = World(opts, name, number)
        try:
            world.open()
            test(world, measured)
            outcome, detail = "ok", ""
        except Exception as err:  # noqa: BLE001 - a test's failure, reported with its logs
            failed += 1
            outcome = "FAILED"
            detail = "".join(traceback.format_exception_only(err)).strip()
            if not isinstance(err, Failed):
                detail = traceback.format_exc()
        finally:
            world.close()
        seconds = round(time.monotonic() - began, 1)
        results[name] = {"outcome": outcome, "seconds": seconds, "measured": measured}
        print(f"{outcome:6} {name} ({seconds}s) {json.dumps(measured)}", flush=True)
        if outcome != "ok":
            print(f"       {detail}", flush=True)
            print(f"       logs: {opts.out / name}", flush=True)
    (opts.out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
