"""Reading what the hook sent, whatever the layout.

In the cache layout (the default) the memory goes in two bands: the stable head joined to the
first system message, and a volatile tail (recalled lines, the date, the reminder) just before
the user's last message, as a system message of its own or as a leading data part of that
message. In the seed layout everything is in the first system message. Tests that read the
memory text or the client's conversation use these, so they hold for both layouts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from litellm_memory_hook.core.injected_blocks import DATA_TAG, REMINDER_TAG

_OPEN = (f"<{DATA_TAG}>", f"<{REMINDER_TAG}>")
_CLOSE = f"</{REMINDER_TAG}>"


def _is_tail_text(text: object) -> bool:
    return isinstance(text, str) and text.startswith(_OPEN) and text.rstrip().endswith(_CLOSE)


def is_tail(message: dict[str, Any]) -> bool:
    """A system message that holds only the cache layout's tail."""
    return message.get("role") == "system" and _is_tail_text(message.get("content"))


def _split_user(message: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """A user message's leading tail (``""`` for none) and the message without it."""
    content = message.get("content")
    if isinstance(content, str) and content.startswith(_OPEN) and _CLOSE in content:
        end = content.index(_CLOSE) + len(_CLOSE)
        return content[:end], {**message, "content": content[end:].lstrip("\n")}
    if isinstance(content, list) and content:
        first = content[0]
        if isinstance(first, dict) and _is_tail_text(first.get("text")):
            return str(first["text"]), {**message, "content": content[1:]}
    return "", message


def without_tail(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages as if the cache layout's tail were not there (the seed layout's shape)."""
    out: list[dict[str, Any]] = []
    for message in messages:
        if is_tail(message):
            continue
        if message.get("role") == "user":
            message = _split_user(message)[1]
        out.append(message)
    return out


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n\n".join(
            str(p.get("text")) for p in content if isinstance(p, dict) and "text" in p
        )
    return ""


def memory_text(messages: Sequence[dict[str, Any]]) -> str:
    """All the system text a request carries (the head and the tail, or the seed layout's one
    system message), in order, joined by blank lines."""
    parts: list[str] = []
    for message in messages:
        if message.get("role") in ("system", "developer"):
            parts.append(_text(message.get("content")))
        elif message.get("role") == "user":
            tail = _split_user(message)[0]
            if tail:
                parts.append(tail)
    return "\n\n".join(p for p in parts if p)
