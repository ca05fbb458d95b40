"""The retail assistant: a chat model that calls tools over the shop's data until it can answer.

```text
START → agent ⇄ tools → END
```

`propose_refund` interrupts the run for a manager's approval (see `retail.catalogue`).
"""

from langchain_core.messages import SystemMessage
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from retail.catalogue import TOOLS
from retail.model import ScriptedChatModel

SYSTEM = (
    "Eres el asistente de una cadena de tiendas: respondes sobre productos y existencias, "
    "y gestionas devoluciones. Usa las herramientas; no inventes existencias ni importes. "
    "Un reembolso lo propones con propose_refund y lo aprueba un encargado."
)

# Swap in a real model here, e.g. `init_chat_model("openai:gpt-4.1-mini")`.
model = ScriptedChatModel().bind_tools(TOOLS)


async def agent(state: MessagesState) -> dict:
    answer = await model.ainvoke([SystemMessage(SYSTEM), *state["messages"]])
    return {"messages": [answer]}


builder = StateGraph(MessagesState)
builder.add_node("agent", agent)
builder.add_node("tools", ToolNode(TOOLS))
builder.add_edge(START, "agent")
builder.add_conditional_edges("agent", tools_condition)
builder.add_edge("tools", "agent")
graph = builder.compile()
