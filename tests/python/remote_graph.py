"""RemoteGraph (`langgraph.pregel.remote`) against a server, as its users drive it: invoke, stream
with subgraphs, get_state, update_state, get_state_history on a thread the client names, and a
RemoteGraph used as a node of a local graph. Exits 1 at the first answer that is not LangGraph's.

    python remote_graph.py --url http://127.0.0.1:8125 --header 'Authorization: Bearer X'
"""

import argparse
import operator
import sys
import uuid
from typing import Annotated, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.pregel.remote import RemoteGraph

LINE = ["n1", "n2", "n3", "n4", "n5", "n6"]


def check(what: str, got, expected) -> None:
    if got != expected:
        print(f"FAILED {what}\n  expected: {expected!r}\n  got:      {got!r}")
        sys.exit(1)
    print(f"ok     {what}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--header", action="append", default=[])
    args = parser.parse_args()
    headers = dict(h.split(": ", 1) for h in args.header)

    line = RemoteGraph("linear6", url=args.url, headers=headers)
    # A thread id the client chooses: RemoteGraph creates it with its first run.
    config = {"configurable": {"thread_id": str(uuid.uuid4())}}
    check("invoke on a new client-named thread", line.invoke({"path": []}, config), {"path": LINE})
    state = line.get_state(config)
    check("get_state: values", state.values, {"path": LINE})
    check("get_state: next", state.next, ())
    updated = line.update_state(config, {"path": ["edited"]})
    check("update_state: a new checkpoint", bool(updated["configurable"]["checkpoint_id"]), True)
    check("get_state after update_state", line.get_state(config).values, {"path": [*LINE, "edited"]})
    history = list(line.get_state_history(config))
    check("get_state_history: newest first", history[0].values, {"path": [*LINE, "edited"]})
    check("get_state_history: to the input", history[-1].next, ("__start__",))
    at = line.get_state(history[1].config)
    check("get_state at a past checkpoint", at.values, history[1].values)

    parent = RemoteGraph("parent", url=args.url, headers=headers)
    thread = {"configurable": {"thread_id": str(uuid.uuid4())}}
    chunks = list(parent.stream({"value": "x"}, thread, stream_mode="updates", subgraphs=True))
    namespaces = sorted({ns[0].split(":")[0] for ns, _ in chunks if ns})
    check("stream with subgraphs: the subgraph's updates, namespaced", namespaces, ["child"])
    check("stream with subgraphs: the parent's last update", chunks[-1], ((), {"finish": {"log": ["finish:x-p-a-b"]}}))

    class Local(TypedDict, total=False):
        path: Annotated[list[str], operator.add]

    def before(state: Local) -> dict:
        return {"path": ["local"]}

    builder = StateGraph(Local)
    builder.add_node("before", before)
    builder.add_node("remote", RemoteGraph("linear6", url=args.url, headers=headers))
    builder.add_edge(START, "before")
    builder.add_edge("before", "remote")
    builder.add_edge("remote", END)
    local = builder.compile()
    # The remote node gets the local state and returns its own: the reducer adds both.
    check(
        "a RemoteGraph as a node of a local graph",
        local.invoke({"path": []}),
        {"path": ["local", "local", *LINE]},
    )
    print("RemoteGraph against the server: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
