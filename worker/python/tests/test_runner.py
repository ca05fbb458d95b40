"""What the runner does without a worker: its project's loading as `langgraph dev` does it, and
its channel's routing of replies to the runs that wait for them."""

import asyncio
import os
from pathlib import Path

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph_sdk.runtime import ServerRuntime

from mostrador_runner import protocol
from mostrador_runner.config import _env_file
from mostrador_runner.project import Project, factory_arguments


def test_an_env_file_is_read_as_dotenv_reads_it(tmp_path: Path) -> None:
    env = tmp_path / ".env"
    env.write_text('# a comment\nexport A=1\nB="two words"\nC=three # trailing\n\nnot a line\n')
    assert dict(_env_file(str(env))) == {"A": "1", "B": "two words", "C": "three"}


def test_a_project_loads_its_python_graphs_and_leaves_its_javascript_ones_to_node(tmp_path: Path) -> None:
    (tmp_path / "agent.py").write_text(
        "from langgraph.graph import StateGraph, START, END\n"
        "from typing import TypedDict\n"
        "class S(TypedDict):\n    x: int\n"
        "graph = StateGraph(S).add_node('n', lambda s: s).add_edge(START, 'n').add_edge('n', END).compile()\n"
    )
    config = {
        "_base": str(tmp_path),
        "graphs": {
            "py": "./agent.py:graph",
            "ts": "./src/agent.ts:graph",
            "mjs": {"path": "./src/agent.mjs:graph", "description": "a module"},
        },
    }
    assert Project(config).ids() == ["py"]


def test_a_factory_is_called_as_the_official_server_calls_it() -> None:
    def none():
        return None

    def config(config: RunnableConfig):
        return config

    def runtime(runtime: ServerRuntime):
        return runtime

    def both(runtime: ServerRuntime, config: RunnableConfig):
        return runtime, config

    assert factory_arguments(none)("c", "r") == {}
    assert factory_arguments(config)("c", "r") == {"config": "c"}
    assert factory_arguments(runtime)("c", "r") == {"runtime": "r"}
    assert factory_arguments(both)("c", "r") == {"runtime": "r", "config": "c"}

    def three(a, b, c):
        return None

    with pytest.raises(TypeError):
        factory_arguments(three)


def test_replies_reach_the_call_that_waits_for_them_whatever_its_run() -> None:
    """Calls of two runs wait at once; the worker answers them out of order, one with an
    error: each call gets its own answer."""
    _, out_write = os.pipe()
    in_read, in_write = os.pipe()

    async def exchange() -> tuple:
        channel = protocol.Channel(os.fdopen(out_write, "wb", buffering=0), in_read)
        reading = asyncio.ensure_future(channel.read())
        first = asyncio.ensure_future(protocol.RunChannel(channel, 1).call("get", ns="", checkpoint_id=None))
        second = asyncio.ensure_future(protocol.RunChannel(channel, 2).call("get", ns="", checkpoint_id=None))
        await asyncio.sleep(0.01)
        os.write(in_write, b'{"t": "reply", "id": 2, "result": "for the second"}\n')
        os.write(in_write, b'{"t": "reply", "id": 1, "result": null, "error": "failed"}\n')
        answered = await asyncio.gather(first, second, return_exceptions=True)
        reading.cancel()
        return answered

    first, second = asyncio.run(exchange())
    assert isinstance(first, protocol.SaverFailed) and str(first) == "failed"
    assert second == "for the second"
