"""`before`, then `leak`, which leaks memory until its process has none left.

Bounded so that it cannot harm the machine: the node first caps its process's address space
(`RLIMIT_AS`) at what it uses plus `LEAK_BUDGET`, as a container's memory limit would, then keeps
every megabyte it allocates in a module-level list (a leak outlives the run that made it).
"""

import operator
import resource
from typing import Annotated, Any

from typing_extensions import TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from record import record


class State(TypedDict, total=False):
    log: Annotated[list[str], operator.add]


LEAK_BUDGET = 256 << 20
LEAKED: list[bytearray] = []


def address_space() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmSize in /proc/self/status")


def before(state: State, config: RunnableConfig) -> dict[str, Any]:
    record(config, "before", "start")
    record(config, "before", "finish")
    return {"log": ["before"]}


def leak(state: State, config: RunnableConfig) -> dict[str, Any]:
    record(config, "leak", "start")
    cap = address_space() + LEAK_BUDGET
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    while True:
        LEAKED.append(bytearray(1 << 20))


builder = StateGraph(State)
builder.add_node("before", before)
builder.add_node("leak", leak)
builder.add_edge(START, "before")
builder.add_edge("before", "leak")
builder.add_edge("leak", END)
graph = builder.compile()
