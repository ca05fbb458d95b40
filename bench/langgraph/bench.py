"""LangGraph 1.2 with PostgresSaver and durability="sync" on the two engine workloads.

Run by bench/engine-vs-langgraph (which creates the virtual environment); prints one line:
"langgraph: <supersteps/s> supersteps/s, fan-out <ms> ms/run". Asserts the final states that
queue-bench's engine scenarios assert for mostrador.

With a third argument, the path of bench/servers/linear.py, it also runs that file's graphs (the
Python graphs mostrador's workers run in `queue-bench --scenarios python-linear,python-linear1`)
with the same saver, one warm-up run each first, and prints a second line:
"langgraph linear.py: <supersteps/s> supersteps/s, linear1 <ms> ms/run".
"""

import importlib.util

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


def file_graphs(path, saver, runs):
    """Supersteps/s of the file's `linear6` and ms/run of its `linear1`, compiled with `saver`."""
    spec = importlib.util.spec_from_file_location("bench_linear", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    per_run = {}
    for steps in (6, 1):
        graph = module.linear(steps).compile(checkpointer=saver)
        expected = {"path": [f"n{i}" for i in range(1, steps + 1)]}
        for timed in (False, True):
            start = time.perf_counter()
            for _ in range(runs if timed else 1):
                config = {"configurable": {"thread_id": str(uuid.uuid4())}}
                final = graph.invoke({"path": []}, config, durability="sync")
                assert final == expected, final
        per_run[steps] = (time.perf_counter() - start) / runs
    return 6 / per_run[6], per_run[1] * 1000


def main():
    url, runs = sys.argv[1], int(sys.argv[2])
    linear_file = sys.argv[3] if len(sys.argv) > 3 else None
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

        if linear_file:
            file_rate, file_linear1_ms = file_graphs(linear_file, saver, runs)

    assert linear_final == {"log": [f"n{i}" for i in range(1, 7)]}, linear_final
    assert fanout_final == {"results": [{"item": i} for i in range(50)]}, fanout_final
    print(f"langgraph: {linear_rate:.0f} supersteps/s, fan-out {fanout_ms:.1f} ms/run")
    if linear_file:
        print(f"langgraph linear.py: {file_rate:.0f} supersteps/s, linear1 {file_linear1_ms:.2f} ms/run")

if __name__ == "__main__":
    main()
