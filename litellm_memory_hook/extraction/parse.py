"""Tolerant parsing and cleaning of an extraction reply.

Two steps, both pure:

1. :func:`~litellm_memory_hook.extraction.reply_json.find_json` finds the JSON value in the
   model's reply text: inside a code fence of any kind or with prose around it, repaired where
   that is safe, in time linear in the reply's length.
2. :func:`parse_extraction` checks its shape with :class:`ExtractionReply` (a pydantic model) and
   cleans the items: the rules are listed there and are the contract with the worker.

:func:`clean_text`, :func:`fact_key` and :func:`fact_hash` are shared with the memory API, so
that a memory a user writes, deletes or pins is compared by the same rules as one the model
returns.
"""

from __future__ import annotations

import hashlib
import unicodedata
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import regex
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from litellm_memory_hook.core.escape import ANGLE_CLOSE, ANGLE_OPEN
from litellm_memory_hook.core.messages import ELLIPSIS, keep_head
from litellm_memory_hook.errors import ExtractionError
from litellm_memory_hook.extraction.instructions import is_instruction
from litellm_memory_hook.extraction.reply_json import MAX_REPLY_CHARS, find_json

__all__ = [
    "DROP_RULES",
    "MAX_REPLY_CHARS",
    "ExtractionReply",
    "ExtractionResult",
    "MemoryDelete",
    "MemoryUpdate",
    "clean_text",
    "fact_hash",
    "fact_key",
    "find_json",
    "is_instruction",
    "parse_extraction",
    "repeats_pinned",
]

DROP_RULES: Final[tuple[str, ...]] = (
    "not_text",
    "empty",
    "invalid_text",
    "instruction",
    "too_long_cut",
    "tombstoned",
    "pinned",
    "duplicate",
    "over_cap",
    "summary_not_text",
    "summary_too_long_cut",
)
"""Every key :attr:`ExtractionResult.dropped` can hold (see :func:`parse_extraction`)."""

# ---------------------------------------------------------------------------------------------
# Cleaning and comparing texts
# ---------------------------------------------------------------------------------------------

_JOINERS: Final = "\u200c\u200d"  # ZWNJ, ZWJ: Indic and Persian words need them

# Terminal escape sequences (ANSI CSI, OSC) are removed whole, so no "[31m" residue stays.
_TERMINAL_ESCAPE: Final = regex.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]|(?:\x1b\]|\x9d)[^\x00-\x1f\x7f-\x9f]*(?:\x07|\x1b\\|\x9c)"
)
# Whitespace as Unicode defines it (line breaks, U+2028/U+2029, NBSP, ...), plus U+001C-U+001F,
# which Python's str.split() and splitlines() treat as whitespace too.
_WHITESPACE_RUN: Final = regex.compile(r"[\p{White_Space}\x1c-\x1f]+")
_INVISIBLE: Final = regex.compile(r"[[\p{Cc}\p{Cf}\p{Cs}]--[" + _JOINERS + r"]]+", regex.V1)
# A joiner with nothing to join (at either end of the text or next to a space).
_LOOSE_JOINER: Final = regex.compile(rf"(?<!\S)[{_JOINERS}]+|[{_JOINERS}]+(?!\S)")
_KEY_REMOVED: Final = regex.compile(r"[\p{P}\p{S}\p{C}]+")


def _collapse(text: str) -> str:
    return _WHITESPACE_RUN.sub(" ", text).strip(" ")


def clean_text(text: str) -> str:
    """Clean one memory or summary text for storage.

    Terminal escape sequences (``ESC [31m``) are removed whole; every whitespace run (line
    breaks, tabs, U+2028/U+2029, no-break spaces) becomes one space; control characters,
    format characters (bidirectional controls, zero-width space, BOM, ...) and surrogate code
    points are removed, except ZWNJ/ZWJ (U+200C/U+200D) between two visible characters, which
    Indic scripts need; the result is NFC-normalised and has no space at either end.

    Args:
        text: Any string.

    Returns:
        The cleaned text, ``""`` when nothing visible remains. Idempotent.
    """
    cleaned = _TERMINAL_ESCAPE.sub("", text)
    cleaned = _WHITESPACE_RUN.sub(" ", cleaned)
    cleaned = _INVISIBLE.sub("", cleaned)
    cleaned = _LOOSE_JOINER.sub("", _collapse(cleaned))
    return _collapse(unicodedata.normalize("NFC", cleaned))


#: The model read the new lines escaped (:func:`~litellm_memory_hook.core.escape.escape_data`
#: turns ``<`` ``>`` into ``‹`` ``›``) and copies the look-alikes into what it writes; its
#: memories and summary get ASCII brackets back, which every prompt escapes again where it
#: places them, so the model sees the same text and a person reading the memories sees the
#: user's ``<3`` rather than ``‹3``. A ``‹`` the user typed also becomes ``<`` (rare; the
#: prompt shows it as ``‹`` either way). :func:`fact_key` drops both forms alike.
_BRACKETS_BACK: Final = str.maketrans({ANGLE_OPEN: "<", ANGLE_CLOSE: ">"})


def model_text(text: str) -> str:
    """A text the extraction model wrote, cleaned: angle brackets back from their escaped
    look-alikes (``‹`` ``›`` to ``<`` ``>``), then :func:`clean_text`."""
    return clean_text(text.translate(_BRACKETS_BACK))


def fact_key(text: str) -> str:
    """The comparison key of a fact: equal keys mean the same fact.

    NFKC, casefolded (and NFKC again), punctuation, symbols and control, format, surrogate,
    private-use and unassigned code points removed, whitespace runs collapsed to one space,
    stripped. ``"Lives in Pune"`` and ``"  lives in PUNE."`` give ``"lives in pune"``; letters
    and combining marks of any script are kept (Devanagari vowel signs too).

    Args:
        text: Any string.

    Returns:
        The key; ``""`` when the text has no letter, mark or number.
    """
    folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())
    return _collapse(_KEY_REMOVED.sub("", folded))


def fact_hash(text: str) -> str:
    """The tombstone hash of a fact.

    Args:
        text: Any string.

    Returns:
        The first 16 hex digits of SHA-256 over the UTF-8 of :func:`fact_key` of ``text``.
    """
    return hashlib.sha256(fact_key(text).encode("utf-8")).hexdigest()[:16]


def _cut(text: str, limit: int) -> str:
    """``text`` within ``limit`` characters, cut on a grapheme boundary and ending in ``…``."""
    if len(text) <= limit:
        return text
    head = keep_head(text, limit)[: -len(ELLIPSIS)].rstrip()
    return head + ELLIPSIS


# ---------------------------------------------------------------------------------------------
# The reply's shape and the cleaned result
# ---------------------------------------------------------------------------------------------


class ExtractionReply(BaseModel):
    """The top-level shape of an extraction reply: ``{"memories": [...], "summary": ...}``.

    Both keys are required; ``memories`` must be a list (its items and the summary's type are
    checked by :func:`parse_extraction`, which counts what it drops); other keys are ignored.
    """

    model_config = ConfigDict(extra="ignore", frozen=True)

    memories: list[Any] = Field(strict=True)
    summary: Any


@dataclass(frozen=True)
class MemoryUpdate:
    """An update the model asked for: the stored memory ``old`` (as the model copied it,
    cleaned) becomes ``new`` (cleaned and checked as a new memory is)."""

    old: str
    new: str


@dataclass(frozen=True)
class MemoryDelete:
    """A delete the model asked for: the stored memory ``old`` (cleaned) and ``because``, the
    fact the model gave as contradicting it (cleaned; ``""`` when it gave none)."""

    old: str
    because: str


@dataclass(frozen=True)
class ExtractionResult:
    """A cleaned extraction reply.

    Attributes:
        memories: With ``listed`` (the list shape ``{"memories": [...]}``), the model's whole
            updated list; else (the operations shape) the memories to add. In reply order, each
            cleaned, cut and unique by :func:`fact_key`.
        summary: The new summary (cleaned, cut; ``""`` is a valid empty summary), or ``None``
            when the reply's summary was not a string: keep the stored summary.
        dropped: Rule name (from :data:`DROP_RULES`) -> how many items it dropped or cut;
            rules that did not fire are absent.
        listed: ``True`` for the list shape, ``False`` for the operations shape.
        updates: The operations shape's updates, in reply order (their new texts passed the
            item rules; an update whose new text did not is dropped whole).
        deletes: The operations shape's deletes, in reply order.
    """

    memories: tuple[str, ...]
    summary: str | None
    dropped: dict[str, int] = field(default_factory=dict)
    listed: bool = True
    updates: tuple[MemoryUpdate, ...] = ()
    deletes: tuple[MemoryDelete, ...] = ()


_ITEM_TEXT_KEYS: Final = ("text", "fact", "memory", "content")
#: the operations shape's keys, and where an update or delete names its memory and reason.
OPERATION_KEYS: Final = ("add", "update", "delete")
_OLD_KEYS: Final = ("old", "memory", "from", "current")
_NEW_KEYS: Final = ("new", "to", "updated", "text", "fact")
_BECAUSE_KEYS: Final = ("because", "reason", "contradiction", "why")
_PLACEHOLDER_KEYS: Final = frozenset({"none", "null", "na", "nil", "empty", "nothing"})


def _item_text(item: object) -> str | None:
    if isinstance(item, str):
        return item
    if isinstance(item, dict):
        for key in _ITEM_TEXT_KEYS:
            value = item.get(key)
            if isinstance(value, str):
                return value
    return None


class OperationsReply(BaseModel):
    """The operations shape: ``{"add": [...], "update": [...], "delete": [...], "summary"}``.

    ``summary`` is required; each of the three lists defaults to ``[]``, but a reply is of this
    shape only when it holds at least one of their keys (:func:`_is_operations`).
    """

    model_config = ConfigDict(extra="ignore", frozen=True)

    add: list[Any] = Field(default_factory=list, strict=True)
    update: list[Any] = Field(default_factory=list, strict=True)
    delete: list[Any] = Field(default_factory=list, strict=True)
    summary: Any


def _is_operations(value: object) -> bool:
    return isinstance(value, dict) and any(key in value for key in OPERATION_KEYS)


def _first_text(item: dict[Any, Any], keys: Sequence[str]) -> str | None:
    for key in keys:
        value = item.get(key)
        if isinstance(value, str):
            return value
    return None


def _update_of(item: object) -> tuple[str, str] | None:
    """An update item's (old, new) texts: ``{"old": ..., "new": ...}`` (or the other key names
    of :data:`_OLD_KEYS` and :data:`_NEW_KEYS`) or ``[old, new]``; ``None`` for anything else."""
    if isinstance(item, list | tuple) and len(item) == 2 and all(isinstance(v, str) for v in item):
        return str(item[0]), str(item[1])
    if isinstance(item, dict):
        old, new = _first_text(item, _OLD_KEYS), _first_text(item, _NEW_KEYS)
        if old is not None and new is not None:
            return old, new
    return None


def _delete_of(item: object) -> tuple[str, str] | None:
    """A delete item's (old, because) texts: ``{"old": ..., "because": ...}`` (or the other
    key names), or a bare string (no reason: the worker refuses it); ``None`` otherwise."""
    if isinstance(item, str):
        return item, ""
    if isinstance(item, dict):
        old = _first_text(item, (*_OLD_KEYS, "text", "fact"))
        if old is not None:
            return old, _first_text(item, _BECAUSE_KEYS) or ""
    return None


def _shape(value: object) -> ExtractionReply | OperationsReply:
    if not isinstance(value, dict):
        kind = "a list" if isinstance(value, list) else type(value).__name__
        raise ExtractionError(f"the reply's JSON is {kind}, not an object")
    try:
        if _is_operations(value):
            return OperationsReply.model_validate(value)
        return ExtractionReply.model_validate(value)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in error['loc']) or 'reply'}: {error['msg']}"
            for error in exc.errors()[:4]
        )
        keys = ", ".join(repr(str(k)[:40]) for k in list(value)[:8])
        raise ExtractionError(f"wrong reply shape ({problems}); keys found: [{keys}]") from exc


def repeats_pinned(key: str, pinned_keys: Collection[str]) -> bool:
    """Whether a memory (its :func:`fact_key`) repeats a pinned one: the same key, or holding a
    pinned key of two or more words ("her daughter is asha who is 7" holds "daughter is
    asha"). A one-word pin repeats only an equal key."""
    if key in pinned_keys:
        return True
    padded = f" {key} "
    return any(" " in pin and f" {pin} " in padded for pin in pinned_keys)


@dataclass
class _Filter:
    """The per-item rules of :func:`parse_extraction`, with the state they need."""

    pinned_keys: frozenset[str]
    tombstones: Collection[str]
    max_items: int
    max_item_chars: int
    dropped: Counter[str] = field(default_factory=Counter)
    seen: set[str] = field(default_factory=set)
    kept: list[str] = field(default_factory=list)
    #: new texts of updates taken (they count towards ``max_items`` as kept items do)
    updated: int = 0
    accepted: str = ""

    def _rule(self, item: object) -> str | None:
        """The drop rule for one raw item, or ``None`` (then its text is ``accepted``)."""
        raw = _item_text(item)
        if raw is None:
            return "not_text"
        text = model_text(raw)
        if not text:
            return "empty"
        full_key = fact_key(text)
        if not full_key or full_key in _PLACEHOLDER_KEYS:
            return "invalid_text"
        if is_instruction(text):
            return "instruction"
        stored = _cut(text, self.max_item_chars)
        key = fact_key(stored)
        if fact_hash(stored) in self.tombstones or fact_hash(text) in self.tombstones:
            return "tombstoned"
        if repeats_pinned(key, self.pinned_keys) or repeats_pinned(full_key, self.pinned_keys):
            return "pinned"
        if key in self.seen:
            return "duplicate"
        if len(self.kept) + self.updated >= self.max_items:
            return "over_cap"
        if stored != text:
            self.dropped["too_long_cut"] += 1
        self.seen.add(key)
        self.accepted = stored
        return None

    def take(self, item: object) -> str | None:
        """The cleaned text of an item the rules keep, else ``None`` (its rule counted)."""
        rule = self._rule(item)
        if rule is not None:
            self.dropped[rule] += 1
            return None
        return self.accepted

    def add(self, item: object) -> None:
        text = self.take(item)
        if text is not None:
            self.kept.append(text)

    def operations(
        self, reply: OperationsReply
    ) -> tuple[tuple[MemoryUpdate, ...], tuple[MemoryDelete, ...]]:
        """The updates (their new texts taken by the item rules first, before any add) and the
        deletes of an operations reply; then its adds go to ``kept``. A malformed update or
        delete counts as ``not_text``, one naming no memory as ``invalid_text``."""
        updates: list[MemoryUpdate] = []
        for item in reply.update:
            pair = _update_of(item)
            old = model_text(pair[0]) if pair is not None else ""
            if pair is None or not fact_key(old):
                self.dropped["not_text" if pair is None else "invalid_text"] += 1
                continue
            new = self.take(pair[1])
            if new is not None:
                self.updated += 1
                updates.append(MemoryUpdate(old, new))
        for item in reply.add:
            self.add(item)
        deletes: list[MemoryDelete] = []
        for item in reply.delete:
            found = _delete_of(item)
            old = model_text(found[0]) if found is not None else ""
            if found is None or not fact_key(old):
                self.dropped["not_text" if found is None else "invalid_text"] += 1
                continue
            because = _cut(model_text(found[1]), self.max_item_chars)
            deletes.append(MemoryDelete(old, because))
        return tuple(updates), tuple(deletes)


def parse_extraction(
    text: str,
    *,
    pinned: Sequence[str] = (),
    tombstones: Collection[str] = (),
    max_items: int = 300,
    max_item_chars: int = 300,
    max_summary_chars: int = 2000,
) -> ExtractionResult:
    """Parse and clean an extraction reply; the rules below are the contract.

    The reply's JSON is found by :func:`find_json`. Then:

    * Shape: an object holding any of ``add``, ``update``, ``delete`` is the operations shape
      (:class:`OperationsReply`: those keys lists, ``summary`` required); any other object is
      the list shape (:class:`ExtractionReply`): both keys ``memories`` (a list) and
      ``summary``. Other keys are ignored. A list at the top level, a missing key
      (``{"facts": [...]}``), or ``memories`` that is not a list raises
      :class:`ExtractionError`: the caller keeps what is stored and tries again later.
    * ``{"memories": [], "summary": ""}`` is a valid empty result, not an error; what
      it means for the stored memories is the worker's rule
      (:func:`~litellm_memory_hook.extraction.changes.plan_changes`: a memory left out of a
      list is never deleted).
    * Operations: each update's ``new`` text, then each ``add`` item, goes through the item
      rules below (an update whose new text is dropped is dropped whole); an update's ``old``
      and a delete's ``old`` and ``because`` are cleaned (:func:`model_text`); one that names
      no memory counts as ``invalid_text``, a malformed one as ``not_text``.
    * Texts the model wrote (items and summary) get angle brackets back from their escaped
      look-alikes before anything else (:func:`model_text`).
    * Summary: a string is cleaned (:func:`clean_text`) and cut to ``max_summary_chars``
      (``summary_too_long_cut``); anything else gives ``summary=None``, meaning "keep the
      stored summary" (``summary_not_text``).
    * Each item, in order; the first rule that fires decides:

      1. ``not_text``: the item is neither a string nor an object with a string under
         ``"text"``, ``"fact"``, ``"memory"`` or ``"content"`` (that string is used); e.g.
         ``42`` or ``{"Owns a bike": true}``.
      2. ``empty``: nothing is left after :func:`clean_text`.
      3. ``invalid_text``: no letter, mark or number (:func:`fact_key` is empty, e.g.
         ``"..."``), or a placeholder such as ``"(none)"`` or ``"N/A"``.
      4. ``instruction``: it reads as an instruction to the assistant (:func:`is_instruction`).
      5. An item longer than ``max_item_chars`` is cut on a grapheme boundary, ending in
         ``…`` (counted as ``too_long_cut`` when it is kept).
      6. ``tombstoned``: :func:`fact_hash` of the item (cut or whole) is in ``tombstones``: the
         user deleted it.
      7. ``pinned``: its :func:`fact_key` equals a pinned memory's key, or contains a pinned
         key of two or more words as whole words (it repeats a pinned memory).
      8. ``duplicate``: its :func:`fact_key` equals a kept item's key; the first one wins
         ("Lives in Pune" and "lives in pune." are one fact).
      9. ``over_cap``: ``max_items`` items are already kept.

    Contradictions ("Lives in Pune" and "Lives in Mumbai now") are the prompt's job: the model
    is told to replace a changed fact (newest wins). The parser keeps every distinct text it is
    given.

    Args:
        text: The model's reply text.
        pinned: The user's pinned memories (texts).
        tombstones: :func:`fact_hash` values of memories the user deleted.
        max_items: Memories kept at most (>= 0).
        max_item_chars: Characters per memory at most, ``…`` included (>= 2).
        max_summary_chars: Characters of the summary at most, ``…`` included (>= 2).

    Returns:
        The cleaned :class:`ExtractionResult`; ``dropped`` counts every rule that fired.

    Raises:
        ExtractionError: no JSON value, or the wrong shape (see above); the message says why.
        ValueError: a limit out of range.
    """
    if max_items < 0 or max_item_chars < 2 or max_summary_chars < 2:
        raise ValueError("need max_items >= 0, max_item_chars >= 2 and max_summary_chars >= 2")
    reply = _shape(find_json(text))
    rules = _Filter(
        pinned_keys=frozenset(k for k in (fact_key(p) for p in pinned) if k),
        tombstones=tombstones,
        max_items=max_items,
        max_item_chars=max_item_chars,
    )
    updates: tuple[MemoryUpdate, ...] = ()
    deletes: tuple[MemoryDelete, ...] = ()
    if isinstance(reply, OperationsReply):
        updates, deletes = rules.operations(reply)
    else:
        for item in reply.memories:
            rules.add(item)
    summary: str | None = None
    if isinstance(reply.summary, str):
        cleaned = model_text(reply.summary)
        summary = _cut(cleaned, max_summary_chars)
        if summary != cleaned:
            rules.dropped["summary_too_long_cut"] += 1
    else:
        rules.dropped["summary_not_text"] += 1
    return ExtractionResult(
        memories=tuple(rules.kept),
        summary=summary,
        dropped=dict(rules.dropped),
        listed=not isinstance(reply, OperationsReply),
        updates=updates,
        deletes=deletes,
    )
