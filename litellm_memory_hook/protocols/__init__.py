"""Client protocols: one adapter per API the proxy serves (:mod:`.base` says what an adapter
does). The hook looks the adapter up by LiteLLM's call type, and by the name the memory record
carries in the post-call hooks."""

from __future__ import annotations

from litellm_memory_hook.protocols.anthropic_messages import ANTHROPIC
from litellm_memory_hook.protocols.base import HistoryMode, ProtocolAdapter, ReplyAccumulator
from litellm_memory_hook.protocols.chat import CHAT
from litellm_memory_hook.protocols.responses import RESPONSES

#: LiteLLM's call type -> the adapter of its API.
BY_CALL_TYPE: dict[str, ProtocolAdapter] = {
    "acompletion": CHAT,
    "completion": CHAT,
    "aresponses": RESPONSES,
    "responses": RESPONSES,
    "anthropic_messages": ANTHROPIC,
}

#: an adapter's name (in the memory record) -> the adapter.
BY_NAME: dict[str, ProtocolAdapter] = {a.name: a for a in BY_CALL_TYPE.values()}


def adapter_for(call_type: object) -> ProtocolAdapter | None:
    """The adapter of LiteLLM's ``call_type`` (a string or LiteLLM's ``CallTypes`` enum),
    ``None`` for an API without memory."""
    name = getattr(call_type, "value", call_type)
    return BY_CALL_TYPE.get(name) if isinstance(name, str) else None


def adapter_named(name: object) -> ProtocolAdapter:
    """The adapter a memory record names (chat completions for a record without one)."""
    return BY_NAME.get(name, CHAT) if isinstance(name, str) else CHAT


__all__ = [
    "BY_CALL_TYPE",
    "BY_NAME",
    "HistoryMode",
    "ProtocolAdapter",
    "ReplyAccumulator",
    "adapter_for",
    "adapter_named",
]
