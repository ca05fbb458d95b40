"""What mostrador offers the Python graphs it serves, beside LangGraph's own engine.

The runner that executes a run sets `_run` to the run's link with its worker; the graphs' code
reaches the worker through it (see `mostrador.deepagents`). Outside a run served by mostrador
there is none, and what needs it says so.
"""

from typing import Any

_run: Any = None


def current() -> Any:
    """The running run's link with its worker: `call(op, **args)` (awaited), `call_sync` (from
    a thread other than the run's event loop), `cast(op, **args)`."""
    if _run is None:
        raise RuntimeError("this needs a run served by mostrador (its Python runner)")
    return _run
