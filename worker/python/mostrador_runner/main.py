"""The runner process: loads the project, then executes the runs the worker starts, each a task."""

import asyncio
import gc
import os
import signal
import socket
import threading
import time
import weakref
from typing import Any, BinaryIO

import mostrador

from .describe import describe_all
from .encoding import dumps
from .project import Project, load_config
from .protocol import VERSION, Channel, RunChannel
from .run import Run, run_one


def watch_the_loop(channel: Channel, blocked_after: float) -> None:
    """A thread that tells the worker when a run has blocked this process's event loop for
    `blocked_after` seconds (a `time.sleep` or a CPU-bound loop in an async node): every run of
    the process waits for it, so the worker ends that run and replaces the process. The run is
    the one whose task holds the loop (its context carries the run's link)."""
    loop = channel.loop
    beat = [time.monotonic()]
    # The run of each task: its creator's (tasks inherit their creator's context, and with it the
    # run's link).
    runs: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def task_of_its_run(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> asyncio.Task:
        task = asyncio.Task(coro, loop=loop, **kwargs)
        context = kwargs.get("context")
        link = context.get(mostrador._run) if context is not None else mostrador._run.get()
        if link is not None:
            runs[task] = link.run
        return task

    loop.set_task_factory(task_of_its_run)

    def tick() -> None:
        beat[0] = time.monotonic()
        loop.call_later(0.1, tick)

    loop.call_soon_threadsafe(tick)

    def watch() -> None:
        told = None
        while True:
            time.sleep(0.1)
            blocked = time.monotonic() - beat[0]
            if blocked < blocked_after:
                told = None
                continue
            task = asyncio.tasks._current_tasks.get(loop)  # type: ignore[attr-defined]
            run = runs.get(task) if task is not None else None
            if told != run:
                told = run
                channel.send_now({"t": "blocked", "run": run, "seconds": round(blocked, 1)})

    threading.Thread(target=watch, name="mostrador-loop-watch", daemon=True).start()


def limit_memory() -> None:
    """The worker's `--python-memory-limit-mib`, before any user code allocates."""
    mib = os.environ.pop("MOSTRADOR_RUNNER_MEMORY_LIMIT_MIB", "")
    if mib:
        import resource

        limit = int(mib) * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def load(config_path: str) -> Project:
    """The project, loaded once per process (or once per template, whose forks share it)."""
    limit_memory()
    project = Project(load_config(config_path))
    # What was loaded stays: the collector need not scan it again (nor copy it into a fork's
    # pages). LangGraph allocates many short-lived objects per step; collecting the youngest
    # generation less often spares most of the collector's passes, for a few megabytes.
    gc.freeze()
    gc.set_threshold(20_000, 20, 20)
    return project


async def serve(out: BinaryIO, in_fd: int, project: Project) -> None:
    channel = Channel(out, in_fd)
    reading = asyncio.ensure_future(channel.read())
    blocked_after = float(os.environ.pop("MOSTRADOR_RUNNER_BLOCKED_AFTER", "") or 0)
    if blocked_after > 0:
        watch_the_loop(channel, blocked_after)
    channel.send({"t": "ready", "protocol": VERSION, "pid": os.getpid(), "graphs": project.ids()})
    # The runs this process executes, by their number, each a task of its own.
    runs: dict[int, tuple[Run, asyncio.Task]] = {}
    background: set[asyncio.Task] = set()
    while True:
        message = await channel.messages.get()
        kind, number = message["t"], message.get("run")
        if kind == "start":
            run = Run(RunChannel(channel, number), project, message["spec"])
            task = asyncio.ensure_future(run_one(run))
            runs[number] = (run, task)
            task.add_done_callback(lambda _, number=number: runs.pop(number, None))  # type: ignore[misc]
        elif kind == "drain" and number in runs:
            runs[number][0].control.request_drain(message.get("reason") or "shutdown")
        elif kind == "cancel" and number in runs:
            runs[number][1].cancel()
        elif kind == "describe":
            # Kept until done: the loop holds its tasks weakly.
            describing = asyncio.ensure_future(describe_all(channel, project))
            background.add(describing)
            describing.add_done_callback(background.discard)
        # A drain or cancel of a run that has ended concerns nothing.
    reading.cancel()


def start(streams: tuple[BinaryIO, int], project: Project) -> None:
    """Serves the worker on `streams` until it goes away."""
    try:
        # The official server's event loop, where the environment has it.
        import uvloop
    except ImportError:
        asyncio.run(serve(*streams, project))
    else:
        uvloop.run(serve(*streams, project))
    os._exit(0)


def template(streams: tuple[BinaryIO, int], config_path: str) -> None:
    """A warm template: loads the project once, then forks a runner each time the worker sends
    the two ends of a new runner's pipes (its input, its output) over the template's socket (its
    standard input). A runner so started shares the loaded project with the template, and never
    waits for an import. The template says `{"t": "ready", ...}` on its output once loaded."""
    out, in_fd = streams
    project = load(config_path)
    commands = socket.socket(fileno=in_fd)
    # Its children are the worker's runners, which it never waits for: reaped at once.
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    out.write(dumps({"t": "ready", "protocol": VERSION, "pid": os.getpid(), "graphs": project.ids()}) + b"\n")
    while True:
        _, fds, _, _ = socket.recv_fds(commands, 16, 2)
        if len(fds) != 2:
            # The worker is gone (or sent no pipes): no runner to start.
            for fd in fds:
                os.close(fd)
            if not fds:
                os._exit(0)
            continue
        if os.fork() == 0:
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            commands.close()
            out.close()
            runner_in, runner_out = fds
            os.set_inheritable(runner_in, False)
            os.set_inheritable(runner_out, False)
            start((os.fdopen(runner_out, "wb", buffering=0), runner_in), project)
        for fd in fds:
            os.close(fd)
