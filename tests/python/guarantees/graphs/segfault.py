"""`before`, then `crash`, which dereferences a null pointer: its runner process dies of SIGSEGV
(with `once` in the input, on the run's first attempt only)."""

import ctypes
import operator
from typing import Annotated, Any

from typing_extensions import TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from record import record


class State(TypedDict, total=False):
    once: bool
    log: Annotated[list[str], operator.add]


def before(state: State, config: RunnableConfig) -> dict[str, Any]:
    record(config, "before", "start")
    record(config, "before", "finish")
    return {"log": ["before"]}


def crash(state: State, config: RunnableConfig) -> dict[str, Any]:
    record(config, "crash", "start")
    if not state.get("once") or (config.get("metadata") or {}).get("run_attempt") == 1:
        ctypes.string_at(0)
    record(config, "crash", "finish")
    return {"log": ["crash"]}


builder = StateGraph(State)
builder.add_node("before", before)
builder.add_node("crash", crash)
builder.add_edge(START, "before")
builder.add_edge("before", "crash")
builder.add_edge("crash", END)
graph = builder.compile()
