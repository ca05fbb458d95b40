"""The agent's tools."""

from typing import Any

from langgraph.runtime import get_runtime

from react_agent.context import Context


async def search(query: str) -> list[dict[str, Any]]:
    """Search the web for general questions and current events."""
    runtime = get_runtime(Context)
    results = [
        {"url": "https://example.com/weather", "content": f"Sunny in Paris, result for {query!r}"},
        {"url": "https://example.com/forecast", "content": "Mild all week"},
        {"url": "https://example.com/archive", "content": "Rain last week"},
        {"url": "https://example.com/more", "content": "More of the same"},
    ]
    return results[: runtime.context.max_search_results]


TOOLS = [search]
