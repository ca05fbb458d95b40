"""A graph that answers who asked, as a graph reads it from its config."""

from typing import Annotated, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph


def concat(left: list, right: list) -> list:
    return left + right


class State(TypedDict, total=False):
    asked: Annotated[list, concat]


def answer(state: State, config: RunnableConfig) -> dict:
    configurable = config["configurable"]
    user = configurable["langgraph_auth_user"]
    return {
        "asked": [
            {
                "user_id": configurable["langgraph_auth_user_id"],
                "identity": user.identity,
                "name": user["name"],
                "permissions": list(configurable["langgraph_auth_permissions"]),
            }
        ]
    }


graph = StateGraph(State).add_node("answer", answer).add_edge(START, "answer").add_edge("answer", END).compile()
