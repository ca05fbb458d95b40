"""The project's own routes (`http.app`), as LangGraph's custom-routes documentation writes them:
a Starlette app with a lifespan, a route that reads the caller the auth handler named, a route
with a path parameter, a POST, and a streamed answer."""

from contextlib import asynccontextmanager

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route


@asynccontextmanager
async def lifespan(app: Starlette):
    app.state.greeting = "hello"
    yield


async def hello(request: Request) -> JSONResponse:
    return JSONResponse({"greeting": request.app.state.greeting, "query": dict(request.query_params)})


async def me(request: Request) -> JSONResponse:
    return JSONResponse({"identity": request.user.identity, "authenticated": request.user.is_authenticated})


async def echo(request: Request) -> JSONResponse:
    return JSONResponse({"echo": await request.json()}, status_code=201)


async def item(request: Request) -> JSONResponse:
    return JSONResponse({"id": request.path_params["id"]})


async def count(request: Request) -> StreamingResponse:
    async def events():
        for i in range(3):
            yield f"data: {i}\n\n"

    return StreamingResponse(events(), media_type="text/event-stream")


app = Starlette(
    routes=[
        Route("/hello", hello),
        Route("/me", me),
        Route("/echo", echo, methods=["POST"]),
        Route("/items/{id:int}", item),
        Route("/count", count),
    ],
    lifespan=lifespan,
)
