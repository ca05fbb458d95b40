"""The api's helper processes for a project's own code: `python runner.py <langgraph.json> --api`
loads its auth handlers (`auth.path`, `auth.py`), its HTTP app (`http.app`, `routes.py`) and its
store's embedding function (`store.index`, `index.py`) and answers the api on its standard input
and output, one JSON line per message, many requests at once (each carries its `id`, and so does
every line of its answer). Once loaded (the app's lifespan started) it says `{"t": "ready",
"authenticate": bool, "handlers": [[resource, action], ...], "routes": [...], "index": bool,
...}`.
"""

import asyncio
import os
import sys
from typing import Any, BinaryIO

from .auth import Handlers, Refused, dumps, load_auth, load_object, loads
from .config import load_config
from .routes import Routes


async def _answer(handlers: Handlers | None, index: Any, message: dict) -> dict:
    try:
        if message["t"] in ("embed", "embed_query"):
            if index is None:
                raise Refused(500, "the project has no store.index")
            if message["t"] == "embed":
                body = {"embedded": await index.aembed(message["value"], message.get("index"))}
            else:
                body = {"vector": await index.aquery(message["query"])}
        elif handlers is None:
            raise Refused(500, "the project has no auth handlers")
        elif message["t"] == "authenticate":
            body = await handlers.authenticate(message)
        else:
            body = await handlers.event(message)
    except Refused as e:
        body = {"error": {"status": e.status, "detail": e.detail, "headers": e.headers}}
    except Exception as e:  # noqa: BLE001 - a bug of the project's code: a 500, logged here
        print(f"mostrador api helper: the project's code failed: {type(e).__name__}: {e}", file=sys.stderr)
        body = {"error": {"status": 500, "detail": f"{type(e).__name__}: {e}", "headers": {}, "bug": True}}
    return {"id": message["id"], **body}


async def serve(out: BinaryIO, in_fd: int, handlers: Handlers | None, routes: Routes | None, index: Any) -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=64 * 1024 * 1024)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(in_fd, "rb", buffering=0))
    if routes is not None:
        await routes.start()
    inventory: dict[str, Any] = {"authenticate": False, "handlers": [], "routes": None, "index": index is not None}
    if handlers is not None:
        inventory |= handlers.inventory()
    if routes is not None:
        inventory |= routes.inventory()
    out.write(dumps({"t": "ready", "pid": os.getpid(), **inventory}) + b"\n")
    tasks: set[asyncio.Task] = set()

    def send_line(answer: dict) -> None:
        out.write(dumps(answer) + b"\n")

    async def one(message: dict) -> None:
        if message["t"] == "http" and routes is not None:
            await routes.handle(message, send_line)
        else:
            send_line(await _answer(handlers, index, message))

    while line := await reader.readline():
        task = asyncio.ensure_future(one(loads(line)))
        tasks.add(task)
        task.add_done_callback(tasks.discard)


def start(streams: tuple[BinaryIO, int], config_path: str) -> None:
    """Serves the api on `streams` until it goes away."""
    config = load_config(config_path)
    handlers = Handlers(load_auth(config)) if (config.get("auth") or {}).get("path") else None
    app_path = (config.get("http") or {}).get("app")
    routes = None
    if app_path:
        from starlette.applications import Starlette

        app = load_object(config, "http.app", app_path)
        if not isinstance(app, Starlette):
            raise TypeError(f"http.app: {app_path} is {type(app).__name__}, not a Starlette or FastAPI application")
        routes = Routes(app)
    index = None
    if (config.get("store") or {}).get("index"):
        from .index import load_index

        index = load_index(config)
    asyncio.run(serve(*streams, handlers, routes, index))
    os._exit(0)
