"""Graphs described for the api: their schemas, drawings and subgraphs, as the official server
answers `assistants.get_schemas`, `get_graph` and `get_subgraphs`."""

import sys
import traceback
from typing import Any

from langgraph.pregel import Pregel

from .encoding import jsonable
from .project import Project
from .protocol import Channel

_SERVER_CONFIGURABLE = (
    "__pregel_checkpointer",
    "__pregel_store",
    "checkpoint_id",
    "checkpoint_ns",
    "thread_id",
)


def _or_none(what: str, compute: Any) -> Any:
    import warnings

    try:
        with warnings.catch_warnings():
            # `config_schema` is deprecated, and still what the official server reads.
            warnings.simplefilter("ignore", DeprecationWarning)
            return compute()
    except Exception as err:  # noqa: BLE001 - a schema the graph cannot give is absent
        print(f"mostrador runner: no {what} (as on the official server): {err!r}", file=sys.stderr)
        return None


def _config_schema(graph: Pregel) -> dict:
    from pydantic import TypeAdapter

    config_schema = graph.config_schema()
    fields = getattr(config_schema, "model_fields", None) or getattr(config_schema, "__fields__", None)
    if fields is None or "configurable" not in fields:
        return {}
    schema = TypeAdapter(fields["configurable"].annotation).json_schema()
    if schema:
        for key in _SERVER_CONFIGURABLE:
            schema.get("properties", {}).pop(key, None)
    config_type = getattr(graph, "config_type", None)
    if config_type is not None and hasattr(config_type, "__name__"):
        schema["title"] = config_type.__name__
    return schema


def _state_schema(graph: Pregel) -> dict:
    from langchain_core.runnables.utils import create_model

    fields: dict = {}
    for key in graph.stream_channels_list:
        update_type = getattr(graph.channels[key], "UpdateType", Any)
        try:
            create_model(key, __root__=(update_type, None)).model_json_schema()
            fields[key] = (update_type, None)
        except Exception:  # noqa: BLE001 - a type pydantic cannot describe is any value
            fields[key] = (Any, None)
    return create_model(graph.get_name("State"), **fields).model_json_schema()


def schemas(graph: Any) -> dict:
    return jsonable(
        {
            "input_schema": _or_none("input schema", graph.get_input_jsonschema),
            "output_schema": _or_none("output schema", graph.get_output_jsonschema),
            "state_schema": _or_none("state schema", lambda: _state_schema(graph)),
            "config_schema": _or_none("config schema", lambda: _config_schema(graph)),
            "context_schema": _or_none("context schema", graph.get_context_jsonschema),
        }
    )


def drawing(graph: Pregel, xray: bool | int) -> dict | None:
    try:
        drawn = graph.get_graph(xray=xray).to_json()
    except NotImplementedError:
        return None
    for node in drawn.get("nodes", []):
        if isinstance(node.get("data"), dict):
            node["data"].pop("id", None)
    return jsonable(drawn)


async def describe(project: Project, graph_id: str) -> dict:
    """What the api serves about a graph: the assistant's name (a compiled graph's own `name`,
    as the official server names its assistant), schemas, its drawings (`xray` false, 1 to the
    depth of its subgraphs, true) and the schemas of every subgraph by namespace
    (`parent|child`)."""
    value = project.values[graph_id]
    name = value.name if isinstance(value, Pregel) and value.name != "LangGraph" else graph_id
    async with project.enter(graph_id, {"configurable": {}}, access="assistants.read") as graph:
        subgraphs = {ns: schemas(sub) for ns, sub in graph.get_subgraphs(recurse=True)}
        depth = max((ns.count("|") + 1 for ns in subgraphs), default=0)
        return {
            "name": name,
            "schemas": schemas(graph),
            "graph": {
                "false": drawing(graph, False),
                **{str(level): drawing(graph, level) for level in range(1, depth)},
                "true": drawing(graph, True),
            },
            "subgraphs": subgraphs,
        }


async def describe_all(channel: Channel, project: Project) -> None:
    described = {}
    for graph_id in project.ids():
        try:
            described[graph_id] = await describe(project, graph_id)
        except Exception as err:  # noqa: BLE001 - e.g. a factory that needs a run
            traceback.print_exc()
            described[graph_id] = {"error": f"{type(err).__name__}: {err}"}
    channel.send({"t": "described", "graphs": described})
