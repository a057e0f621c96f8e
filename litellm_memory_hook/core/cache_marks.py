"""Explicit prompt-cache marks for providers that cache only where told (pure; no I/O).

Anthropic (and Claude on Bedrock) cache a prompt's prefix only up to a block that carries
``cache_control``, and take at most :data:`MAX_MARKS` such marks per request; OpenAI, Gemini and
DeepSeek cache prefixes by themselves. In the cache layout the stable part of a prompt is the
head (the first system message) and the window before the volatile tail, so :func:`add_marks`
puts a mark at the end of each: the head's mark is read back on every request of an epoch, the
window's on the next request (whose prefix is this one's window and last exchange). The client's
own marks are kept and counted first: when they leave no room, the hook adds none, or only the
head's. A mark goes on a message's last text part; a string content becomes one text part (the
same request to the provider: LiteLLM sends a string as one text block).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from litellm_memory_hook.core.messages import TEXT_PART_TYPES

__all__ = ["EPHEMERAL", "MAX_MARKS", "add_marks", "count_marks"]

MAX_MARKS: Final = 4
"""Anthropic's limit of ``cache_control`` blocks in one request."""

EPHEMERAL: Final = {"type": "ephemeral"}

Message = dict[str, Any]


def count_marks(messages: Sequence[Message]) -> int:
    """The ``cache_control`` marks a request already carries (on messages and on parts)."""
    count = 0
    for message in messages:
        if "cache_control" in message:
            count += 1
        content = message.get("content")
        if isinstance(content, list):
            count += sum(1 for p in content if isinstance(p, dict) and "cache_control" in p)
    return count


def _marked(message: Message) -> Message | None:
    """``message`` with a mark on its last text part; ``None`` when it has no text to mark
    or is marked already."""
    content = message.get("content")
    if isinstance(content, str):
        if not content:
            return None
        return {
            **message,
            "content": [{"type": "text", "text": content, "cache_control": EPHEMERAL}],
        }
    if not isinstance(content, list):
        return None
    if any(isinstance(p, dict) and "cache_control" in p for p in content):
        return None
    for index in range(len(content) - 1, -1, -1):
        part = content[index]
        if isinstance(part, dict) and part.get("type") in TEXT_PART_TYPES and part.get("text"):
            parts = list(content)
            parts[index] = {**part, "cache_control": EPHEMERAL}
            return {**message, "content": parts}
    return None


def add_marks(messages: Sequence[Message], stable_ends: Sequence[int]) -> list[Message]:
    """``messages`` with a mark at the end of each stable part, in the order given (the most
    valuable first), as far as :data:`MAX_MARKS` less the client's own marks allows.

    Args:
        messages: the request as built (head, window, tail, the user's last message).
        stable_ends: indices of the messages that end a stable part (the head's system
            message, then the window's last message before the tail); an index out of range,
            or of a message with nothing to mark, is passed over.
    """
    out = list(messages)
    room = MAX_MARKS - count_marks(out)
    for index in stable_ends:
        if room <= 0:
            break
        if 0 <= index < len(out):
            marked = _marked(out[index])
            if marked is not None:
                out[index] = marked
                room -= 1
    return out
