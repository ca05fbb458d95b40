"""Helpers."""

from langchain.chat_models import init_chat_model
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage


def get_message_text(msg: BaseMessage) -> str:
    """The text of a message, whatever its content's shape."""
    content = msg.content
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        return content.get("text", "")
    return "".join(c if isinstance(c, str) else (c.get("text") or "") for c in content).strip()


def load_chat_model(fully_specified_name: str) -> BaseChatModel:
    """A chat model from `provider/model`."""
    provider, model = fully_specified_name.split("/", maxsplit=1)
    return init_chat_model(model, model_provider=provider)
