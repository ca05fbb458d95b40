"""One superstep of two parallel tasks, `fast` and `slow`, then `join`.

`fast` returns at once (LangGraph saves its pending write while `slow` runs); `slow` waits for
its thread's gate, so the driver kills the worker while `slow` is in flight.
"""

from typing import Any

from typing_extensions import TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from record import record, wait_for_gate


class State(TypedDict, total=False):
    fast: str
    slow: str
    joined: str


def fast(state: State, config: RunnableConfig) -> dict[str, Any]:
    record(config, "fast", "start")
    record(config, "fast", "finish")
    return {"fast": "fast done"}


def slow(state: State, config: RunnableConfig) -> dict[str, Any]:
    record(config, "slow", "start")
    wait_for_gate(config)
    record(config, "slow", "finish")
    return {"slow": "slow done"}


def join(state: State, config: RunnableConfig) -> dict[str, Any]:
    record(config, "join", "start")
    record(config, "join", "finish")
    return {"joined": f"{state['fast']} + {state['slow']}"}


builder = StateGraph(State)
builder.add_node("fast", fast)
builder.add_node("slow", slow)
builder.add_node("join", join)
builder.add_edge(START, "fast")
builder.add_edge(START, "slow")
builder.add_edge(["fast", "slow"], "join")
builder.add_edge("join", END)
graph = builder.compile()
