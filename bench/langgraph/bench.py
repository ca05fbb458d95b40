"""LangGraph 1.2 with PostgresSaver and durability="sync" on the two engine workloads.

Run by bench/engine-vs-langgraph (which creates the virtual environment); prints one line:
"langgraph: <supersteps/s> supersteps/s, fan-out <ms> ms/run". Asserts the final states that
queue-bench's engine scenarios assert for mostrador.
"""

import operator
import sys
import time
import uuid
from typing import Annotated, TypedDict

import psycopg
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.graph import START, StateGraph
from langgraph.types import Send


class Linear(TypedDict):
    log: Annotated[list, operator.add]


class FanOut(TypedDict):
    results: Annotated[list, operator.add]


def linear_graph(saver):
    builder = StateGraph(Linear)
    for i in range(1, 7):
        name = f"n{i}"
        builder.add_node(name, lambda state, name=name: {"log": [name]})
    builder.add_edge(START, "n1")
    for i in range(1, 6):
        builder.add_edge(f"n{i}", f"n{i + 1}")
    return builder.compile(checkpointer=saver)


def fanout_graph(saver):
    builder = StateGraph(FanOut)
    builder.add_node("work", lambda arg: {"results": [arg]})
    builder.add_conditional_edges(START, lambda state: [Send("work", {"item": i}) for i in range(50)])
    return builder.compile(checkpointer=saver)


def main():
    url, runs = sys.argv[1], int(sys.argv[2])
    with psycopg.connect(url.rsplit("/", 1)[0] + "/postgres", autocommit=True) as admin:
        db = url.rsplit("/", 1)[1]
        admin.execute(f'drop database if exists "{db}" with (force)')
        admin.execute(f'create database "{db}"')
    with PostgresSaver.from_conn_string(url) as saver:
        saver.setup()
        linear = linear_graph(saver)
        start = time.perf_counter()
        for _ in range(runs):
            config = {"configurable": {"thread_id": str(uuid.uuid4())}}
            linear_final = linear.invoke({"log": []}, config, durability="sync")
        linear_rate = runs * 6 / (time.perf_counter() - start)

        fanout = fanout_graph(saver)
        fan_runs = max(runs // 5, 1)
        start = time.perf_counter()
        for _ in range(fan_runs):
            config = {"configurable": {"thread_id": str(uuid.uuid4())}, "max_concurrency": 24}
            fanout_final = fanout.invoke({"results": []}, config, durability="sync")
        fanout_ms = (time.perf_counter() - start) * 1000 / fan_runs

    assert linear_final == {"log": [f"n{i}" for i in range(1, 7)]}, linear_final
    assert fanout_final == {"results": [{"item": i} for i in range(50)]}, fanout_final
    print(f"langgraph: {linear_rate:.0f} supersteps/s, fan-out {fanout_ms:.1f} ms/run")

if __name__ == "__main__":
    main()
