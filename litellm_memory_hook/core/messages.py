"""OpenAI chat message shapes: text of content parts, malformed entries, the new turn.

Pure functions. A message is the dict a client sends (``role``, ``content``, optional ``name``,
``tool_calls``, ``tool_call_id``). ``content`` may be a string, ``None`` or a list of parts
(``{"type": "text", "text": ...}``, ``image_url``, ``input_audio``, ``file``, ...).
"""

from __future__ import annotations

import hashlib
import json
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import regex

from litellm_memory_hook.core.models import Turn

#: placeholders stored instead of non-text parts (never base64; case C25).
PART_PLACEHOLDERS = {
    "image_url": "[image]",
    "image": "[image]",
    "input_image": "[image]",
    "input_audio": "[audio]",
    "audio": "[audio]",
    "file": "[file]",
    "input_file": "[file]",
    "document": "[file]",
}

#: part types whose ``text`` is the message's text.
TEXT_PART_TYPES = frozenset({"text", "input_text", "output_text"})

_INVISIBLE = regex.compile(r"[\p{Cc}\p{Cf}\p{Z}\s]+")
_GRAPHEME = regex.compile(r"\X")
_CONVERSATION_ROLES = frozenset({"user", "assistant", "tool"})
_SYSTEM_ROLES = frozenset({"system", "developer"})
ELLIPSIS = "…"


def content_text(content: object) -> str:
    """The text of a message's ``content``: a string as is; parts joined by a line break.

    Text parts give their text; image, audio and file parts give a short placeholder such as
    ``[image]``; unknown part types give ``[<type>]``; malformed parts are skipped. ``None`` and
    anything else give ``""``.
    """
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    pieces: list[str] = []
    for part in content:
        if isinstance(part, str):
            pieces.append(part)
        elif isinstance(part, dict):
            kind = part.get("type")
            if kind in TEXT_PART_TYPES:
                if isinstance(part.get("text"), str):
                    pieces.append(part["text"])
            elif isinstance(kind, str) and kind:
                pieces.append(PART_PLACEHOLDERS.get(kind, f"[{kind[:24]}]"))
    return "\n".join(p for p in pieces if p)


def content_fingerprint(content: object) -> str:
    """16 hex digits of SHA-256 over the canonical JSON of a message's content (all parts)."""
    canonical = json.dumps(content, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


def is_blank(text: str) -> bool:
    """True when the text has nothing visible (white space, zero-width and control characters)."""
    stripped = text.strip()
    if stripped and unicodedata.category(stripped[0])[0] not in "CZ":
        return False  # fast path: a visible first character
    return not _INVISIBLE.sub("", text)


def keep_tail(text: str, limit: int) -> str:
    """Keep the end of ``text`` within ``limit`` characters, cut on a grapheme boundary.

    A cut text starts with ``…`` (counted in the limit). Whole grapheme clusters only: an emoji
    ZWJ sequence or a Devanagari conjunct is never split (case C22 d).

    Raises:
        ValueError: ``limit`` < 2.
    """
    if limit < 2:
        raise ValueError("limit must be at least 2 characters")
    if len(text) <= limit:
        return text
    start = len(text) - (limit - 1)
    margin = max(0, start - 64)
    window = text[margin:]
    for match in _GRAPHEME.finditer(window):
        if match.start() + margin >= start:
            return ELLIPSIS + text[match.start() + margin :]
    return ELLIPSIS


def keep_head(text: str, limit: int) -> str:
    """Keep the start of ``text`` within ``limit`` characters, cut on a grapheme boundary.

    A cut text ends with ``…`` (counted in the limit); no grapheme cluster is split.

    Raises:
        ValueError: ``limit`` < 2.
    """
    if limit < 2:
        raise ValueError("limit must be at least 2 characters")
    if len(text) <= limit:
        return text
    end = 0
    for match in _GRAPHEME.finditer(text, 0, min(len(text), limit + 64)):
        if match.end() > limit - 1:
            break
        end = match.end()
    return text[:end] + ELLIPSIS


def clean_messages(raw: object) -> list[dict[str, Any]]:
    """The well-formed messages of a request: dicts with a string role; others skipped (C25)."""
    if not isinstance(raw, list):
        return []
    return [m for m in raw if isinstance(m, dict) and isinstance(m.get("role"), str)]


def message_chars(message: dict[str, Any]) -> int:
    """Characters a message costs in the window: its text plus its tool-call arguments."""
    total = len(content_text(message.get("content")))
    for call in message.get("tool_calls") or ():
        if isinstance(call, dict):
            function = call.get("function") or {}
            total += len(str(function.get("name", ""))) + len(str(function.get("arguments", "")))
    return total


@dataclass(frozen=True)
class SplitRequest:
    """A request's messages split into parts.

    Attributes:
        system_texts: text of every system / developer message, in order.
        earlier: the conversation messages before the new turn.
        new: the new turn: the trailing user / tool messages (with the assistant ``tool_calls``
            message they answer, when the turn is a tool result).
    """

    system_texts: tuple[str, ...]
    earlier: tuple[dict[str, Any], ...]
    new: tuple[dict[str, Any], ...]


def split_request(messages: Sequence[dict[str, Any]]) -> SplitRequest:
    """Split clean messages into system texts, earlier history and the new turn."""
    system_texts = tuple(
        content_text(m.get("content")) for m in messages if m.get("role") in _SYSTEM_ROLES
    )
    convo = [m for m in messages if m.get("role") in _CONVERSATION_ROLES]
    cut = len(convo)
    while cut > 0 and convo[cut - 1].get("role") in ("user", "tool"):
        cut -= 1
    new = convo[cut:]
    if new and new[0].get("role") == "tool" and cut > 0 and convo[cut - 1].get("tool_calls"):
        cut -= 1
        new = convo[cut:]
    return SplitRequest(system_texts, tuple(convo[:cut]), tuple(new))


def message_to_turn(
    message: dict[str, Any], *, ts_ms: int, call_id: str = "", max_chars: int = 32_000
) -> Turn | None:
    """The turn stored for a client or model message; ``None`` when nothing is worth storing.

    Empty or invisible text (``""``, ``"   "``, ``"\\u200b"``) is never stored, unless the
    message carries ``tool_calls`` (case C26). Text longer than ``max_chars`` keeps its end.
    """
    role = message.get("role")
    if role not in _CONVERSATION_ROLES:
        return None
    text = content_text(message.get("content"))
    tool_calls = tuple(
        c for c in (message.get("tool_calls") or ()) if isinstance(c, dict) and c.get("id")
    )
    if role != "assistant":
        tool_calls = ()
    if is_blank(text):
        if not tool_calls:
            return None
        text = ""
    name = message.get("name")
    content = message.get("content")
    return Turn(
        role=str(role),
        text=keep_tail(text, max_chars) if text else "",
        ts_ms=ts_ms,
        call_id=call_id,
        name=name if isinstance(name, str) and role == "user" else "",
        tool_calls=tool_calls,
        tool_call_id=str(message.get("tool_call_id") or "") if role == "tool" else "",
        fp=content_fingerprint(content) if isinstance(content, list) else "",
    )


def messages_to_turns(
    messages: Iterable[dict[str, Any]], *, ts_ms: int, call_id: str = "", max_chars: int = 32_000
) -> list[Turn]:
    """:func:`message_to_turn` over several messages, dropping the ones not worth storing."""
    turns = (
        message_to_turn(m, ts_ms=ts_ms, call_id=call_id, max_chars=max_chars) for m in messages
    )
    return [t for t in turns if t is not None]
