"""What a client protocol adapter is: the engine speaks chat completions; an adapter turns one
API's request into a chat-completions *view* and the view's rebuilt messages back into that API's
fields, and reads that API's reply (whole or streamed) as one assistant message.

A view is a plain dict shaped like a chat-completions request (``model``, ``messages``,
``user``, ``metadata``, ``litellm_call_id``); its ``metadata`` is the very dict LiteLLM keeps
the proxy's metadata in on that route, so what the hook records there reaches the post-call
hooks. The first rule of a proxy hook holds per protocol: every field and item the client sent
reaches the model as sent, plus memory.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal, Protocol

#: how the window treats a history the client sent: ``window`` trims it to the window's
#: budgets (a chat app), ``keep`` sends all of it as sent (an agent with tools).
HistoryMode = Literal["window", "keep"]


#: where LiteLLM keeps the proxy's metadata, by route (chat completions first).
METADATA_FIELDS = ("metadata", "litellm_metadata")


def metadata_dicts(data: object) -> Iterator[dict[str, Any]]:
    """The request's LiteLLM metadata dicts present, in :data:`METADATA_FIELDS` order."""
    if isinstance(data, dict):
        for name in METADATA_FIELDS:
            metadata = data.get(name)
            if isinstance(metadata, dict):
                yield metadata


class ReplyAccumulator(Protocol):
    """Assembles a streamed reply from its chunks (events) into one assistant message."""

    def add(self, chunk: Any) -> None:
        """Read one chunk as the proxy yields it to the client (never changes it)."""

    def message(self) -> dict[str, Any]:
        """The reply so far as one chat-completions assistant message."""


class ProtocolAdapter(Protocol):
    """One client API (chat completions, the Responses API, Anthropic Messages)."""

    #: the protocol's name in the memory record that crosses the model call.
    name: str
    #: where LiteLLM keeps the proxy's metadata on this API's route (``metadata`` or
    #: ``litellm_metadata``).
    metadata_field: str

    def view(self, data: dict[str, Any]) -> dict[str, Any] | None:
        """The request as a chat-completions view, ``None`` when this API's request is not in
        a shape the hook reads (it then passes through as the client sent it)."""

    def apply(self, data: dict[str, Any], view: dict[str, Any]) -> None:
        """Write the view's rebuilt ``messages`` back into the request's own fields."""

    def history_mode(self, view: dict[str, Any]) -> HistoryMode:
        """The history mode the request's shape asks for when its alias says ``auto``."""

    def reply_message(self, response: Any) -> dict[str, Any] | None:
        """The assistant message of a whole (non-streamed) reply, ``None`` when it has none."""

    def accumulator(self) -> ReplyAccumulator:
        """A fresh accumulator for one streamed reply."""
