"""What a run of the agent can be given: the model, the prompt, how many search results."""

import os
from dataclasses import dataclass, field, fields
from typing import Annotated

from react_agent import prompts


@dataclass(kw_only=True)
class Context:
    """The agent's runtime context."""

    system_prompt: str = field(
        default=prompts.SYSTEM_PROMPT,
        metadata={"description": "The system prompt of the agent's conversations."},
    )

    model: Annotated[str, {"__template_metadata__": {"kind": "llm"}}] = field(
        default="openai/fake-small",
        metadata={"description": "The chat model, as provider/model-name."},
    )

    max_search_results: int = field(
        default=3,
        metadata={"description": "How many search results to return."},
    )

    def __post_init__(self) -> None:
        """A field left at its default takes the environment's value of its upper-cased name."""
        for f in fields(self):
            if not f.init:
                continue
            if getattr(self, f.name) == f.default:
                setattr(self, f.name, os.environ.get(f.name.upper(), f.default))
