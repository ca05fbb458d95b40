"""mostrador's Python runner: executes Python LangGraph graphs for a Rust worker.

The worker starts a few runner processes, with the path of a `langgraph.json`. A runner loads the
graphs once, then executes many runs at once, each an asyncio task, with LangGraph's own engine
(the `langgraph` package of this environment), so the graphs' semantics are LangGraph's. What
surrounds the engine stays with the worker: the claim, the lease and its heartbeat, the events'
log, drain and cancel, and every database write. A run's checkpointer is a `MostradorSaver` of its
own, whose reads and writes the worker executes in Postgres, fenced by the run's lease; its store
is `MostradorStore`, the Store's items of the thread's owner. The graphs may import `mostrador`
(written beside this script): its `deepagents` module reaches the worker through the run's `Link`.

The protocol is one JSON object per line on the runner's original stdin and stdout, which it
keeps for itself: user code that prints writes to stderr, and reads nothing from stdin. Every
message of a run carries the run's number in this process (`"run": n`), chosen by the worker.

worker -> runner: {"t": "start", "run": n, "spec": {...}}, {"t": "reply", "id": n, "result" |
                  "error": ...}, {"t": "drain", "run": n, "reason": str}, {"t": "cancel",
                  "run": n}, {"t": "describe"}
runner -> worker: {"t": "ready", "graphs": [...]} once loaded; for a run: {"t": "call", "id": n,
                  "op": ...} (ids unique in the process) for the saver's reads and checkpoints,
                  the store's operations (`store`), and what deep agents ask (`files`,
                  `execute`, `subagent`: `mostrador.deepagents`), {"t": "cast", "op": ...} for
                  what needs no answer (a task's writes, the snapshots of checkpoints,
                  `subagent_done`, `span`), {"t": "event", "event": name, "data": ...} for the
                  stream, {"t": "done", "outcome": ..., ...} when the run ends, {"t":
                  "blocked", "seconds": s} when its task has held the event loop that long (the
                  run unknown: `"run": null`); and {"t": "described", "graphs": {id: {"name",
                  "schemas", "graph", "subgraphs"} | {"error"}}}.

The worker handles a run's messages in the order they were sent, so a cast is written before
anything the run sent after it (a call that takes long, `execute` or a wait for a `subagent` slot,
is answered when done, and others' answers may come before it); if it cannot be written, the
worker ends the run (the run is retried from its last checkpoint) instead of answering.

Modules: `protocol` (the channel and its messages), `checkpointer` and `store` (LangGraph's
checkpointer and store, answered by the worker), `project` (the `langgraph.json` and its graphs),
`describe` (the graphs described for the api), `run` (one run), `state` and `encoding` (JSON as
the official server writes it), `spans`, and `main` (the process). `runner.py`, beside the
package, starts it.
"""
