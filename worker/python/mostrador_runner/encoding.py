"""JSON as the official server writes it: objects LangGraph and LangChain hand over (messages,
Sends, exceptions, dataclasses) become what a client of the official server would read."""

import base64
import json
from typing import Any

from langgraph.types import Send

try:
    import orjson
except ImportError:  # pragma: no cover - orjson comes with langsmith
    orjson = None  # type: ignore[assignment]


def _default(obj: Any) -> Any:
    if isinstance(obj, Send):
        return {"node": obj.node, "args": obj.arg}
    if hasattr(obj, "model_dump") and callable(obj.model_dump) and not isinstance(obj, type):
        return obj.model_dump()
    if hasattr(obj, "dict") and callable(obj.dict) and not isinstance(obj, type):
        return obj.dict()
    if hasattr(obj, "_asdict") and callable(obj._asdict) and not isinstance(obj, type):
        return obj._asdict()
    if isinstance(obj, BaseException):
        return {"error": type(obj).__name__, "message": str(obj)}
    if isinstance(obj, (set, frozenset)):
        return list(obj)
    if isinstance(obj, bytes):
        return base64.b64encode(obj).decode()
    if hasattr(obj, "isoformat"):
        return obj.isoformat()
    return str(obj)


def dumps(obj: Any) -> bytes:
    """JSON as the official server writes it; objects are turned into JSON on the way."""
    if orjson is not None:
        return orjson.dumps(
            obj,
            default=_default,
            option=orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY,
        )
    return json.dumps(obj, default=_default, separators=(",", ":")).encode()


def loads(data: bytes) -> Any:
    return orjson.loads(data) if orjson is not None else json.loads(data)


def jsonable(obj: Any) -> Any:
    """The JSON value the official server would send for `obj`, for what must be kept as JSON
    (messages are encoded once, by `dumps`, on their way out)."""
    return loads(dumps(obj))
