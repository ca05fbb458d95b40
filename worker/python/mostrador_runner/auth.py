"""A project's own authentication and authorization (`auth.path` of its `langgraph.json`: a
`langgraph_sdk.Auth` object), answered for the api, which stays Rust, by its helper processes
(`api.py`, which reads the messages and writes the answers; light: no LangGraph import here).

The api asks two things, with the official server's semantics (`langgraph_api.auth.custom`):

* `{"t": "authenticate", "method", "path", "query", "headers": [[name, value], ...]}`: the
  `@auth.authenticate` handler, given the arguments it names, returns the user; the answer is
  `{"user": {...}, "permissions": [...]}`.
* `{"t": "event", "user", "permissions", "resource", "action", "value"}`: the most specific
  `@auth.on...` handler for the resource and action; the answer is the value as the handler
  left it and the filter it returned (`{"value", "filter"}`), `False` a 403.

A refusal is `{"error": {"status", "detail", "headers"}}`.
"""

import asyncio
import importlib.util
import inspect
import os
import sys
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl

from langgraph_sdk import Auth

from .user import User

try:
    import orjson

    def dumps(obj: Any) -> bytes:
        return orjson.dumps(obj, default=str)

    loads = orjson.loads
except ImportError:  # pragma: no cover - orjson comes with langgraph_sdk
    import json

    def dumps(obj: Any) -> bytes:
        return json.dumps(obj, default=str, separators=(",", ":")).encode()

    loads = json.loads

# The arguments an authenticate handler may name, as officially.
_ARGUMENTS = {"request", "scope", "scopes", "user", "path_params", "path", "query_params", "headers", "authorization", "method"}


def load_object(config: dict, key: str, path: Any) -> Any:
    """What `path` (`./file.py:name` or `module:name`, the value of `key` in langgraph.json) names."""
    if not isinstance(path, str) or ":" not in path:
        raise ValueError(f"{key} must be './file.py:name' or 'module:name', not {path!r}")
    location, _, name = path.rpartition(":")
    if location.endswith(".py") or "/" in location:
        file = os.path.normpath(os.path.join(config["_base"], location))
        module_name = "mostrador_project_" + key.replace(".", "_")
        spec = importlib.util.spec_from_file_location(module_name, file)
        if spec is None or spec.loader is None:
            raise ImportError(f"{key}: {file} is not a Python file")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    else:
        module = importlib.import_module(location)
    if not hasattr(module, name):
        raise AttributeError(f"{key}: {path} names nothing")
    return getattr(module, name)


def load_auth(config: dict) -> Auth:
    """The `Auth` object `auth.path` names."""
    path = (config.get("auth") or {}).get("path")
    auth = load_object(config, "auth.path", path)
    if not isinstance(auth, Auth):
        raise TypeError(f"auth.path: {path} is {type(auth).__name__}, not a langgraph_sdk.Auth")
    return auth


class Refused(Exception):
    """An answer other than the handler's result: a status, a detail and headers."""

    def __init__(self, status: int, detail: str, headers: dict | None = None) -> None:
        self.status, self.detail, self.headers = status, detail, headers or {}


def _user_of(response: Any) -> tuple[dict, list[str]]:
    """The user and permissions an authenticate handler returned, as the official server reads
    them: a `(permissions, user)` pair, a string (its identity), a mapping with `identity`, or an
    object with an `identity` attribute (its `model_dump()` or `dict()` for the rest)."""
    permissions: Any = []
    user = response
    if isinstance(response, tuple):
        if len(response) != 2:
            raise ValueError(f"expected (permissions, user), got a tuple of {len(response)}")
        permissions, user = response
    elif isinstance(response, dict) and "permissions" in response:
        permissions = response["permissions"]
    elif hasattr(response, "permissions") and not isinstance(response, (str, dict)):
        permissions = response.permissions
    if isinstance(user, str):
        fields: dict = {"identity": user}
    elif isinstance(user, dict) and "identity" in user:
        fields = dict(user)
    elif hasattr(user, "identity"):
        dump = getattr(user, "model_dump", None) or getattr(user, "dict", None)
        fields = {**(dump() if callable(dump) else {}), "identity": user.identity}
        for attribute in ("display_name", "is_authenticated"):
            if hasattr(user, attribute):
                fields[attribute] = getattr(user, attribute)
    else:
        raise ValueError(f"the authenticate handler returned {type(user).__name__}, not a user with an identity")
    fields.setdefault("display_name", fields["identity"])
    fields.setdefault("is_authenticated", True)
    return loads(dumps(fields)), [str(p) for p in (permissions or [])]


def _query_params(query: str) -> Any:
    pairs = parse_qsl(query, keep_blank_values=True)
    try:
        from starlette.datastructures import QueryParams
    except ImportError:  # pragma: no cover - starlette comes with most projects' web stack
        return dict(pairs)
    return QueryParams(pairs)


class Handlers:
    """The `Auth` object's handlers, called as the official server calls them."""

    def __init__(self, auth: Auth) -> None:
        self.auth = auth
        fn = auth._authenticate_handler
        self.authenticator = fn
        self.arguments: set[str] = set()
        if fn is not None:
            parameters = inspect.signature(fn).parameters
            unknown = [n for n, p in parameters.items() if n not in _ARGUMENTS and p.default is p.empty]
            if unknown:
                raise TypeError(f"the authenticate handler takes {unknown}, which the server does not give")
            self.arguments = {n for n in parameters if n in _ARGUMENTS}

    def inventory(self) -> dict:
        handlers = sorted(self.auth._handlers)
        if self.auth._global_handlers:
            handlers.append(("*", "*"))
        return {"authenticate": self.authenticator is not None, "handlers": [list(h) for h in handlers]}

    async def authenticate(self, message: dict) -> dict:
        if self.authenticator is None:
            # No authenticate handler: every request is anonymous, as officially.
            return {"user": None, "permissions": []}
        raw = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in message["headers"]]
        headers = dict(raw)
        scope = {
            "type": "http",
            "method": message["method"],
            "path": message["path"],
            "raw_path": message["path"].encode(),
            "query_string": message["query"].encode(),
            "headers": raw,
            "path_params": {},
        }
        given: dict[str, Any] = {
            "scope": scope,
            "scopes": [],
            "user": None,
            "path_params": {},
            "path": message["path"],
            "method": message["method"],
            "headers": headers,
            "authorization": headers.get(b"authorization", b"").decode("latin-1") or None,
        }
        if "query_params" in self.arguments:
            given["query_params"] = _query_params(message["query"])
        if "request" in self.arguments:
            from starlette.requests import Request

            given["request"] = Request(scope)
        arguments = {name: given[name] for name in self.arguments}
        try:
            response = await _call(self.authenticator, arguments)
        except Auth.exceptions.HTTPException as e:
            raise Refused(e.status_code, str(e.detail), dict(e.headers or {})) from None
        user, permissions = _user_of(response)
        return {"user": user, "permissions": permissions}

    def handler(self, resource: str, action: str) -> Callable | None:
        """The most specific handler, as officially: resource and action, the resource's, the
        action's, then the global one (the last registered of each)."""
        for key in ((resource, action), (resource, "*"), ("*", action), ("*", "*")):
            if key in self.auth._handlers:
                return self.auth._handlers[key][-1]
        return self.auth._global_handlers[-1] if self.auth._global_handlers else None

    async def event(self, message: dict) -> dict:
        value = message["value"]
        handler = self.handler(message["resource"], message["action"])
        if handler is None:
            return {"value": value, "filter": None}
        user = User(message["user"] or {})
        ctx = Auth.types.AuthContext(
            user=user,  # type: ignore[arg-type]
            permissions=message["permissions"],
            resource=message["resource"],
            action=message["action"],
        )
        try:
            result = await _call(handler, {"ctx": ctx, "value": value})
        except Auth.exceptions.HTTPException as e:
            raise Refused(e.status_code, str(e.detail), dict(e.headers or {})) from None
        except AssertionError as e:
            raise Refused(403, str(e)) from None
        if result is None or result is True:
            return {"value": value, "filter": None}
        if result is False:
            raise Refused(403, "Forbidden")
        if not isinstance(result, dict):
            raise Refused(500, f"Auth handler returned invalid result. Expected filter dict, None, or boolean. Got {type(result)} instead.")
        return {"value": value, "filter": result}


async def _call(fn: Callable, arguments: dict) -> Any:
    if inspect.iscoroutinefunction(fn):
        return await fn(**arguments)
    return await asyncio.to_thread(fn, **arguments)
