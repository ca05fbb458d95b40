"""The graph every server serves: one node calling a streaming chat model (langchain-openai)
pointed at fake_model.py. The servers stream the model's tokens to the client as
`messages-tuple` events."""
import os

from langchain_openai import ChatOpenAI
from langgraph.graph import END, START, MessagesState, StateGraph

model = ChatOpenAI(
    model="m",
    api_key="x",
    base_url=os.environ.get("OPENAI_BASE_URL", "http://127.0.0.1:18170/v1"),
    streaming=True,
    max_retries=0,
)


async def chat(state: MessagesState) -> dict:
    return {"messages": [await model.ainvoke(state["messages"])]}


builder = StateGraph(MessagesState)
builder.add_node("chat", chat)
builder.add_edge(START, "chat")
builder.add_edge("chat", END)
graph = builder.compile()
