"""An agent from LangChain's prebuilt `create_agent`, its model named by a string."""

from dataclasses import dataclass

from langchain.agents import create_agent
from langchain_core.tools import tool


@dataclass
class Context:
    city: str = "Paris"


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"It is always sunny in {city}."


agent = create_agent(
    "openai:fake-prebuilt",
    tools=[get_weather],
    system_prompt="You are a weather assistant.",
    context_schema=Context,
)
