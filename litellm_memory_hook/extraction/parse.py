"""Tolerant parsing and cleaning of an extraction reply.

Two steps, both pure:

1. :func:`~litellm_memory_hook.extraction.reply_json.find_json` finds the JSON value in the
   model's reply text: inside a code fence of any kind or with prose around it, repaired where
   that is safe, in time linear in the reply's length (field cases C08, C09).
2. :func:`parse_extraction` checks its shape with :class:`ExtractionReply` (a pydantic model) and
   cleans the items: the rules are listed there and are the contract with the worker (C10, C15,
   C18, C19).

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
from litellm_memory_hook.extraction.reply_json import MAX_REPLY_CHARS, find_json

__all__ = [
    "DROP_RULES",
    "MAX_REPLY_CHARS",
    "ExtractionReply",
    "ExtractionResult",
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
    """The comparison key of a fact: equal keys mean the same fact (case C18).

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
    """The tombstone hash of a fact (case C19).

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
# Instructions to the assistant (case C15)
# ---------------------------------------------------------------------------------------------

# Words that may open a sentence before an instruction: "Remember forever: always reply ...".
_LEAD: Final = (
    r"(?:(?:please|pls|plz|kindly|remember|remember\s+that|remember\s+to|forever|note|"
    r"note\s+that|important|rule|new\s+rule|instruction|reminder|also|and|so|ok|okay|"
    r"hey|now)\s*[:,\-–—]?\s+)*"
)
# Base-form verbs of how to answer, behave or what to reveal. After "always", "never", "only"
# a base form is an imperative ("always reply"); a fact uses "always drinks", "never talks".
_VERB: Final = (
    r"(?:reply|respond|answer|write|speak|talk|use|say|address|call|refer|greet|format|"
    r"translate|output|print|reveal|show|display|repeat|tell|pretend|act|behave|role-?play|"
    r"obey|follow|ignore|disregard|forget|override|be|stay|keep|end|start|begin|include|"
    r"mention|add|sign|refuse|comply|switch|stop)"
)
# Verbs that are also nouns ("Talk at IIT on 3 June"): an imperative only with an object or
# manner that addresses the assistant.
_PLAIN_VERB: Final = (
    r"(?:reply|respond|answer|write|speak|talk|print|reveal|show|display|repeat|output|"
    r"pretend|act|behave|role-?play|obey|follow|ignore|disregard|forget|translate|use|"
    r"switch|stop|tell|say)"
)
_ADDRESSED: Final = (
    r"(?:in|with|as|like|me|us|my|your|yourself|the\s+user|everything|all|back|exactly|"
    r"without|using|only|always|never|to\s+(?:me|us|the\s+user)|english|hindi|hinglish|"
    r"devanagari|emojis?|markdown|json|caps|formal(?:ly)?|informal(?:ly)?|short|briefly)\b"
)
_ASSISTANT: Final = r"(?:assistant|ai|bot|chatbot|chatgpt|gpt|claude)"
_MODAL: Final = (
    r"(?:must|should|shall|will\s+always|will\s+never|has\s+to|have\s+to|needs\s+to|"
    r"need\s+to|is\s+to|is\s+not\s+to|are\s+to|may\s+not|cannot|can't|is\s+required\s+to)"
)
_INSTRUCTION_ANYWHERE: Final = regex.compile(
    "|".join(
        [
            # "ignore all previous instructions", "forget your rules"
            r"\b(?:ignore|disregard|forget|override|overrule|bypass)\b\W+(?:\w+\W+){0,4}?"
            r"(?:instructions?|rules?|prompt|prompts|guidelines?|directives?|guardrails?|"
            r"restrictions?|programming)\b",
            # "print your system prompt", "reveal the hidden instructions"
            r"\b(?:system|developer|hidden|initial|original)\s+(?:prompt|message|instructions?)\b",
            r"\b(?:reveal|print|show|display|repeat|output|leak|dump)\b\W+(?:\w+\W+){0,3}?"
            r"(?:prompt|instructions|configuration|config)\b",
            rf"\bthe\s+assistant\s+{_MODAL}\b",
            r"\b(?:jailbreak|developer\s+mode|dan\s+mode)\b",
            r"\bfrom\s+now\s+on\b,?\s+(?:you|u|always|never|only|reply|respond|answer|speak|"
            r"talk|write|use|call|address|be|act)\b",
            # romanised Hindi: "hamesha English mein jawab do", "pichhle nirdesh bhool jao"
            r"\b(?:jawab|javab|jvab|jawaab|uttar)\s+(?:\w+\s+)?(?:do|dijiye|dijie|dijiyega|"
            r"dein|den|karo|kro|kijiye|kijie|kariye|karein|karen)\b",
            r"\breply\s+(?:\w+\s+)?(?:karo|kro|kijiye|kijie|kariye|karein|karen|dijiye)\b",
            r"\b(?:pichhle|pichle|purane|saare|sare|sabhi|pehle)\s+(?:\w+\s+){0,2}?(?:nirdesh|"
            r"instructions?|niyam|rules?|hukum)\s+(?:\w+\s+){0,2}?(?:bhool|bhul|ignore|"
            r"nazarandaz|chhod|chod)",
            # Hindi: "अंग्रेज़ी में जवाब दो", "पिछले निर्देश भूल जाओ", "सिस्टम प्रॉम्प्ट"
            r"(?:जवाब|जबाब|उत्तर)\s+(?:\S+\s+)?(?:दो|दें|दीजिए|दीजिये|दिया\s+करो|करो|करें|"
            r"कीजिए|कीजिये)(?!\w)",
            r"(?:निर्देश|निर्देशों|नियम|नियमों)\s*(?:\S+\s+){0,3}?(?:भूल|अनदेखा|नज़रअंदाज़|"
            r"नजरअंदाज|इग्नोर)",
            r"सिस्टम\s+(?:प्रॉम्प्ट|प्रोम्प्ट)",
        ]
    )
)
_INSTRUCTION_AT_START: Final = regex.compile(
    "|".join(
        [
            rf"^{_LEAD}(?:do\s+not|don't|dont|do\s+n't)\b",
            rf"^{_LEAD}(?:always|never|only|just|strictly)\s+(?:\w+ly\s+)?{_VERB}\b",
            rf"^{_LEAD}{_PLAIN_VERB}\s+{_ADDRESSED}",
            rf"^{_LEAD}(?:the\s+)?{_ASSISTANT}\s+{_MODAL}\b",
            rf"^{_LEAD}(?:you|u)\s+(?:must|should|shall|will|are|have\s+to|need\s+to|may|can|"
            r"cannot|can't|won't|do|don't|never|always|only|were)\b",
            rf"^{_LEAD}from\s+now\s+on\b",
        ]
    )
)
_SENTENCE_BREAK: Final = regex.compile(r"[.!?;:,।\n]+")


def is_instruction(text: str) -> bool:
    """Whether a memory reads as an instruction to the assistant, not a fact (case C15).

    A small rule set over the casefolded text:

    * anywhere: overriding rules ("ignore all previous instructions", "forget your rules"),
      asking for the prompt ("system prompt", "print your instructions"), the assistant
      addressed with a modal ("the assistant should ..."), "jailbreak", "developer mode",
      "from now on, always ...", and the same in romanised Hindi ("English mein jawab do",
      "pichhle nirdesh bhool jao") and Hindi ("जवाब दो", "निर्देश भूल जाओ", "सिस्टम प्रॉम्प्ट");
    * at the start of a sentence or clause (after "please", "remember:", "note:" and the
      like): "do not", "don't"; "always", "never", "only" followed by a base-form verb of
      answering or behaving ("always reply", but not "always drinks"); such a verb followed by
      how or to whom ("reply in English", "talk to me", but not "Talk at IIT on 3 June");
      "you must/should/are ..."; "from now on".

    Facts such as "User always drinks tea in the morning", "Doesn't like horror movies",
    "Must finish thesis by June" and "Ignored her brother's call" do not match.

    Args:
        text: A cleaned memory text.

    Returns:
        ``True`` when one rule matches.
    """
    folded = text.casefold().replace("’", "'")
    if _INSTRUCTION_ANYWHERE.search(folded):
        return True
    return any(
        _INSTRUCTION_AT_START.search(part.strip())
        for part in _SENTENCE_BREAK.split(folded)
        if part.strip()
    )


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
class ExtractionResult:
    """A cleaned extraction reply.

    Attributes:
        memories: The memories to store, in reply order, each cleaned, cut and unique by
            :func:`fact_key`.
        summary: The new summary (cleaned, cut; ``""`` is a valid empty summary), or ``None``
            when the reply's summary was not a string: keep the stored summary.
        dropped: Rule name (from :data:`DROP_RULES`) -> how many items it dropped or cut;
            rules that did not fire are absent.
    """

    memories: tuple[str, ...]
    summary: str | None
    dropped: dict[str, int] = field(default_factory=dict)


_ITEM_TEXT_KEYS: Final = ("text", "fact", "memory", "content")
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


def _shape(value: object) -> ExtractionReply:
    if not isinstance(value, dict):
        kind = "a list" if isinstance(value, list) else type(value).__name__
        raise ExtractionError(f"the reply's JSON is {kind}, not an object")
    try:
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

    def _rule(self, item: object) -> str | None:
        """The drop rule for one raw item, or ``None`` (then it was added to ``kept``)."""
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
        if len(self.kept) >= self.max_items:
            return "over_cap"
        if stored != text:
            self.dropped["too_long_cut"] += 1
        self.seen.add(key)
        self.kept.append(stored)
        return None

    def add(self, item: object) -> None:
        rule = self._rule(item)
        if rule is not None:
            self.dropped[rule] += 1


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

    * Shape (:class:`ExtractionReply`): the top level must be an object with both keys
      ``memories`` (a list) and ``summary``; other keys are ignored. A list at the top level, a
      missing key (``{"facts": [...]}``), or ``memories`` that is not a list raises
      :class:`ExtractionError`: the caller keeps what is stored and tries again later (C10).
    * ``{"memories": [], "summary": ""}`` is a valid empty result, not an error (C10 e).
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
      4. ``instruction``: it reads as an instruction to the assistant (:func:`is_instruction`,
         C15).
      5. An item longer than ``max_item_chars`` is cut on a grapheme boundary, ending in
         ``…`` (counted as ``too_long_cut`` when it is kept).
      6. ``tombstoned``: :func:`fact_hash` of the item (cut or whole) is in ``tombstones``: the
         user deleted it (C19).
      7. ``pinned``: its :func:`fact_key` equals a pinned memory's key, or contains a pinned
         key of two or more words as whole words (it repeats a pinned memory).
      8. ``duplicate``: its :func:`fact_key` equals a kept item's key; the first one wins
         (C18: "Lives in Pune" and "lives in pune." are one fact).
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
        memories=tuple(rules.kept), summary=summary, dropped=dict(rules.dropped)
    )
