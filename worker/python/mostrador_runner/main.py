"""The runner process: loads the project, then executes the runs the worker starts, each a task."""

import asyncio
import gc
import os
import threading
import time
import weakref
from typing import Any, BinaryIO

import mostrador

from .describe import describe_all
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
                channel.send({"t": "blocked", "run": run, "seconds": round(blocked, 1)})

    threading.Thread(target=watch, name="mostrador-loop-watch", daemon=True).start()


def limit_memory() -> None:
    """The worker's `--python-memory-limit-mib`, before any user code allocates."""
    mib = os.environ.pop("MOSTRADOR_RUNNER_MEMORY_LIMIT_MIB", "")
    if mib:
        import resource

        limit = int(mib) * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


async def serve(out: BinaryIO, in_fd: int, config_path: str) -> None:
    limit_memory()
    channel = Channel(out, in_fd)
    reading = asyncio.ensure_future(channel.read())
    project = Project(load_config(config_path))
    # What was loaded stays: the collector need not scan it again. LangGraph allocates many
    # short-lived objects per step; collecting the youngest generation less often spares most of
    # the collector's passes, for a few megabytes.
    gc.freeze()
    gc.set_threshold(20_000, 20, 20)
    blocked_after = float(os.environ.pop("MOSTRADOR_RUNNER_BLOCKED_AFTER", "") or 0)
    if blocked_after > 0:
        watch_the_loop(channel, blocked_after)
    channel.send({"t": "ready", "protocol": VERSION, "graphs": project.ids()})
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


def start(streams: tuple[BinaryIO, int], config_path: str) -> None:
    """Serves the worker on `streams` until it goes away."""
    try:
        # The official server's event loop, where the environment has it.
        import uvloop
    except ImportError:
        asyncio.run(serve(*streams, config_path))
    else:
        uvloop.run(serve(*streams, config_path))
