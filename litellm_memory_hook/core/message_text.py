"""The text of a chat message's content, and text cut to a budget.

Pure functions. ``content`` may be a string, ``None`` or a list of parts (``{"type": "text",
"text": ...}``, ``image_url``, ``input_audio``, ``file``, ...); its text joins the text parts by
a line break, with a short placeholder such as ``[image]`` for media. Budgets are in characters
(code points); a cut keeps whole grapheme clusters and marks itself with ``…``. Surrogate code
points (JSON's ``"\\ud800"``), which no UTF-8 text can hold, are found and replaced here.
"""

from __future__ import annotations

import hashlib
import json
import unicodedata
from typing import Any

import orjson
import regex

#: placeholders stored instead of non-text parts (never base64).
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
    ZWJ sequence or a Devanagari conjunct is never split.

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
