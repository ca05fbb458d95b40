"""Prebuilt tool-calling agent (`create_react_agent`) driven by a fake chat model.

The model is deterministic and stateless: it looks only at the conversation.
If the last message is a ToolMessage it answers with text built from the tool
result; otherwise it emits one `get_weather` tool call. It implements `_stream`
too, so `messages` streaming yields real token chunks (the tool-call turn is a
single chunk carrying a tool_call_chunk, the answer is one chunk per word).
"""

import json
import re
from collections.abc import Iterator, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.tools import tool
from langgraph.prebuilt import create_react_agent

TOOL_CALL_ID = "call_get_weather_1"


@tool
def get_weather(city: str) -> str:
    """Return the (fake) current weather for a city."""
    return f"It is sunny and 21 degrees in {city}."


class FakeToolModel(BaseChatModel):
    """Chat model that calls `get_weather` once, then answers from its result."""

    @property
    def _llm_type(self) -> str:
        return "fake-tool-model"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> "FakeToolModel":
        return self

    @staticmethod
    def _reply(messages: list[BaseMessage]) -> AIMessage:
        last = messages[-1]
        if isinstance(last, ToolMessage):
            return AIMessage(content=f"Here is the forecast: {last.content}")
        text = last.content if isinstance(last.content, str) else ""
        match = re.search(r"in ([A-Z][A-Za-z]+)", text)
        city = match.group(1) if match else "Paris"
        return AIMessage(
            content="",
            tool_calls=[
                {
                    "name": "get_weather",
                    "args": {"city": city},
                    "id": TOOL_CALL_ID,
                    "type": "tool_call",
                }
            ],
        )

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._reply(messages))])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        # BaseChatModel.stream() calls on_llm_new_token for every chunk itself.
        reply = self._reply(messages)
        if reply.tool_calls:
            call = reply.tool_calls[0]
            yield ChatGenerationChunk(
                message=AIMessageChunk(
                    content="",
                    tool_call_chunks=[
                        {
                            "name": call["name"],
                            "args": json.dumps(call["args"]),
                            "id": call["id"],
                            "index": 0,
                            "type": "tool_call_chunk",
                        }
                    ],
                )
            )
            return
        words = str(reply.content).split(" ")
        for i, word in enumerate(words):
            yield ChatGenerationChunk(message=AIMessageChunk(content=word if i == 0 else " " + word))


graph = create_react_agent(FakeToolModel(), [get_weather])
