"""The project's own routes (`http.app`), as LangGraph's custom-routes documentation writes them:
a FastAPI app with a lifespan, a route that reads the caller the auth handler named, a path
parameter, a POST, and a streamed answer."""

from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse


@asynccontextmanager
async def lifespan(app: FastAPI):
    app.state.greeting = "hello"
    yield


app = FastAPI(lifespan=lifespan)


@app.get("/hello")
async def hello(request: Request) -> dict:
    return {"greeting": request.app.state.greeting, "query": dict(request.query_params)}


@app.get("/me")
async def me(request: Request) -> dict:
    return {"identity": request.user.identity, "authenticated": request.user.is_authenticated}


@app.post("/echo")
async def echo(request: Request) -> JSONResponse:
    return JSONResponse({"echo": await request.json()}, status_code=201)


@app.get("/items/{item_id}")
async def item(item_id: int) -> dict:
    return {"id": item_id}


@app.get("/count")
async def count() -> StreamingResponse:
    async def events():
        for i in range(3):
            yield f"data: {i}\n\n"

    return StreamingResponse(events(), media_type="text/event-stream")
