"""A run's model calls, tool calls and delegations, as spans the worker exports."""

import os
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler

from .protocol import RunChannel

SPANS = bool(os.environ.pop("MOSTRADOR_RUNNER_SPANS", ""))


class Spans(BaseCallbackHandler):
    """The run's model calls, tool calls and subagent delegations (deepagents' `task` tool), as
    spans the worker exports under the run's own. Each hangs under the nearest of them that
    encloses it: a subagent's calls under its delegation, whatever chains lie between."""

    run_inline = True

    def __init__(self, channel: RunChannel) -> None:
        self.channel = channel
        self.parents: dict[Any, Any] = {}
        self.open: set[Any] = set()

    def _enclosing(self, parent: Any) -> str | None:
        while parent is not None and parent not in self.open:
            parent = self.parents.get(parent)
        return None if parent is None else str(parent)

    def _start(self, run_id: Any, parent: Any, name: str, kind: str, **attributes: str) -> None:
        self.parents[run_id] = parent
        self.open.add(run_id)
        self.channel.cast("span", phase="start", id=str(run_id), parent=self._enclosing(parent), name=name, kind=kind, **attributes)

    def _end(self, run_id: Any, error: BaseException | None = None) -> None:
        self.parents.pop(run_id, None)
        if run_id in self.open:
            self.open.discard(run_id)
            self.channel.cast("span", phase="end", id=str(run_id), error=None if error is None else f"{type(error).__name__}: {error}")

    def on_chain_start(self, serialized: Any, inputs: Any, *, run_id: Any, parent_run_id: Any = None, **kwargs: Any) -> None:
        self.parents[run_id] = parent_run_id

    def on_chain_end(self, outputs: Any, *, run_id: Any, **kwargs: Any) -> None:
        self.parents.pop(run_id, None)

    def on_chain_error(self, error: BaseException, *, run_id: Any, **kwargs: Any) -> None:
        self.parents.pop(run_id, None)

    def on_chat_model_start(self, serialized: Any, messages: Any, *, run_id: Any, parent_run_id: Any = None, **kwargs: Any) -> None:
        params = kwargs.get("invocation_params") or {}
        model = params.get("model") or params.get("model_name") or (kwargs.get("metadata") or {}).get("ls_model_name") or ""
        self._start(run_id, parent_run_id, "model call", "model", model=str(model))

    def on_llm_start(self, serialized: Any, prompts: Any, *, run_id: Any, parent_run_id: Any = None, **kwargs: Any) -> None:
        self._start(run_id, parent_run_id, "model call", "model")

    def on_llm_end(self, response: Any, *, run_id: Any, **kwargs: Any) -> None:
        self._end(run_id)

    def on_llm_error(self, error: BaseException, *, run_id: Any, **kwargs: Any) -> None:
        self._end(run_id, error)

    def on_tool_start(self, serialized: Any, input_str: str, *, run_id: Any, parent_run_id: Any = None, **kwargs: Any) -> None:
        tool = (serialized or {}).get("name") or kwargs.get("name") or ""
        if tool == "task":
            inputs = kwargs.get("inputs") or {}
            self._start(run_id, parent_run_id, "delegation", "delegation", tool=tool, subagent=str(inputs.get("subagent_type", "")))
        else:
            self._start(run_id, parent_run_id, "tool call", "tool", tool=tool)

    def on_tool_end(self, output: Any, *, run_id: Any, **kwargs: Any) -> None:
        self._end(run_id)

    def on_tool_error(self, error: BaseException, *, run_id: Any, **kwargs: Any) -> None:
        self._end(run_id, error)
