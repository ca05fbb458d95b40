"""What mostrador offers the Python graphs it serves, beside LangGraph's own engine.

The runner sets `_run` to a run's link with its worker in the run's task (a runner executes many
runs at once, each in a task of its own, and what the task starts inherits its link); the graphs'
code reaches the worker through it (see `mostrador.deepagents`). Outside a run served by
mostrador there is none, and what needs it says so.
"""

import contextvars
from typing import Any

_run: contextvars.ContextVar[Any] = contextvars.ContextVar("mostrador_run", default=None)


def current() -> Any:
    """The running run's link with its worker: `call(op, **args)` (awaited), `call_sync` (from
    a thread other than the run's event loop), `cast(op, **args)`."""
    run = _run.get()
    if run is None:
        raise RuntimeError("this needs a run served by mostrador (its Python runner)")
    return run
