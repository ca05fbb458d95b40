"""A project's `langgraph.json` and its graphs, loaded as `langgraph dev` loads them."""

import contextlib
import importlib.util
import inspect
import os
import sys
from collections.abc import AsyncIterator, Callable
from typing import Any, Literal

from langchain_core.runnables import RunnableConfig
from langgraph.pregel import Pregel
from langgraph.store.base import BaseStore

from .config import load_config as load_config
from .index import load_index

# What a graph is entered for, as the official server's `ServerRuntime` names it.
Access = Literal["threads.create_run", "threads.update", "threads.read", "assistants.read"]


JS_SUFFIXES = (".ts", ".mts", ".cts", ".tsx", ".js", ".mjs", ".cjs", ".jsx")


def is_javascript(spec: str | dict) -> bool:
    """A graph of the project's JavaScript (`./src/graph.ts:graph`), as the official CLI tells."""
    path: str = spec["path"] if isinstance(spec, dict) else spec
    return path.rpartition(":")[0].endswith(JS_SUFFIXES)


def load_graph(base: str, graph_id: str, spec: str | dict) -> Any:
    """What `langgraph.json` names: `./file.py:attr` (a file of the project) or `pkg.module:attr`
    (a module on the path). A builder is compiled once, here, as officially."""
    path: str = spec["path"] if isinstance(spec, dict) else spec
    location, _, attr = path.rpartition(":")
    if location.endswith(".py") or "/" in location:
        path = os.path.normpath(os.path.join(base, location))
        folder = os.path.dirname(path)
        if folder not in sys.path:
            sys.path.insert(0, folder)
        module_spec = importlib.util.spec_from_file_location(f"mostrador_graphs.{graph_id}", path)
        if module_spec is None or module_spec.loader is None:
            raise ImportError(f"graph {graph_id!r}: {path} is not a Python file")
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[module_spec.name] = module
        module_spec.loader.exec_module(module)
    else:
        module = importlib.import_module(location)
    obj = module
    for part in attr.split("."):
        obj = getattr(obj, part)
    if not isinstance(obj, Pregel) and hasattr(obj, "compile") and callable(obj.compile):
        obj = obj.compile()
    return obj


def _is_server_runtime(annotation: Any) -> bool:
    """Whether a factory's parameter is annotated `ServerRuntime` (bare, parameterized,
    `Annotated`, or one of its variants)."""
    import typing

    if annotation is inspect.Parameter.empty or _SERVER_RUNTIME is None:
        return False
    alias, variants = _SERVER_RUNTIME
    if annotation is alias:
        return True
    if isinstance(annotation, type):
        return issubclass(annotation, variants)
    origin = typing.get_origin(annotation)
    if origin is None:
        return False
    if origin is alias:
        return True
    args = typing.get_args(annotation)
    return bool(args) and _is_server_runtime(args[0])


try:
    from langgraph_sdk.runtime import ServerRuntime, _ExecutionRuntime, _ReadRuntime

    _SERVER_RUNTIME: tuple | None = (ServerRuntime, (_ExecutionRuntime, _ReadRuntime))
except ImportError:  # pragma: no cover - an SDK before ServerRuntime: factories take config
    _SERVER_RUNTIME = None


def factory_arguments(factory: Callable) -> Callable[[RunnableConfig, Any], dict]:
    """How the official server calls a graph factory, from its parameters: none; one, the
    config, or the `ServerRuntime` when so annotated; two, the config and the runtime (by name,
    in either order). Anything else is refused when the project loads."""
    import typing

    parameters = list(inspect.signature(factory).parameters.values())
    try:
        hints = typing.get_type_hints(
            factory,
            localns={
                "ServerRuntime": _SERVER_RUNTIME[0] if _SERVER_RUNTIME else None,
                "RunnableConfig": RunnableConfig,
                "Config": RunnableConfig,
            },
        )
    except Exception:  # noqa: BLE001 - an annotation that cannot be resolved names no runtime
        hints = {}
    runtime = [p.name for p in parameters if _is_server_runtime(hints.get(p.name, p.annotation))]
    names = [p.name for p in parameters]
    if not names:
        return lambda config, server_runtime: {}
    if len(names) == 1:
        if runtime:
            return lambda config, server_runtime: {names[0]: server_runtime}
        return lambda config, server_runtime: {names[0]: config}
    if len(names) == 2 and len(runtime) == 1:
        (config_name,) = [name for name in names if name != runtime[0]]
        return lambda config, server_runtime: {runtime[0]: server_runtime, config_name: config}
    raise TypeError(
        f"graph factory {getattr(factory, '__qualname__', factory)} must take no argument, the "
        f"config, a ServerRuntime, or both (got {names})"
    )


class Project:
    """The graphs of a `langgraph.json`, loaded once; each run or description enters its own
    graph, as the official server does: a compiled graph as it is, a factory called with the
    run's config and a `ServerRuntime` (its `context` for a run), entered when it gives a
    context manager and left when the run ends."""

    def __init__(self, config: dict) -> None:
        self.values: dict[str, Any] = {}
        self.arguments: dict[str, Callable] = {}
        self.store_ttl: dict | None = (config.get("store") or {}).get("ttl")
        self.store_index = load_index(config)
        self._context_keys: dict[Any, frozenset | None] = {}
        for graph_id, spec in config.get("graphs", {}).items():
            if is_javascript(spec):
                # Run by the JavaScript runner (`worker/js/`), beside this one.
                continue
            value = load_graph(config["_base"], graph_id, spec)
            if not isinstance(value, Pregel):
                if not callable(value):
                    raise TypeError(f"graph {graph_id!r}: {type(value).__name__} is not a graph or a graph factory")
                self.arguments[graph_id] = factory_arguments(value)
            self.values[graph_id] = value

    def __contains__(self, graph_id: str) -> bool:
        return graph_id in self.values

    def ids(self) -> list[str]:
        return sorted(self.values)

    @contextlib.asynccontextmanager
    async def enter(
        self,
        graph_id: str,
        config: RunnableConfig,
        *,
        access: Access,
        store: BaseStore | None = None,
        context: dict | None = None,
    ) -> AsyncIterator[Pregel]:
        """The graph `graph_id` for `access` (`threads.create_run`, `threads.update`,
        `threads.read`, `assistants.read`), named after its id unless its code named it."""
        value = self.values[graph_id]
        if graph_id in self.arguments:
            value = value(**self.arguments[graph_id](config, self._server_runtime(config, access, store, context)))
        async with _entered(value) as made:
            if not isinstance(made, Pregel) and hasattr(made, "compile") and callable(made.compile):
                made = made.compile()
            if not isinstance(made, Pregel):
                raise TypeError(f"graph {graph_id!r} gave {type(made).__name__}, not a graph")
            yield made.copy(update={"name": graph_id}) if made.name == "LangGraph" else made

    @staticmethod
    def _server_runtime(config: RunnableConfig, access: Access, store: Any, context: dict | None) -> Any:
        if _SERVER_RUNTIME is None:
            return None
        user = (config.get("configurable") or {}).get("langgraph_auth_user")
        if access == "threads.create_run":
            return _ExecutionRuntime(access_context=access, user=user, store=store, context=context)
        return _ReadRuntime(access_context=access, user=user, store=store)

    def context_for(self, graph: Pregel, context: dict) -> dict:
        """The run's context as the graph takes it: the keys its context schema declares, when it
        declares some (the official server drops the others, so a dataclass is not handed a key it
        has no field for)."""
        if not context:
            return context
        schema = graph.context_schema
        if schema not in self._context_keys:
            keys = None
            with contextlib.suppress(Exception):
                properties = (graph.get_context_jsonschema() or {}).get("properties")
                keys = frozenset(properties) if properties else None
            self._context_keys[schema] = keys
        keys = self._context_keys[schema]
        return context if keys is None else {k: v for k, v in context.items() if k in keys}


@contextlib.asynccontextmanager
async def _entered(value: Any) -> AsyncIterator[Any]:
    """What a factory gave: awaited if a coroutine, entered if a context manager."""
    if inspect.isawaitable(value) and not hasattr(value, "__aenter__"):
        value = await value
    if hasattr(value, "__aenter__") and hasattr(value, "__aexit__"):
        async with value as entered:
            yield entered
    elif hasattr(value, "__enter__") and hasattr(value, "__exit__"):
        with value as entered:
            yield entered
    else:
        yield value
