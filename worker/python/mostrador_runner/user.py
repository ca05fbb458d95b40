"""The caller a run acts for, or an auth handler is asked about."""

from collections.abc import Sequence
from typing import Any


class User(dict):
    """The caller a run acts for (`langgraph_auth_user`), read as the official server's user is:
    by key or by attribute (`identity`, `permissions`, ...), so LangGraph's `runtime.server_info`
    and a `ServerRuntime` carry it."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    @property
    def identity(self) -> str:
        return self.get("identity", "")

    @property
    def display_name(self) -> str:
        return self.get("display_name") or self.identity

    @property
    def is_authenticated(self) -> bool:
        return self.get("is_authenticated", True)

    @property
    def permissions(self) -> Sequence[str]:
        return self.get("permissions") or []
