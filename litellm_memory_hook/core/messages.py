"""A chat request's messages: their shape check, their cost in the window, and their split
into the leading system messages, the earlier history and the new turn.

Pure functions. A message is the dict a client sends (``role``, ``content``, optional ``name``,
``tool_calls``, ``tool_call_id``); its cost is in characters. The text of a message's content
and text cuts are in :mod:`litellm_memory_hook.core.message_text`; what is stored of a message
in :mod:`litellm_memory_hook.core.stored_messages` (both re-exported here).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from litellm_memory_hook.core.message_text import (
    ELLIPSIS,
    PART_PLACEHOLDERS,
    TEXT_PART_TYPES,
    content_fingerprint,
    content_text,
    is_blank,
    keep_head,
    keep_tail,
    lone_surrogate,
    typed_text,
    without_surrogates,
)
from litellm_memory_hook.core.stored_messages import (
    CONVERSATION_ROLES,
    is_stored,
    message_to_turn,
    messages_to_turns,
    reply_words,
    storable_message,
)

__all__ = [
    "ELLIPSIS",
    "PART_PLACEHOLDERS",
    "TEXT_PART_TYPES",
    "SplitRequest",
    "clean_messages",
    "content_fingerprint",
    "content_text",
    "is_blank",
    "is_stored",
    "is_system",
    "is_valid_request",
    "keep_head",
    "keep_tail",
    "lone_surrogate",
    "message_chars",
    "message_to_turn",
    "messages_to_turns",
    "reply_words",
    "split_request",
    "storable_message",
    "typed_text",
    "without_surrogates",
]

_SYSTEM_ROLES = frozenset({"system", "developer"})


def clean_messages(raw: object) -> list[dict[str, Any]]:
    """The well-formed messages of a request: dicts with a string role; others skipped."""
    if not isinstance(raw, list):
        return []
    return [m for m in raw if isinstance(m, dict) and isinstance(m.get("role"), str)]


def message_chars(message: dict[str, Any]) -> int:
    """Characters a message costs in the window: its text, its tool-call names and arguments,
    and the reasoning it carries (``reasoning_content``, the text of ``thinking_blocks``),
    which goes to the model with it."""
    total = len(content_text(message.get("content")))
    for call in message.get("tool_calls") or ():
        if isinstance(call, dict):
            function = call.get("function") or {}
            total += len(str(function.get("name", ""))) + len(str(function.get("arguments", "")))
    reasoning = message.get("reasoning_content")
    if isinstance(reasoning, str):
        total += len(reasoning)
    for block in message.get("thinking_blocks") or ():
        if isinstance(block, dict) and isinstance(block.get("thinking"), str):
            total += len(block["thinking"])
    return total


@dataclass(frozen=True)
class SplitRequest:
    """A request's messages split into parts, every message as the client sent it.

    Attributes:
        lead: the leading system / developer messages (they carry the rules; the memory block
            joins the first of them).
        earlier: the messages between the lead and the new turn (conversation messages, and
            any system / developer message the client placed among them, in place).
        new: the new turn: the trailing user / tool messages (with the assistant ``tool_calls``
            message they answer, when the turn is a tool result), then, in the client's order,
            system / developer messages the client placed after the conversation and an
            assistant prefill when it ended with one.
        prefill: index in ``new`` of the assistant prefill, or ``None``.
    """

    lead: tuple[dict[str, Any], ...]
    earlier: tuple[dict[str, Any], ...]
    new: tuple[dict[str, Any], ...]
    prefill: int | None = None

    @property
    def system_texts(self) -> tuple[str, ...]:
        """Text of every leading system / developer message, in order."""
        return tuple(content_text(m.get("content")) for m in self.lead)

    @property
    def new_conversation(self) -> tuple[dict[str, Any], ...]:
        """The new turn's user / tool messages (and the tool-call message they answer): what
        is stored before the reply; not the prefill, not trailing system messages."""
        return tuple(
            m
            for i, m in enumerate(self.new)
            if m.get("role") in CONVERSATION_ROLES and i != self.prefill
        )

    @property
    def prefill_text(self) -> str:
        """The text of the assistant prefill ("" without one)."""
        if self.prefill is None:
            return ""
        return content_text(self.new[self.prefill].get("content"))

    @property
    def prefill_name(self) -> str:
        """The ``name`` of the assistant prefill (a roleplay frontend's speaker; "" without)."""
        if self.prefill is None:
            return ""
        name = self.new[self.prefill].get("name")
        return name if isinstance(name, str) else ""


def is_system(message: dict[str, Any]) -> bool:
    """True for a ``system`` or ``developer`` message (``developer`` counts as system)."""
    return message.get("role") in _SYSTEM_ROLES


def split_request(messages: Sequence[dict[str, Any]]) -> SplitRequest:
    """Split clean messages into the leading system messages, earlier history and the new turn.

    Order is the client's: nothing moves. A trailing assistant message without ``tool_calls``
    whose nearest earlier message other than system / developer ones is a user message is a
    prefill (roleplay frontends end every request with one, some with their instructions
    between the user message and it); system / developer messages after the conversation, before
    or after a prefill, stay where they are, in the new turn. With no assistant message (but a
    prefill) there is no earlier history: every message after the lead is new (a user message,
    the app's note, the next user message).
    """
    lead_end = 0
    while lead_end < len(messages) and is_system(messages[lead_end]):
        lead_end += 1
    rest = list(messages[lead_end:])
    end = _before_systems(rest, len(rest))
    prefill_at: int | None = None
    last = rest[end - 1] if end > 0 else None
    if last is not None and last.get("role") == "assistant" and not last.get("tool_calls"):
        asked = _before_systems(rest, end - 1)
        if asked > 0 and rest[asked - 1].get("role") == "user":
            prefill_at = end - 1
            end = asked
    cut = end
    while cut > 0 and rest[cut - 1].get("role") in ("user", "tool"):
        cut -= 1
    if (
        cut < end
        and rest[cut].get("role") == "tool"
        and cut > 0
        and rest[cut - 1].get("tool_calls")
    ):
        cut -= 1
    if not any(m.get("role") == "assistant" for m in rest[:end]):
        cut = 0  # no assistant message at all: all of it is new (a note between messages)
    new = rest[cut:]
    prefill = None if prefill_at is None else prefill_at - cut
    return SplitRequest(tuple(messages[:lead_end]), tuple(rest[:cut]), tuple(new), prefill)


def _before_systems(messages: Sequence[dict[str, Any]], end: int) -> int:
    """The index after the last message before ``end`` that is not system / developer."""
    while end > 0 and is_system(messages[end - 1]):
        end -= 1
    return end


_VALID_ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})


def _valid_part(part: object, allowed: Collection[str] | None) -> bool:
    if not isinstance(part, dict) or not isinstance(part.get("type"), str):
        return False
    kind = part["type"]
    if allowed is not None and kind not in allowed:
        return False
    if kind in TEXT_PART_TYPES:
        return isinstance(part.get("text"), str)
    if kind == "image_url":
        image = part.get("image_url")
        return isinstance(image, str) or (
            isinstance(image, dict) and isinstance(image.get("url"), str)
        )
    return True


def _valid_call(call: object) -> bool:
    if not isinstance(call, dict):
        return False
    function = call.get("function")
    return (
        isinstance(function, dict)
        and isinstance(function.get("name"), str)
        and isinstance(function.get("arguments", ""), str)
        and isinstance(call.get("id", ""), str)
    )


def _valid_message(message: object, user_part_types: Collection[str] | None) -> bool:
    if not isinstance(message, dict) or message.get("role") not in _VALID_ROLES:
        return False
    role, content = message["role"], message.get("content")
    if isinstance(content, list):
        allowed = user_part_types if role == "user" else None
        if not all(_valid_part(p, allowed) for p in content):
            return False
    elif content is None:
        if role not in ("assistant", "function"):
            return False
    elif not isinstance(content, str):
        return False
    if "name" in message and not isinstance(message["name"], str):
        return False
    calls = message.get("tool_calls")
    if calls is not None and (
        role != "assistant" or not isinstance(calls, list) or not all(_valid_call(c) for c in calls)
    ):
        return False
    return role != "tool" or isinstance(message.get("tool_call_id"), str)


def is_valid_request(raw: object, user_part_types: Collection[str] | None = None) -> bool:
    """True when a request's ``messages`` has the OpenAI shape: a non-empty list of message
    dicts with a known role, string / parts / (for assistant) null content, string names, well
    formed ``tool_calls`` and ``tool_call_id``.

    The hook rebuilds only such requests; any other body reaches the proxy exactly as the
    client sent it (untouched, not stored), so the proxy answers it as it would without the
    hook (issue 9 item 4), its error naming the client's own message index rather than one in
    the rebuilt list.

    Args:
        raw: the request's ``messages``.
        user_part_types: the content part types the proxy accepts in a user message (LiteLLM's
            ``ValidUserMessageContentTypes``); a user message with another part is invalid.
            ``None``: any part type.
    """
    return (
        isinstance(raw, list) and bool(raw) and all(_valid_message(m, user_part_types) for m in raw)
    )
