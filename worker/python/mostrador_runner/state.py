"""A thread's state and a command as the official server writes and reads them."""

from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.types import Send, StateSnapshot


def goto(value: Any) -> Any:
    """A command's `goto` as the SDKs send it: node names, or `{"node", "input"}` for a Send."""
    if value is None:
        return ()
    if isinstance(value, dict):
        return Send(value["node"], value.get("input"))
    if isinstance(value, list):
        return [goto(item) for item in value]
    return value


def checkpoint_json(thread_id: str, config: RunnableConfig | None) -> dict | None:
    if not config or not config.get("configurable", {}).get("checkpoint_id"):
        return None
    configurable = config["configurable"]
    found = {
        "checkpoint_id": configurable["checkpoint_id"],
        "thread_id": thread_id,
        "checkpoint_ns": configurable.get("checkpoint_ns", ""),
    }
    if "checkpoint_map" in configurable:
        found["checkpoint_map"] = configurable["checkpoint_map"]
    return found


def interrupt_json(interrupt: Any) -> dict:
    if isinstance(interrupt, dict):
        return {"id": interrupt.get("id"), "value": interrupt.get("value")}
    return {"id": interrupt.id, "value": interrupt.value}


def thread_state(thread_id: str, state: StateSnapshot) -> dict:
    """A state snapshot as the official server answers it (`ThreadState`), for `dumps`."""
    return {
        "values": state.values,
        "next": state.next,
        "tasks": [
            {
                "id": task.id,
                "name": task.name,
                "path": task.path,
                "error": task.error,
                "interrupts": [interrupt_json(i) for i in task.interrupts],
                "checkpoint": task.state["configurable"] if task.state is not None and not isinstance(task.state, StateSnapshot) else None,
                "state": thread_state(thread_id, task.state) if isinstance(task.state, StateSnapshot) else None,
                "result": getattr(task, "result", None),
            }
            for task in state.tasks
        ],
        "metadata": state.metadata,
        "created_at": state.created_at,
        "checkpoint": checkpoint_json(thread_id, state.config),
        "parent_checkpoint": checkpoint_json(thread_id, state.parent_config),
        "interrupts": [interrupt_json(i) for i in getattr(state, "interrupts", ())],
        "checkpoint_id": (state.config or {}).get("configurable", {}).get("checkpoint_id"),
        "parent_checkpoint_id": (state.parent_config or {}).get("configurable", {}).get("checkpoint_id"),
    }
