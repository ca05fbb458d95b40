"""A project's own HTTP routes (`http.app` of its `langgraph.json`: a Starlette or FastAPI app),
served on the api's port as officially: the api forwards each request that one of the app's
routes matches to a process of its own, which runs the app (its lifespan once, at start) and
sends the answer back as it comes: `{"start": {"status", "headers"}}`, then `{"chunk": base64}`
for each part of the body, then `{"end": true}`.
"""

import asyncio
import base64
import sys
from typing import Any

from .user import User


class Routes:
    """The app, its lifespan's state, and what the api needs to route to it."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.state: dict = {}
        self.lifespan: asyncio.Task | None = None

    def inventory(self) -> dict:
        """The app's routes (`prefix`: a mount, which matches every path below it), its
        middleware (which the official server would wrap its own routes in), and its FastAPI
        paths for the OpenAPI document."""
        routes = []
        websockets = []
        for route in getattr(self.app, "routes", []):
            methods = getattr(route, "methods", None)
            kind = type(route).__name__
            if kind == "WebSocketRoute":
                websockets.append(route.path)
            elif kind == "Mount":
                routes.append({"path": route.path, "methods": None, "prefix": True})
            elif hasattr(route, "path"):
                routes.append({"path": route.path, "methods": sorted(methods) if methods else None, "prefix": False})
        middleware = [getattr(m.cls, "__name__", str(m.cls)) for m in getattr(self.app, "user_middleware", [])]
        openapi = None
        if callable(getattr(self.app, "openapi", None)):
            try:
                openapi = self.app.openapi()
            except Exception as e:  # noqa: BLE001 - a document that cannot be made: none
                print(f"mostrador: the app's OpenAPI document could not be made: {e}", file=sys.stderr)
        return {"routes": routes, "websockets": websockets, "middleware": middleware, "openapi": openapi}

    async def start(self) -> None:
        """Runs the app's lifespan up to its startup (its shutdown never comes: the process ends
        with the api)."""
        started: asyncio.Future = asyncio.get_running_loop().create_future()
        inbox: asyncio.Queue = asyncio.Queue()
        await inbox.put({"type": "lifespan.startup"})

        async def receive() -> dict:
            return await inbox.get()

        async def send(message: dict) -> None:
            if message["type"] == "lifespan.startup.complete" and not started.done():
                started.set_result(None)
            elif message["type"] == "lifespan.startup.failed" and not started.done():
                started.set_exception(RuntimeError(message.get("message") or "the app's lifespan failed"))

        scope = {"type": "lifespan", "asgi": {"version": "3.0", "spec_version": "2.0"}, "state": self.state}

        async def run() -> None:
            try:
                await self.app(scope, receive, send)
            except Exception as e:  # noqa: BLE001 - an app without a lifespan, or one that failed
                if not started.done():
                    started.set_exception(e)

        self.lifespan = asyncio.ensure_future(run())
        await started

    async def handle(self, message: dict, send_line: Any) -> None:
        """One request through the app, its answer sent as it comes."""
        raw = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in message["headers"]]
        scope: dict[str, Any] = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": "1.1",
            "method": message["method"],
            "scheme": "http",
            "path": message["path"],
            "raw_path": message["path"].encode(),
            "query_string": message["query"].encode(),
            "root_path": "",
            "headers": raw,
            "client": None,
            "server": None,
            "state": dict(self.state),
        }
        if message.get("user") is not None:
            scope["user"] = User(message["user"])
            try:
                from starlette.authentication import AuthCredentials

                scope["auth"] = AuthCredentials(message.get("permissions") or [])
            except ImportError:  # pragma: no cover - a Starlette app has it
                pass
        body = base64.b64decode(message.get("body") or "")
        done = asyncio.Event()
        sent = {"request": False, "start": False}

        async def receive() -> dict:
            if not sent["request"]:
                sent["request"] = True
                return {"type": "http.request", "body": body, "more_body": False}
            await done.wait()
            return {"type": "http.disconnect"}

        async def send(event: dict) -> None:
            if event["type"] == "http.response.start":
                sent["start"] = True
                headers = [[bytes(k).decode("latin-1"), bytes(v).decode("latin-1")] for k, v in event.get("headers", [])]
                send_line({"id": message["id"], "start": {"status": event["status"], "headers": headers}})
            elif event["type"] == "http.response.body":
                chunk = event.get("body", b"")
                if chunk:
                    send_line({"id": message["id"], "chunk": base64.b64encode(chunk).decode()})
                if not event.get("more_body", False):
                    done.set()

        try:
            await self.app(scope, receive, send)
        except Exception as e:  # noqa: BLE001 - the app's bug: a 500, or a cut answer
            print(f"mostrador: the project's route failed: {type(e).__name__}: {e}", file=sys.stderr)
            if not sent["start"]:
                detail = f"{type(e).__name__}: {e}"
                send_line({"id": message["id"], "error": {"status": 500, "detail": detail, "headers": {}, "bug": True}})
                return
        send_line({"id": message["id"], "end": True})
