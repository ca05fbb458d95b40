"""A graph made per run by an async context manager taking the server's runtime, as the current
LangGraph server documents it: resources are opened only when the graph is run, and closed after."""

import contextlib
from dataclasses import dataclass

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.runtime import Runtime
from langgraph_sdk.runtime import ServerRuntime


@dataclass
class Context:
    greeting: str = "hello"


OPENED: list[str] = []


def build(resource: str) -> StateGraph:
    async def greet(state: MessagesState, config: RunnableConfig, runtime: Runtime[Context]) -> dict:
        last = state["messages"][-1].content if state["messages"] else ""
        # Request headers the project's `http.configurable_headers` copies into the config.
        configurable = config.get("configurable", {})
        headers = {k: configurable[k] for k in ("x-user-tier", "x-user-secret") if k in configurable}
        text = f"{runtime.context.greeting} ({resource}): {last}"
        if headers:
            text += f" {headers}"
        return {"messages": [{"role": "assistant", "content": text}]}

    builder = StateGraph(MessagesState, context_schema=Context)
    builder.add_node(greet)
    builder.add_edge(START, "greet")
    builder.add_edge("greet", END)
    return builder.compile(name="Greeter")


@contextlib.asynccontextmanager
async def graph(runtime: ServerRuntime[Context]):
    if ert := runtime.execution_runtime:
        context = ert.context or {}
        greeting = context.get("greeting") if isinstance(context, dict) else context.greeting
        OPENED.append(str(greeting))
        try:
            yield build(f"open for {greeting}")
        finally:
            OPENED.pop()
    else:
        yield build("closed")
