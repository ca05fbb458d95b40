"""A scripted chat model: deterministic, offline, with tool calling.

It stands in for a real one (`ChatOpenAI(...)`, `init_chat_model(...)`) so the example runs
without a network or a key. Like a real model it reads the whole conversation and calls only
the tools bound with `bind_tools`; unlike one, it follows a fixed script:

* a question naming an order (`P-1001`) → `lookup_order`, then `propose_refund` if the policy
  still refunds something, then it tells the customer what the manager decided;
* any other question → `search_products`, then `check_stock` of the best match, then the stock.

It streams: an answer comes one word per chunk, a tool call as one chunk.
"""

import json
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import LanguageModelInput
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool

ORDER_ID = re.compile(r"\b[A-Z]-\d{4}\b")


def euros(amount: float) -> str:
    return f"{amount:.2f}".replace(".", ",") + " €"


class ScriptedChatModel(BaseChatModel):
    """Calls the shop's tools in a fixed order, decided from the conversation."""

    @property
    def _llm_type(self) -> str:
        return "scripted-retail"

    def bind_tools(
        self, tools: Sequence[dict[str, Any] | type | Callable | BaseTool], **kwargs: Any
    ) -> Runnable[LanguageModelInput, AIMessage]:
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def _reply(self, messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        available = {t["function"]["name"] for t in tools}
        n_calls = sum(1 for m in messages if isinstance(m, AIMessage) and m.tool_calls)

        def call(name: str, **args: Any) -> AIMessage:
            if name not in available:
                return AIMessage(content=f"No puedo hacerlo: no tengo la herramienta {name}.")
            tool_call = {"name": name, "args": args, "id": f"call_{n_calls + 1}", "type": "tool_call"}
            return AIMessage(content="", tool_calls=[tool_call])

        last = messages[-1]
        if isinstance(last, HumanMessage):
            text = last.text
            if order := ORDER_ID.search(text):
                return call("lookup_order", order_id=order.group())
            return call("search_products", query=text)
        if not isinstance(last, ToolMessage):
            return AIMessage(content="¿En qué puedo ayudarte?")
        result = json.loads(last.text)
        if "error" in result:
            return AIMessage(content=f"No lo encuentro: {result['error']}.")
        if last.name == "search_products":
            if not result["products"]:
                return AIMessage(content="No tenemos ningún producto así en el catálogo.")
            return call("check_stock", product_id=result["products"][0]["product_id"])
        if last.name == "check_stock":
            with_units = [f"{s['store_id']}: {s['units']}" for s in result["stores"] if s["units"]]
            if not with_units:
                return AIMessage(content=f"No quedan {result['name']} en ninguna tienda.")
            return AIMessage(content=f"{result['name']}, unidades por tienda: {', '.join(with_units)}.")
        if last.name == "lookup_order":
            if result["refundable"] <= 0:
                return AIMessage(
                    content=f"El pedido {result['order_id']} ya no admite devolución: "
                    f"se entregó hace {result['days_since_delivery']} días y el plazo es de "
                    f"{result['return_days']}."
                )
            reason = next(m.text for m in reversed(messages) if isinstance(m, HumanMessage))
            return call(
                "propose_refund",
                order_id=result["order_id"],
                amount=result["refundable"],
                reason=reason,
            )
        if last.name == "propose_refund":
            if result["status"] == "refunded":
                return AIMessage(
                    content=f"Reembolso aprobado: {euros(result['amount'])} del pedido "
                    f"{result['order_id']} (referencia {result['refund_id']})."
                )
            note = f" Motivo: {result['note']}." if result.get("note") else ""
            return AIMessage(
                content="El encargado no ha aprobado el reembolso del pedido "
                f"{result['order_id']}.{note}"
            )
        return AIMessage(content="Hecho.")

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        reply = self._reply(messages, kwargs.get("tools", []))
        return ChatResult(generations=[ChatGeneration(message=reply)])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        reply = self._reply(messages, kwargs.get("tools", []))
        if reply.tool_calls:
            chunks = [
                {
                    "name": c["name"],
                    "args": json.dumps(c["args"], ensure_ascii=False),
                    "id": c["id"],
                    "index": i,
                    "type": "tool_call_chunk",
                }
                for i, c in enumerate(reply.tool_calls)
            ]
            yield ChatGenerationChunk(message=AIMessageChunk(content="", tool_call_chunks=chunks))
            return
        for i, word in enumerate(reply.text.split(" ")):
            yield ChatGenerationChunk(message=AIMessageChunk(content=word if i == 0 else " " + word))
