"""OpenAI chat message shapes: text of content parts, malformed entries, the new turn.

Pure functions. A message is the dict a client sends (``role``, ``content``, optional ``name``,
``tool_calls``, ``tool_call_id``). ``content`` may be a string, ``None`` or a list of parts
(``{"type": "text", "text": ...}``, ``image_url``, ``input_audio``, ``file``, ...).
"""

from __future__ import annotations

import hashlib
import json
import unicodedata
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
import regex

from litellm_memory_hook.core.bounds import (
    CHECKED_KEYS,
    TurnLimits,
    bound_tool_calls,
    bound_turn,
    holds_checked,
    json_chars,
)
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


_PLACEHOLDER_TEXTS = frozenset(PART_PLACEHOLDERS.values())


def typed_text(content: object) -> str:
    """The words the sender wrote in a message's ``content``: a string as is; text parts
    joined by a line break. Unlike :func:`content_text`, an image, audio or file part gives
    nothing, nor does the placeholder part a stored message holds in its place (``[image]``):
    it is no word of the sender's language, so a question in Arabic sent with a photo is
    still a message in Arabic script."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    pieces = [
        part if isinstance(part, str) else part["text"]
        for part in content
        if isinstance(part, str)
        or (
            isinstance(part, dict)
            and part.get("type") in TEXT_PART_TYPES
            and isinstance(part.get("text"), str)
            and part["text"] not in _PLACEHOLDER_TEXTS
        )
    ]
    return "\n".join(p for p in pieces if p)


_SURROGATE = regex.compile(r"[\ud800-\udfff]")


def lone_surrogate(value: object, where: str = "") -> tuple[str, str] | None:
    """The first string in ``value`` (a decoded JSON value: strings, lists, objects and their
    keys) that holds a surrogate code point, which no UTF-8 text can (JSON's ``"\\ud800"``
    escape decodes to one): ``(where, code)`` with ``where`` its path below ``where``
    (``content[0].text``; ``""`` for ``value`` itself) and ``code`` the code point as
    ``\\ud800``; ``None`` when every string is Unicode text. Such a string cannot be stored
    or printed. One C-speed pass (orjson refuses a surrogate) clears the common case; the walk
    runs only to find where one is (or for a value orjson cannot encode)."""
    if not where:
        try:
            orjson.dumps(value)
        except (TypeError, orjson.JSONEncodeError):
            pass  # a surrogate somewhere, or a value orjson cannot encode: the walk decides
        else:
            return None
    if isinstance(value, str):
        found = _SURROGATE.search(value)
        return None if found is None else (where, f"\\u{ord(found.group()):04x}")
    if isinstance(value, list):
        for i, item in enumerate(value):
            if (hit := lone_surrogate(item, f"{where}[{i}]")) is not None:
                return hit
    elif isinstance(value, dict):
        for key, item in value.items():
            shown = str(key).encode("utf-8", "backslashreplace").decode("utf-8")
            path = f"{where}.{shown}" if where else shown
            if (hit := lone_surrogate(key, path)) is not None:
                return (f"{path} (its name)", hit[1])
            if (hit := lone_surrogate(item, path)) is not None:
                return hit
    return None


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
            if m.get("role") in _CONVERSATION_ROLES and i != self.prefill
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
    ``{"type": "text", "text": "[image]"}`` (case C25: base64 is never stored), a media part by
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


def without_surrogates(value: Any) -> Any:
    """The form of a decoded JSON value that Redis can hold: surrogate pairs joined into their
    characters (an emoji a stream cut across two chunks), lone surrogates (JSON ``"\\ud83d"``,
    which no UTF-8 text can hold) replaced by U+FFFD.

    Args:
        value: a string, or lists and objects (keys included) of them; other values (numbers,
            ``None``, booleans) are returned as they are.

    Returns:
        A new value of the same shape (a string is returned as it is when it holds no
        surrogate); the argument is not changed. Applying it twice gives the same value.
    """
    if isinstance(value, str):
        if _SURROGATE.search(value) is None:
            return value
        return value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    if isinstance(value, list):
        return [without_surrogates(v) for v in value]
    if isinstance(value, dict):
        return {without_surrogates(k): without_surrogates(v) for k, v in value.items()}
    return value


def reply_words(message: dict[str, Any]) -> str:
    """A message's words wherever the provider put them: its content (a string or text parts),
    else, for a reply, its audio's transcript (an audio-output model answers with ``content:
    null``: case E03), else its refusal; ``""`` when it has none."""
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
    if role not in _CONVERSATION_ROLES:
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
    message carries ``tool_calls`` or is a tool result (case C26: a command that printed nothing
    is half of its tool group; it is replayed as the client sent it). Text longer than
    ``max_chars`` keeps its end. The message itself, every field kept, goes into
    :attr:`Turn.msg` (:func:`storable_message`). A lone surrogate anywhere in it is stored as
    U+FFFD (:func:`without_surrogates`).
    """
    if message.get("role") not in _CONVERSATION_ROLES:
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
