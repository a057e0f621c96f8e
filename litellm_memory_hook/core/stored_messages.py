"""What is stored of a client's or the model's message: its turn, and the message kept for replay.

Pure functions. A turn (:class:`~litellm_memory_hook.core.models.Turn`) holds the message's
words (at most ``max_chars`` characters, its end kept), its tool calls or the call it answers,
and the message itself with every field, bounded (:func:`storable_message`): media never as
base64, other strings cut to :data:`MAX_FIELD_CHARS`, values a provider checks kept exactly.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from litellm_memory_hook.core.bounds import (
    CHECKED_KEYS,
    TurnLimits,
    bound_tool_calls,
    bound_turn,
    holds_checked,
    json_chars,
)
from litellm_memory_hook.core.message_text import (
    PART_PLACEHOLDERS,
    TEXT_PART_TYPES,
    content_fingerprint,
    content_text,
    is_blank,
    keep_head,
    keep_tail,
    lone_surrogate,
    without_surrogates,
)
from litellm_memory_hook.core.models import Turn

#: the roles of a conversation's messages (what is stored; system messages are not).
CONVERSATION_ROLES = frozenset({"user", "assistant", "tool"})

#: fields a client places for one request only, never stored with a message or its parts:
#: Anthropic takes at most 4 ``cache_control`` breakpoints, and a client marking each new message
#: would pass that once its stored messages were replayed with their old marks.
PER_REQUEST_KEYS: frozenset[str] = frozenset({"cache_control"})

#: longest string kept in any field of a stored message other than its text (characters).
MAX_FIELD_CHARS = 8000
#: longest stored message as JSON (characters); a larger one keeps only role, text and name.
MAX_STORED_MESSAGE_CHARS = 64_000
#: longest stored ``name`` (characters).
MAX_NAME_CHARS = 128
_MEDIA_DATA_KEYS = frozenset({"data", "file_data", "b64_json"})


def _placeholder_part(part: dict[str, Any]) -> dict[str, Any]:
    kind = str(part.get("type") or "")
    return {"type": "text", "text": PART_PLACEHOLDERS.get(kind, f"[{kind[:24]}]")}


def _is_inline_media(part: dict[str, Any]) -> bool:
    """True for a part that carries media inline (a data: URL or base64 data)."""
    for value in part.values():
        if isinstance(value, dict):
            url = value.get("url")
            if isinstance(url, str) and url.startswith("data:"):
                return True
            if any(k in value for k in _MEDIA_DATA_KEYS):
                return True
        elif isinstance(value, str) and value.startswith("data:"):
            return True
    return any(k in part for k in _MEDIA_DATA_KEYS)


def _bounded(value: Any, limit: int) -> Any:
    """A JSON value with every string cut to ``limit`` characters (keeping its start), except
    what a provider checks: a value under a :data:`~litellm_memory_hook.core.bounds.CHECKED_KEYS`
    key (an id, a signature, encrypted reasoning) and a mapping holding a signature (a thinking
    block, whose signature covers its text) are kept exactly."""
    if isinstance(value, str):
        return value if len(value) <= limit else keep_head(value, limit)
    if isinstance(value, dict):
        if holds_checked(value):
            return value
        return {
            str(k)[:128]: v if k in CHECKED_KEYS else _bounded(v, limit) for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [_bounded(v, limit) for v in value]
    if value is None or isinstance(value, bool | int | float):
        return value
    return str(value)[:limit]


def storable_message(message: dict[str, Any], *, max_chars: int = 32_000) -> dict[str, Any]:
    """The message as stored for replay: every field kept, media and sizes bounded.

    Rules: ``content`` keeps its form (a string, ``None``, ``""`` or a list of parts); a text
    longer than ``max_chars`` keeps its end (the window's rule); a part that carries media
    inline (a ``data:`` URL, base64 ``data``) becomes a text placeholder such as
    ``{"type": "text", "text": "[image]"}`` (base64 is never stored), a media part by
    URL is kept; ``name`` is cut to ``MAX_NAME_CHARS``; every other string (tool arguments,
    reasoning, unknown keys) to ``MAX_FIELD_CHARS``, but a value a provider checks (an id,
    a signature, encrypted reasoning, a thinking block holding a signature) is never cut;
    :data:`PER_REQUEST_KEYS` are left out (of the message and of its parts); when the whole
    message is still longer than
    ``MAX_STORED_MESSAGE_CHARS`` as JSON, only ``role``, the end of the text, ``name``,
    ``tool_calls`` and ``tool_call_id`` are kept.

    Returns:
        A new JSON-ready dict (the argument is not changed).
    """
    stored: dict[str, Any] = {}
    for key, value in message.items():
        if key in PER_REQUEST_KEYS:
            continue
        if key == "content":
            stored[key] = _storable_content(value, max_chars)
        elif key == "name":
            stored[key] = _bounded(value, MAX_NAME_CHARS)
        elif key == "tool_calls" and isinstance(value, list):
            stored[key] = list(bound_tool_calls(value))  # arguments stay valid JSON
        elif key == "tool_call_id" and isinstance(value, str):
            stored[key] = value  # a provider checks it against its call's id: never cut
        elif key in CHECKED_KEYS or holds_checked(value):
            stored[str(key)[:128]] = value  # audio id, reasoning signatures: never cut
        else:
            stored[str(key)[:128]] = _bounded(value, MAX_FIELD_CHARS)
    size = json_chars(stored, spaced=True)
    if size > MAX_STORED_MESSAGE_CHARS:
        # what a tool group needs stays: the calls and the id a result answers
        small: dict[str, Any] = {
            "role": message.get("role"),
            "content": keep_tail(content_text(message.get("content")), max_chars // 4) or None,
        }
        for key in ("name", "tool_calls", "tool_call_id"):
            if key in stored:
                small[key] = stored[key]
        return small
    return stored


def _storable_content(content: Any, max_chars: int) -> Any:
    if isinstance(content, str):
        return content if len(content) <= max_chars else keep_tail(content, max_chars)
    if not isinstance(content, list):
        return _bounded(content, MAX_FIELD_CHARS)
    parts: list[Any] = []
    for part in content:
        if isinstance(part, dict) and PER_REQUEST_KEYS.intersection(part):
            part = {k: v for k, v in part.items() if k not in PER_REQUEST_KEYS}
        if not isinstance(part, dict):
            parts.append(_bounded(part, MAX_FIELD_CHARS))
        elif part.get("type") in TEXT_PART_TYPES and isinstance(part.get("text"), str):
            text = part["text"]
            cut = text if len(text) <= max_chars else keep_tail(text, max_chars)
            parts.append({**_bounded(part, MAX_FIELD_CHARS), "text": cut})
        elif _is_inline_media(part):
            parts.append(_placeholder_part(part))
        else:
            parts.append(_bounded(part, MAX_FIELD_CHARS))
    return parts


def reply_words(message: dict[str, Any]) -> str:
    """A message's words wherever the provider put them: its content (a string or text parts),
    else, for a reply, its audio's transcript (an audio-output model answers with ``content:
    null``), else its refusal; ``""`` when it has none."""
    text = content_text(message.get("content"))
    if not is_blank(text) or message.get("role") != "assistant":
        return text
    audio = message.get("audio")
    transcript = audio.get("transcript") if isinstance(audio, dict) else None
    if isinstance(transcript, str) and not is_blank(transcript):
        return transcript
    refusal = message.get("refusal")
    return refusal if isinstance(refusal, str) and not is_blank(refusal) else text


def _replayable_audio(message: dict[str, Any]) -> dict[str, Any]:
    """The message with its audio reduced to the ``id`` a provider takes back in a later
    request (the transcript is the stored turn's text, never sent in ``audio``)."""
    audio = message.get("audio")
    if not isinstance(audio, dict) or set(audio) <= {"id"}:
        return message
    kept = dict(message)
    kept["audio"] = {"id": audio["id"]} if "id" in audio else None
    if kept["audio"] is None:
        del kept["audio"]
    return kept


def is_stored(message: dict[str, Any]) -> bool:
    """Whether :func:`message_to_turn` stores the message (a conversation message that is not
    blank, or a tool call or result); a blank reply a client keeps in its history is not."""
    role = message.get("role")
    if role not in CONVERSATION_ROLES:
        return False
    if role == "tool" or not is_blank(reply_words(message)):
        return True
    return role == "assistant" and any(
        isinstance(c, dict) and c.get("id") for c in message.get("tool_calls") or ()
    )


def message_to_turn(
    message: dict[str, Any], *, ts_ms: int, call_id: str = "", max_chars: int = 32_000
) -> Turn | None:
    """The turn stored for a client or model message; ``None`` when nothing is worth storing.

    Empty or invisible text (``""``, ``"   "``, ``"\\u200b"``) is never stored, unless the
    message carries ``tool_calls`` or is a tool result (a command that printed nothing
    is half of its tool group; it is replayed as the client sent it). Text longer than
    ``max_chars`` keeps its end. The message itself, every field kept, goes into
    :attr:`Turn.msg` (:func:`storable_message`). A lone surrogate anywhere in it is stored as
    U+FFFD (:func:`without_surrogates`).
    """
    if message.get("role") not in CONVERSATION_ROLES:
        return None
    if lone_surrogate(message) is not None:
        # a reply or a client's message cut inside an emoji (JSON "\\ud83d"): no UTF-8 text
        # can hold it, so it is stored with U+FFFD in its place, and a pair cut across stream
        # chunks as its character; the planner aligns a client's messages with stored turns in
        # this same form (plan.storable_forms)
        message = without_surrogates(message)
    if not is_stored(message):
        return None
    role = message.get("role")
    text = reply_words(message)
    message = _replayable_audio(message)
    tool_calls = tuple(
        c for c in (message.get("tool_calls") or ()) if isinstance(c, dict) and c.get("id")
    )
    if role != "assistant":
        tool_calls = ()
    if is_blank(text):
        text = ""
    name = message.get("name")
    content = message.get("content")
    turn = Turn(
        role=str(role),
        text=keep_tail(text, max_chars) if text else "",
        ts_ms=ts_ms,
        call_id=call_id,
        name=name if isinstance(name, str) else "",
        tool_calls=tool_calls,
        tool_call_id=str(message.get("tool_call_id") or "") if role == "tool" else "",
        fp=content_fingerprint(content) if isinstance(content, list) else "",
        msg=storable_message(message, max_chars=max_chars),
    )
    return bound_turn(turn, TurnLimits(text_chars=max(max_chars, 2)))


def messages_to_turns(
    messages: Iterable[dict[str, Any]], *, ts_ms: int, call_id: str = "", max_chars: int = 32_000
) -> list[Turn]:
    """:func:`message_to_turn` over several messages, dropping the ones not worth storing."""
    turns = (
        message_to_turn(m, ts_ms=ts_ms, call_id=call_id, max_chars=max_chars) for m in messages
    )
    return [t for t in turns if t is not None]
