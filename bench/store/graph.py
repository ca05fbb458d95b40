"""A graph for the project to have one: the benchmark drives the store through the SDK alone."""

from langgraph.graph import START, MessagesState, StateGraph


def echo(state: MessagesState) -> dict:
    return {"messages": []}


builder = StateGraph(MessagesState)
builder.add_node(echo)
builder.add_edge(START, "echo")
graph = builder.compile()
