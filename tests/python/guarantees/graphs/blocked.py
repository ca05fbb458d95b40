"""`first`, then a node blocked for ten minutes, then `last`; the input's `mode` picks how it
blocks: `sleep_sync` (`time.sleep` in a sync node, on LangGraph's thread pool), `sleep_async`
(awaiting `asyncio.sleep`) or `block_loop` (`time.sleep` in an async node: the runner's event
loop itself is blocked, so only killing its process stops it).
"""

import asyncio
import operator
import time
from typing import Annotated, Any

from typing_extensions import TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from record import record

BLOCKED_SECONDS = 600


class State(TypedDict, total=False):
    mode: str
    log: Annotated[list[str], operator.add]


def first(state: State, config: RunnableConfig) -> dict[str, Any]:
    record(config, "first", "start")
    record(config, "first", "finish")
    return {"log": ["first"]}


def sleep_sync(state: State, config: RunnableConfig) -> dict[str, Any]:
    record(config, "sleep_sync", "start")
    time.sleep(BLOCKED_SECONDS)
    record(config, "sleep_sync", "finish")
    return {"log": ["sleep_sync"]}


async def sleep_async(state: State, config: RunnableConfig) -> dict[str, Any]:
    record(config, "sleep_async", "start")
    await asyncio.sleep(BLOCKED_SECONDS)
    record(config, "sleep_async", "finish")
    return {"log": ["sleep_async"]}


async def block_loop(state: State, config: RunnableConfig) -> dict[str, Any]:
    record(config, "block_loop", "start")
    time.sleep(BLOCKED_SECONDS)  # noqa: ASYNC251 - the point: the event loop is blocked
    record(config, "block_loop", "finish")
    return {"log": ["block_loop"]}


def last(state: State, config: RunnableConfig) -> dict[str, Any]:
    record(config, "last", "start")
    record(config, "last", "finish")
    return {"log": ["last"]}


MODES = ["sleep_sync", "sleep_async", "block_loop"]

builder = StateGraph(State)
builder.add_node("first", first)
for mode, node in zip(MODES, [sleep_sync, sleep_async, block_loop]):
    builder.add_node(mode, node)
    builder.add_edge(mode, "last")
builder.add_node("last", last)
builder.add_edge(START, "first")
builder.add_conditional_edges("first", lambda state: state["mode"], MODES)
builder.add_edge("last", END)
graph = builder.compile()
