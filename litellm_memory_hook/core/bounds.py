"""Bounds on every string a stored turn carries (pure; no I/O).

A stored turn is replayed with every later request of its conversation, so each of its fields
must have a bound, not only the text (issue 9 item 5: a 100,000-character ``name`` was stored
whole and sent with every request after it). :func:`bound_turn` applies these limits; the store
applies it to every turn it appends, and it is idempotent (``bound_turn(bound_turn(t)) ==
bound_turn(t)``) and returns the turn itself when nothing is over a limit, so callers may apply it
earlier too (before indexing: a turn's name is indexed for recall).

The limits (:class:`TurnLimits`, characters = Unicode code points):

========================  =========  =======================================================
field                     default    over the limit
========================  =========  =======================================================
``text``                  32,000     the end is kept, cut on a grapheme boundary, ``…`` first
                                     (as the recent window cuts; ``storage.max_message_chars``)
``name``                  128        the start is kept, cut on a grapheme boundary
``call_id`` (LiteLLM's    128        the start plus ``_`` and 16 hex digits of the SHA-256 of
call id, this package's)             the whole id
``tool_call_id``,         never cut  a provider checks them (a result must name its call's id
tool call ``id``                     exactly; LiteLLM carries Gemini's thought signature inside
                                     the id, 1,000+ characters); the calls of one turn keep
                                     their ids whole within ``checked_chars`` (262,144)
                                     together, later calls are dropped whole
tool call function name   128        the start is kept
tool call ``arguments``   32,000     shared by the turn's calls (each gets an equal share,
                                     at least 256); an over-long one becomes the valid JSON
                                     ``{"truncated_arguments": "<start>", "original_chars": n}``
tool calls per turn       128        later calls are dropped
other keys of a tool      8,000      per call, kept whole when their JSON fits, else dropped
call (``index``, provider            (opaque provider data such as signatures must not be cut);
fields)                              a value holding a provider-checked key
                                     (:data:`CHECKED_KEYS`: signatures, encrypted reasoning)
                                     is always kept whole
any other field of        64,000     shared by the turn's other fields (``msg``, the message as
the turn                             sent): a string field keeps its start (``…`` last); a list
                                     or mapping is kept whole when its compact JSON fits the
                                     remaining budget, else emptied (``msg`` then replays from
                                     the stored text; ``messages.storable_message`` keeps it
                                     under this already)
========================  =========  =======================================================

``ctx`` (recall context keys, made by :mod:`litellm_memory_hook.core.recall`, at most 64 of 40
code points) and ``fp`` (16 hex digits) are produced by this package and left alone. A field
declared ``derived`` in its dataclass metadata (a serialisation of the others, such as the exact
JSON an import writes back) is never cut: when bounding changes the turn it is reset to its
default, so that it is made again from the bounded fields. Meta values
written with a conversation (raw ids, alias) are bounded by :func:`bound_meta_value`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson
import regex

from litellm_memory_hook.core.models import Turn

__all__ = [
    "CHECKED_KEYS",
    "META_VALUE_CHARS",
    "TurnLimits",
    "bound_id",
    "bound_meta_value",
    "bound_tool_calls",
    "bound_turn",
    "cut_head",
    "cut_tail",
    "holds_checked",
]

ELLIPSIS = "…"
#: longest value of a meta field written with a new conversation (raw ids, alias, namespace).
META_VALUE_CHARS = 1024
#: the share of the arguments budget a tool call always gets, however many calls a turn has.
MIN_ARGUMENTS_SHARE = 256

_GRAPHEME = regex.compile(r"\X")
#: fields of a turn handled by name; any other field counts against ``extra_chars``.
_OWN_FIELDS = frozenset(
    {
        "role",
        "text",
        "ts_ms",
        "seq",
        "call_id",
        "name",
        "tool_calls",
        "tool_call_id",
        "partial",
        "joined",
        "ctx",
        "fp",
    }
)
_CALL_KEYS = frozenset({"id", "type", "function"})

#: keys whose values a provider checks when they come back in a request: ids a result names,
#: signatures over reasoning, encrypted reasoning, audio ids. A value under one of them, and a
#: mapping holding one (a thinking block: its signature covers its text), is never cut.
CHECKED_KEYS = frozenset(
    {
        "id",
        "tool_call_id",
        "signature",
        "thought_signature",
        "thoughtSignature",
        "thought_signatures",
        "encrypted_content",
        "reasoning_signature",
    }
)
#: of :data:`CHECKED_KEYS`, those that make the whole mapping holding them sealed.
_SEALING_KEYS = CHECKED_KEYS - {"id", "tool_call_id"}


def holds_checked(value: object, depth: int = 0) -> bool:
    """True when ``value`` (decoded JSON) holds a provider-checked value that seals what holds
    it: a mapping with a signature or encrypted content at any depth (up to 8), or an
    Anthropic ``redacted_thinking`` block. Such a value is kept whole or left out whole."""
    if depth > 8:
        return False
    if isinstance(value, dict):
        if value.get("type") == "redacted_thinking" or _SEALING_KEYS.intersection(value):
            return True
        return any(holds_checked(v, depth + 1) for v in value.values())
    if isinstance(value, list | tuple):
        return any(holds_checked(v, depth + 1) for v in value)
    return False


@dataclass(frozen=True)
class TurnLimits:
    """The limits of :func:`bound_turn`, in characters (code points) unless named otherwise.

    Attributes:
        text_chars: the turn's text (``storage.max_message_chars``); the end is kept.
        name_chars: the speaker ``name``.
        id_chars: ``call_id`` (LiteLLM's call id; tool call ids are never cut).
        checked_chars: the tool call ids of one turn together (calls past it are dropped
            whole, never cut).
        tool_name_chars: each tool call's function name.
        arguments_chars: the tool-call arguments of one turn together.
        tool_calls: most tool calls kept per turn (a count).
        call_extra_chars: the JSON of a tool call's other keys, per call.
        extra_chars: the other fields of the turn together (JSON characters for lists and
            mappings).
    """

    text_chars: int = 32_000
    name_chars: int = 128
    id_chars: int = 128
    tool_name_chars: int = 128
    arguments_chars: int = 32_000
    tool_calls: int = 128
    call_extra_chars: int = 8000
    extra_chars: int = 64_000
    checked_chars: int = 262_144


def cut_head(text: str, limit: int, *, mark: str = "") -> str:
    """The start of ``text`` within ``limit`` characters (``mark`` included), never splitting a
    grapheme cluster; ``text`` itself when it fits."""
    if len(text) <= limit:
        return text
    room = max(0, limit - len(mark))
    end = 0
    for match in _GRAPHEME.finditer(text, 0, min(len(text), room + 64)):
        if match.end() > room:
            break
        end = match.end()
    return text[:end] + mark if limit >= len(mark) else ""


def cut_tail(text: str, limit: int) -> str:
    """The end of ``text`` within ``limit`` characters, ``…`` first, never splitting a grapheme
    cluster; ``text`` itself when it fits."""
    if len(text) <= limit:
        return text
    start = len(text) - max(0, limit - 1)
    margin = max(0, start - 64)
    for match in _GRAPHEME.finditer(text, margin):
        if match.start() >= start:
            return ELLIPSIS + text[match.start() :]
    return ELLIPSIS if limit >= 1 else ""


def bound_id(value: str, limit: int = 128) -> str:
    """An id within ``limit`` characters: itself when it fits, else its start, ``_`` and 16 hex
    digits of the SHA-256 of the whole id (deterministic, so a tool call and its result, or a
    retried write and its first try, still carry the same id)."""
    if len(value) <= limit:
        return value
    digest = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return value[: max(0, limit - 17)] + "_" + digest


def bound_meta_value(value: str, limit: int = META_VALUE_CHARS) -> str:
    """A meta field's value within ``limit`` characters (its start)."""
    return cut_head(value, limit)


def json_chars(value: object, *, spaced: bool = False) -> int:
    """Characters of ``value`` as JSON, non-ASCII kept (``json.dumps(value,
    ensure_ascii=False, default=str)``, compact separators unless ``spaced``: ``", "`` and
    ``": "`` as json's defaults). orjson writes it (5-10x faster than :mod:`json`, which ran
    twice for every stored message); what orjson refuses (a lone surrogate, an integer over
    64 bits) and floats (written differently) go through :mod:`json`."""
    try:
        if _has_float(value):
            raise TypeError("a float")
        size = len(orjson.dumps(value, default=str, option=orjson.OPT_NON_STR_KEYS).decode())
    except (TypeError, ValueError):
        try:
            separators = (", ", ": ") if spaced else (",", ":")
            return len(json.dumps(value, ensure_ascii=False, separators=separators, default=str))
        except (TypeError, ValueError):
            return 1 << 62  # not serialisable as JSON: never fits
    return size + _separators(value) if spaced else size


def _has_float(value: object) -> bool:
    if type(value) is float:
        return True
    if isinstance(value, dict):
        return any(_has_float(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(_has_float(v) for v in value)
    return False


def _separators(value: object) -> int:
    """The spaces json's default separators add: one after each ``,`` and each ``:``."""
    if isinstance(value, dict):
        inner = sum(_separators(v) for v in value.values())
        return 2 * len(value) - 1 + inner if value else 0
    if isinstance(value, list | tuple):
        return len(value) - 1 + sum(_separators(v) for v in value) if value else 0
    return 0


_json_chars = json_chars


def _bound_arguments(arguments: str, share: int) -> str:
    if len(arguments) <= share:
        return arguments
    head = arguments[: max(0, share - 64)]
    while True:
        out = json.dumps(
            {"truncated_arguments": head, "original_chars": len(arguments)}, ensure_ascii=False
        )
        if len(out) <= share or not head:
            return out
        head = head[: max(0, len(head) - (len(out) - share) - 1)]


def _bound_call(call: Any, limits: TurnLimits, share: int) -> Any:
    if not isinstance(call, dict):
        return call
    out: dict[str, Any] = {}
    extra_used = 0
    for key, value in call.items():
        if key == "id" and isinstance(value, str):
            out[key] = value  # a provider checks it: never cut
        elif key == "type" and isinstance(value, str):
            out[key] = cut_head(value, limits.tool_name_chars)
        elif key == "function" and isinstance(value, dict):
            function = dict(value)
            if isinstance(function.get("name"), str):
                function["name"] = cut_head(function["name"], limits.tool_name_chars)
            if isinstance(function.get("arguments"), str):
                function["arguments"] = _bound_arguments(function["arguments"], share)
            for name in [k for k in function if k not in ("name", "arguments")]:
                size = _json_chars(function[name]) + len(str(name))
                if extra_used + size > limits.call_extra_chars:
                    del function[name]
                else:
                    extra_used += size
            out[key] = function
        elif key in CHECKED_KEYS or holds_checked(value):
            if _json_chars(value) <= limits.checked_chars:  # a signature: whole or not at all
                out[key] = value
        else:
            size = _json_chars(value) + len(str(key))
            if extra_used + size <= limits.call_extra_chars:
                out[key] = value
                extra_used += size
    return out


def _calls_fit(calls: tuple[Any, ...], limits: TurnLimits) -> bool:
    if len(calls) > limits.tool_calls:
        return False
    arguments = ids = 0
    for call in calls:
        if not isinstance(call, dict):
            continue
        if set(call) - _CALL_KEYS:
            return False  # other keys: checked (cheaply enough) by _bound_call
        ids += len(str(call.get("id") or ""))
        if ids > limits.checked_chars:
            return False
        if len(str(call.get("type") or "")) > limits.tool_name_chars:
            return False
        function = call.get("function")
        if isinstance(function, dict):
            if set(function) - {"name", "arguments"}:
                return False
            if len(str(function.get("name") or "")) > limits.tool_name_chars:
                return False
            arguments += len(str(function.get("arguments") or ""))
    return arguments <= limits.arguments_chars


def _bound_calls(calls: tuple[Any, ...], limits: TurnLimits) -> tuple[Any, ...]:
    if _calls_fit(calls, limits):
        return calls
    kept = calls[: limits.tool_calls]
    ids = 0
    for end, call in enumerate(kept):
        ids += len(str(call.get("id") or "")) if isinstance(call, dict) else 0
        if ids > limits.checked_chars:  # ids are never cut: later calls go whole
            kept = kept[:end]
            break
    lengths = [
        len(c["function"]["arguments"])
        for c in kept
        if isinstance(c, dict)
        and isinstance(c.get("function"), dict)
        and isinstance(c["function"].get("arguments"), str)
    ]
    share = limits.arguments_chars
    if sum(lengths) > limits.arguments_chars:
        share = max(MIN_ARGUMENTS_SHARE, limits.arguments_chars // max(1, len(lengths)))
    bounded = tuple(_bound_call(c, limits, share) for c in kept)
    return calls if bounded == calls else bounded


def _bound_extra(turn: Turn, limits: TurnLimits) -> dict[str, Any]:
    """Changes to fields of the turn other than the ones this module knows by name."""
    changes: dict[str, Any] = {}
    budget = limits.extra_chars
    for name in _extra_fields(type(turn)):
        value = getattr(turn, name)
        kept: Any
        if isinstance(value, str):
            kept = cut_head(value, max(0, budget), mark=ELLIPSIS)
            budget -= len(kept)
        elif isinstance(value, dict | list | tuple):
            size = _json_chars(value) if value else 0
            if size > budget:
                kept = type(value)()
            else:
                kept = value
                budget -= size
        else:
            continue
        if kept is not value and kept != value:
            changes[name] = kept
    return changes


_EXTRA_FIELDS: dict[str, tuple[str, ...]] = {}


_FIELDS: dict[type, tuple[dataclasses.Field[Any], ...]] = {}


def _fields_of(kind: type[Turn]) -> tuple[dataclasses.Field[Any], ...]:
    """``dataclasses.fields`` of a turn class, once per class (it walks them on every call:
    a third of planning a 500-message history)."""
    found = _FIELDS.get(kind)
    if found is None:
        found = _FIELDS[kind] = dataclasses.fields(kind)
    return found


def _extra_fields(kind: type[Turn]) -> tuple[str, ...]:
    """The fields of a turn class other than the ones this module knows by name (read once
    per class: :func:`dataclasses.fields` was a seventh of storing a message)."""
    name = f"{kind.__module__}.{kind.__qualname__}"
    found = _EXTRA_FIELDS.get(name)
    if found is None:
        found = tuple(
            item.name
            for item in _fields_of(kind)
            if item.name not in _OWN_FIELDS and not item.metadata.get("derived")
        )
        _EXTRA_FIELDS[name] = found
    return found


def bound_tool_calls(calls: Sequence[Any], limits: TurnLimits | None = None) -> tuple[Any, ...]:
    """An OpenAI ``tool_calls`` list within ``limits`` (ids, names, arguments as valid JSON,
    other keys whole or dropped, at most ``limits.tool_calls`` calls), for a stored message's
    own copy of its calls. The same calls in, the same calls out (deterministic)."""
    return _bound_calls(tuple(calls), limits or DEFAULT_LIMITS)


def bound_turn(turn: Turn, limits: TurnLimits | None = None) -> Turn:
    """The turn with every field within ``limits`` (see the module docstring).

    Returns:
        ``turn`` itself when nothing is over a limit, else a copy with the long fields cut.
        Idempotent.
    """
    limits = limits or DEFAULT_LIMITS
    changes: dict[str, Any] = {}
    if len(turn.text) > limits.text_chars:
        changes["text"] = cut_tail(turn.text, limits.text_chars)
    if len(turn.name) > limits.name_chars:
        changes["name"] = cut_head(turn.name, limits.name_chars)
    if len(turn.call_id) > limits.id_chars:
        changes["call_id"] = bound_id(turn.call_id, limits.id_chars)
    if turn.tool_calls:
        calls = _bound_calls(turn.tool_calls, limits)
        if calls is not turn.tool_calls:
            changes["tool_calls"] = calls
    fields = _fields_of(type(turn))
    if len(fields) > len(_OWN_FIELDS):
        changes.update(_bound_extra(turn, limits))
    if not changes:
        return turn
    for item in fields:
        if item.metadata.get("derived"):  # made again from the bounded fields
            changes[item.name] = item.default
    return dataclasses.replace(turn, **changes)


DEFAULT_LIMITS = TurnLimits()
