"""One run: LangGraph's stream, its events to the worker, its checkpoints described."""

import asyncio
import contextlib
import traceback
from collections.abc import AsyncIterator
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.errors import GraphDrained, GraphRecursionError
from langgraph.pregel import Pregel
from langgraph.runtime import RunControl
from langgraph.types import Command
from langgraph.version import __version__ as LANGGRAPH_VERSION

import mostrador

from . import thread_events
from .checkpointer import MostradorSaver
from .project import Project
from .protocol import Outcome, RunChannel, SaverFailed
from .spans import SPANS, Spans
from .state import checkpoint_json, goto, interrupt_json, thread_state
from .store import MostradorStore
from .user import User


class Link:
    """A run's link with its worker, as `mostrador.current()` gives it to the graph's code."""

    def __init__(self, channel: RunChannel, thread_id: str) -> None:
        self.loop = channel.loop
        self.run = channel.run
        self.thread_id = thread_id
        self.call = channel.call
        self.cast = channel.cast


class Run:
    """One run: LangGraph's stream, its events to the worker, its checkpoints described."""

    def __init__(self, channel: RunChannel, project: Project, spec: dict) -> None:
        self.channel = channel
        self.project = project
        self.spec = spec
        self.thread_id = spec["thread_id"]
        self.control = RunControl()
        self.saver = MostradorSaver(channel, self.thread_id)
        self.saver.saving = self.saving
        self.store = MostradorStore(channel, project.store_ttl, project.store_index)
        self.link = Link(channel, self.thread_id)
        self.spans = Spans(channel) if SPANS else None
        if spec["latest"] is not None:
            # Read by the worker with the run.
            found = spec["latest"]["checkpoint"]
            self.saver.latest = self.saver._tuple(found) if found else None
        # The newest checkpoint of the thread this run made or goes on from, not yet described:
        # it is described when its tasks have run (with their results), at the next checkpoint or
        # at the run's end.
        self.undescribed: str | None = None
        # Past checkpoints whose records are due, and those being described while LangGraph goes
        # on: one at a time, in order, each after the one before.
        self.due: list[str] = []
        self.recording: asyncio.Task | None = None
        self.input_checkpoint: str | None = None

    def config(self) -> RunnableConfig:
        spec = self.spec
        run_config = spec.get("config") or {}
        configurable = {
            **(run_config.get("configurable") or {}),
            "thread_id": self.thread_id,
            "run_id": spec["run_id"],
            "graph_id": spec["graph_id"],
            "assistant_id": spec["assistant_id"],
        }
        metadata = {
            **(spec.get("metadata") or {}),
            "run_id": spec["run_id"],
            "thread_id": self.thread_id,
            "graph_id": spec["graph_id"],
            "assistant_id": spec["assistant_id"],
            "run_attempt": spec["attempt"],
            # As the official server's, the engine that ran it.
            "langgraph_version": LANGGRAPH_VERSION,
        }
        user = configurable.get("langgraph_auth_user")
        if isinstance(user, dict):
            configurable["langgraph_auth_user"] = User(user)
        config: RunnableConfig = {
            "configurable": configurable,
            "metadata": metadata,
            "recursion_limit": run_config.get("recursion_limit", 25),
            "tags": run_config.get("tags", []),
        }
        if run_config.get("max_concurrency"):
            config["max_concurrency"] = run_config["max_concurrency"]
        if self.spans is not None:
            config["callbacks"] = [self.spans]
        return config

    async def execute(self) -> Outcome:
        spec = self.spec
        config = self.config()
        update = (spec.get("command") or {}).get("update_state")
        # The run's context (its assistant's merged with its own, `{}` when neither has one, so
        # the schema's defaults apply), as the official server hands it to LangGraph.
        context = spec.get("context") or {}
        async with self.project.enter(
            spec["graph_id"],
            config,
            access="threads.update" if update is not None else "threads.create_run",
            store=self.store,
            context=context,
        ) as graph:
            self.graph = graph.copy(update={"checkpointer": self.saver, "store": self.store})
            if update is not None:
                return await self.update_state(update)
            return await self.stream(config, self.project.context_for(graph, context))

    async def stream(self, config: RunnableConfig, context: dict) -> Outcome:
        spec = self.spec
        graph = self.graph
        latest = await graph.aget_state(config)
        if latest.metadata and latest.metadata.get("run_id") == spec["run_id"]:
            # This run saved a checkpoint before (it was drained, or its worker died): go on.
            graph_input = None
            self.undescribed = latest.config["configurable"]["checkpoint_id"]
        elif spec.get("checkpoint_id"):
            # From a past checkpoint (regenerate, edit, time travel): LangGraph forks there.
            config = {
                **config,
                "configurable": {**config["configurable"], "checkpoint_id": spec["checkpoint_id"]},
            }
            graph_input = self.given_input()
        else:
            graph_input = self.given_input()
        wanted = list(spec.get("stream_mode") or ["values"])
        modes = set(wanted) - {"events"}
        # Checkpoints are described to the worker (LangGraph's `values` carry the interrupts).
        modes |= {"checkpoints"}
        subgraphs = bool(spec.get("stream_subgraphs"))
        kwargs = {}
        if spec.get("interrupt_before"):
            kwargs["interrupt_before"] = spec["interrupt_before"]
        if spec.get("interrupt_after"):
            kwargs["interrupt_after"] = spec["interrupt_after"]
        kwargs.update(
            context=context,
            stream_mode=sorted(modes),
            subgraphs=True,
            control=self.control,
            durability=spec.get("durability") or "sync",
        )
        try:
            if thread_events.asked(config):
                await self.protocol_events(graph, graph_input, config, kwargs)
            else:
                if "events" in wanted:
                    chunks = self.with_events(graph, graph_input, config, kwargs)
                else:
                    chunks = graph.astream(graph_input, config, **kwargs)
                async for ns, mode, data in chunks:
                    await self.on_chunk(ns, mode, data, wanted, subgraphs)
        except GraphDrained as drained:
            await self.describe_latest()
            return {"kind": "drained", "reason": drained.reason}
        except BaseException:
            # Failed or cancelled: its last checkpoint is the thread's state (with a failed
            # task's error, saved with it).
            with contextlib.suppress(Exception):
                await self.describe_latest()
            raise
        final = await self.describe_latest()
        if final is None:
            final = {"next": (await graph.aget_state(self.config())).next}
        return {"kind": "interrupted" if final["next"] else "success"}

    async def with_events(self, graph: Pregel, graph_input: Any, config: RunnableConfig, kwargs: dict) -> AsyncIterator[tuple]:
        """The stream's chunks, sending LangChain's callback events (`events`) beside them, as
        the official server streams them: the chunks come out of the graph's own
        `on_chain_stream` events; every other event is sent whole, but those tagged hidden."""
        if self.spec["attempt"] == 1:
            # The run's id is its root callback run's, as on the official server.
            config = {**config, "run_id": self.spec["run_id"]}
        async for event in graph.astream_events(graph_input, config, version="v2", **kwargs):
            if event["event"] == "on_chain_stream" and not event.get("parent_ids"):
                yield event["data"]["chunk"]
            elif "langsmith:hidden" not in (event.get("tags") or ()):
                self.emit("events", event)

    async def protocol_events(self, graph: Pregel, graph_input: Any, config: RunnableConfig, kwargs: dict) -> None:
        """A run of the thread-centric protocol (`run.start`): LangGraph's own v3 events, shaped
        per run as the official server shapes them (`thread_events`), as the run's events."""
        kwargs = {key: value for key, value in kwargs.items() if key not in ("stream_mode", "subgraphs")}
        tap = thread_events.checkpoint_tap(self.checkpoint_seen)
        shaper = thread_events.Shaper(self.spec["run_id"], self.spec["graph_id"], self.emit)
        events = await graph.astream_events(graph_input, config, version="v3", transformers=[tap], **kwargs)
        try:
            async with events:
                async for event in events:
                    shaper.take(event)
        except GraphDrained:
            # The run goes on elsewhere: its subgraphs are not over.
            raise
        except BaseException:
            shaper.finish()
            raise
        shaper.finish()

    def given_input(self) -> Any:
        """The run's input, or its command (a resume, an update, a goto)."""
        command = self.spec.get("command")
        if not command:
            return self.spec.get("input")
        return Command(
            resume=command.get("resume"),
            update=command.get("update"),
            goto=goto(command.get("goto")),
        )

    async def update_state(self, update: dict) -> Outcome:
        """`threads.update_state`: the graph's own reducers apply the values as `as_node` wrote
        them, in a new checkpoint, as the official server does. A refusal (an unknown node, a
        value no channel takes) is reported to the api and changes nothing."""
        spec = self.spec
        # As the official server's: the thread and graph, not the run, are the update's config;
        # the run id makes a retried update (its worker died) apply once.
        config: RunnableConfig = {
            "configurable": {
                "thread_id": self.thread_id,
                "graph_id": spec["graph_id"],
                "checkpoint_ns": "",
                "run_id": spec["run_id"],
            }
        }
        latest = await self.graph.aget_state(config)
        if latest.metadata and latest.metadata.get("run_id") == spec["run_id"]:
            applied = latest.config
        else:
            # From a past checkpoint when the client names one: LangGraph forks the thread there.
            at = config
            if update.get("checkpoint_id"):
                at = {"configurable": {**config["configurable"], "checkpoint_id": update["checkpoint_id"]}}
            try:
                applied = await self.graph.aupdate_state(at, update.get("values"), as_node=update.get("as_node"))
            except SaverFailed:
                raise
            except Exception as err:  # noqa: BLE001 - LangGraph refused the update
                self.emit("update_state", {"error": type(err).__name__, "message": str(err)})
                return {"kind": "interrupted" if latest.next else "success"}
        self.undescribed = applied["configurable"]["checkpoint_id"]
        final = await self.describe_latest()
        self.emit("update_state", checkpoint_json(self.thread_id, applied))
        return {"kind": "interrupted" if final is not None and final["next"] else "success"}

    def checkpoint_seen(self, data: dict) -> None:
        """A root checkpoint of the run's stream: described once its tasks have run."""
        checkpoint_id = data["config"]["configurable"]["checkpoint_id"]
        if checkpoint_id == self.undescribed:
            self.channel.cast(
                "describe",
                checkpoint_id=checkpoint_id,
                snapshot=self.arrived(checkpoint_id, data),
            )

    async def on_chunk(self, ns: tuple, mode: str, data: Any, wanted: list, subgraphs: bool):
        if mode == "checkpoints" and not ns:
            self.checkpoint_seen(data)
        if ns and not subgraphs:
            return
        suffix = "|" + "|".join(ns) if ns else ""
        if mode == "messages":
            # Stored as `[message, metadata]`: the api unfolds them for clients of `messages`.
            if "messages" in wanted:
                self.emit("messages" + suffix, data)
        elif mode in wanted:
            self.emit(mode + suffix, data)

    def emit(self, event: str, data: Any) -> None:
        self.channel.send({"t": "event", "event": event, "data": data})

    async def describe(self, checkpoint_id: str, *, live: bool) -> dict:
        """Describes a checkpoint of the thread for the api, with the states of waiting subgraphs
        (the api leaves them out unless asked). `live`: the thread's latest, as LangGraph shows
        the current state (the writes of tasks that finished applied, `next` only what is left
        to run); otherwise as a record of its step, as history shows it. The snapshot is sent
        without waiting: the worker writes it before anything this run sends after it."""
        configurable = {**self.config()["configurable"], "checkpoint_ns": ""}
        if not live:
            configurable["checkpoint_id"] = checkpoint_id
        state = await self.graph.aget_state({"configurable": configurable}, subgraphs=True)
        snapshot = thread_state(self.thread_id, state)
        self.channel.cast("describe", checkpoint_id=checkpoint_id, snapshot=snapshot)
        return snapshot

    def arrived(self, checkpoint_id: str, data: dict) -> dict:
        """A new checkpoint as LangGraph's `checkpoints` event tells it (values, next, tasks):
        the thread's state until the checkpoint is described with the graph, once its tasks have
        run or at the run's end (a run killed in between keeps this one). It costs no `aget_state`;
        its tasks lack their `path`."""
        saved = self.saver.saved.get(("", checkpoint_id))
        tasks = []
        for task in data.get("tasks", ()):
            state = task.get("state")
            tasks.append(
                {
                    "id": task["id"],
                    "name": task["name"],
                    "path": [],
                    "error": task.get("error"),
                    "interrupts": [interrupt_json(i) for i in task.get("interrupts", ())],
                    "checkpoint": state.get("configurable") if isinstance(state, dict) else None,
                    "state": None,
                    "result": task.get("result"),
                }
            )
        return {
            "values": data.get("values"),
            "next": data.get("next", []),
            "tasks": tasks,
            "metadata": data.get("metadata"),
            "created_at": saved.checkpoint.get("ts") if saved is not None else None,
            "interrupts": [i for task in tasks for i in task["interrupts"]],
        }

    def saving(self, checkpoint_id: str, source: str | None) -> None:
        """LangGraph saves a new checkpoint of the thread: the previous one's tasks have run, so
        it is described now with their results, off LangGraph's path (while the worker writes
        the new one, which is the thread's state until it is described in turn). The input's
        checkpoint waits one more step: the run's first event, the next checkpoint's values,
        goes out first."""
        if source == "input":
            self.input_checkpoint = checkpoint_id
        if self.undescribed is not None:
            self.due.append(self.undescribed)
        self.undescribed = checkpoint_id
        if self.due and self.due != [self.input_checkpoint]:
            self.start_recording()

    def start_recording(self) -> None:
        due, self.due = self.due, []
        self.recording = asyncio.ensure_future(self.record(self.recording, due))

    async def record(self, before: asyncio.Task | None, checkpoint_ids: list[str]) -> None:
        if before is not None:
            await before
        for checkpoint_id in checkpoint_ids:
            try:
                await self.describe(checkpoint_id, live=False)
            except Exception:  # noqa: BLE001 - the checkpoint keeps its state as it arrived
                traceback.print_exc()

    async def describe_latest(self) -> dict | None:
        """At the run's end (or a drain, an error, an update): its last checkpoint, as the
        thread's current state, after the records of the ones before it."""
        if self.due:
            self.start_recording()
        recording, self.recording = self.recording, None
        if recording is not None:
            await recording
        if self.undescribed is None:
            return None
        checkpoint_id, self.undescribed = self.undescribed, None
        return await self.describe(checkpoint_id, live=True)


async def run_one(run: Run) -> None:
    """Executes a run to its end and tells the worker how it ended."""
    # What the graph's code reaches of mostrador is this run's, in this task and those it starts.
    mostrador._run.set(run.link)
    try:
        outcome: Outcome = await run.execute()
    except asyncio.CancelledError:
        outcome = {"kind": "cancelled"}
    except SaverFailed as failed:
        outcome = failure("CheckpointerError", str(failed), retryable=True)
    except MemoryError:
        # Over the runner's memory limit: another process, with its memory whole, tries again
        # from the last checkpoint; this one takes no new run.
        outcome = failure("MemoryError", "the run exceeded the runner's memory limit", retryable=True, retire=True)
    except GraphRecursionError as err:
        outcome = failure("GraphRecursionError", str(err))
    except Exception as err:  # noqa: BLE001 - the user's graph failed: the run ends `error`
        traceback.print_exc()
        outcome = failure(type(err).__name__, str(err))
    run.channel.send({"t": "done", "outcome": outcome})


def failure(error: str, message: str, *, retryable: bool = False, retire: bool = False) -> Outcome:
    return {"kind": "error", "error": error, "message": message, "retryable": retryable, "retire": retire}
