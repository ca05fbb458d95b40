"""Six nodes in a line, `s1 -> ... -> s6`, each appending its name to `log`.

The node named by the input's `hold` waits before it finishes: for a drain of its run
(LangGraph's `Runtime.drain_requested`, set when the worker relays SIGTERM) or for its thread's
gate. So the driver SIGTERMs a worker, or kills a runner, while that node is in flight.
"""

import operator
from collections.abc import Callable
from typing import Annotated, Any

from typing_extensions import TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from record import record, wait_for_gate


class State(TypedDict, total=False):
    hold: str
    log: Annotated[list[str], operator.add]


def make_node(name: str) -> Callable[..., dict[str, Any]]:
    def node(state: State, config: RunnableConfig, runtime: Runtime) -> dict[str, Any]:
        record(config, name, "start")
        if state.get("hold") == name:
            wait_for_gate(config, lambda: runtime.drain_requested)
        record(config, name, "finish")
        return {"log": [name]}

    node.__name__ = name
    return node


NAMES = [f"s{i}" for i in range(1, 7)]

builder = StateGraph(State)
for name in NAMES:
    builder.add_node(name, make_node(name))
builder.add_edge(START, NAMES[0])
for a, b in zip(NAMES, NAMES[1:]):
    builder.add_edge(a, b)
builder.add_edge(NAMES[-1], END)
graph = builder.compile()
