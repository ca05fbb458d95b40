"""The agent's state."""

from collections.abc import Sequence
from dataclasses import dataclass, field

from langchain_core.messages import AnyMessage
from langgraph.graph import add_messages
from langgraph.managed import IsLastStep
from typing_extensions import Annotated


@dataclass
class InputState:
    """What a run is given: the conversation so far."""

    messages: Annotated[Sequence[AnyMessage], add_messages] = field(default_factory=list)


@dataclass
class State(InputState):
    """The whole state."""

    is_last_step: IsLastStep = field(default=False)
