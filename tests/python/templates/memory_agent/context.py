"""What a run of the memory agent is given."""

from dataclasses import dataclass, field

SYSTEM_PROMPT = """You are a helpful and friendly chatbot. What you know of the user:
{user_info}"""


@dataclass(kw_only=True)
class Context:
    """The memory agent's runtime context."""

    user_id: str = "default"
    """Whose memories to read and write."""

    model: str = field(default="openai/fake-small")

    system_prompt: str = SYSTEM_PROMPT
