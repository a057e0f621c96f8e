"""The stand-in model's extraction calls: recognising them, reading their prompt, the default mode.

A chat request whose first system (or developer) message starts with the line
:data:`EXTRACTION_MARKER` comes from the memory extraction job (docs/design.md#extraction). Its user
message holds the sections ``<current_memories>``, ``<pinned_memories>``, ``<summary>`` and
``<new_lines>`` (one ``- <date>, <speaker>: <text>`` line per message, escaped);
:func:`parse_extraction_prompt` reads them into an :class:`ExtractionInput`.

The ``default`` mode (:func:`default_extraction`) is a small deterministic rule, not a model. It
keeps the current memories and adds, for each line not spoken by the assistant (the
``--assistant-name`` speaker, or "assistant"), each sentence that is not a question and holds a
cue such as "my", "I am", "I'm", "I live", "I work", "I like", "I love", "call", "name" or the
Hinglish and Hindi "mera", "meri", "mujhe" (as ``"User: <sentence>"``, cut to 200 characters,
de-duplicated, not repeating a pinned memory, at most 50 memories in all). The summary is the
old summary, cut so that the whole stays under 200 words, followed by "Then they talked about
<the first words of the last user line's first sentence>." Same input, same output. The
``oracle`` mode is :mod:`litellm_memory_hook.tools.standin_oracle`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from litellm_memory_hook.core.messages import content_text

# Must equal the marker line that starts the extraction prompt's system message
# (litellm_memory_hook.extraction.prompt); the stand-in recognises extraction calls by it.
EXTRACTION_MARKER: Final = "[memory-extraction]"


MAX_MEMORIES: Final = 50
"""Default mode: memories in a reply at most (current ones are always kept)."""

MAX_FACT_CHARS: Final = 200
"""Default mode: characters of one new memory at most."""

MAX_SUMMARY_WORDS: Final = 199
"""Default mode: words of the summary at most (under 200)."""

_SECTION_NAMES: Final = ("current_memories", "pinned_memories", "summary", "new_lines")
_SECTION: Final = re.compile(
    r"<(?P<name>{names})>(?P<body>.*?)(?:</(?P=name)>|(?=<(?:{names})>)|\Z)".format(
        names="|".join(_SECTION_NAMES)
    ),
    re.DOTALL,
)
_BULLET: Final = re.compile(r"^\s*(?:[-*•]|\d{1,3}[.)])\s+")
_DATE_PREFIX: Final = re.compile(
    r"^\[?\d{4}-\d{2}-\d{2}(?:[ T]\d{1,2}:\d{2}(?::\d{2})?)?(?:\s*(?:UTC|GMT|Z|[+-]\d{2}:?\d{2}))?"
    r"\]?\s*,?\s*"
)
_SPEAKER: Final = re.compile(r"^(?P<speaker>[^:]{1,80}?):\s*(?P<text>.*)$", re.DOTALL)
_PLACEHOLDER: Final = re.compile(
    r"^[(\[]?\s*(?:none|empty|nothing(?: yet)?|n/?a|no (?:pinned |new )?"
    r"(?:memories|summary|lines|messages)(?: yet)?)\s*[)\]]?\.?$",
    re.IGNORECASE,
)
_SENTENCE_END: Final = re.compile(r"(?<=[.!?।])\s+")
_FACT_CUE: Final = re.compile(
    r"\b(?:my|i am|i['’]m|i live|i work|i like|i love|call\w*|name\w*|mera|meri|mere|mujhe)\b"
    r"|मेरा|मेरी|मेरे|मुझे",
    re.IGNORECASE,
)
_TOPIC_WORDS: Final = 8


# --- parsing the extraction prompt ----------------------------------------------------------


@dataclass(frozen=True)
class PromptLine:
    """One message of an extraction prompt's ``<new_lines>``: its speaker and (escaped) text."""

    speaker: str
    text: str


@dataclass(frozen=True)
class ExtractionInput:
    """What an extraction prompt holds, as the stand-in reads it."""

    memories: tuple[str, ...]
    pinned: tuple[str, ...]
    summary: str
    lines: tuple[PromptLine, ...]


def is_extraction_call(messages: Sequence[Any]) -> bool:
    """Whether the first system (or developer) message starts with :data:`EXTRACTION_MARKER`."""
    for message in messages:
        if isinstance(message, dict) and message.get("role") in ("system", "developer"):
            first = content_text(message.get("content")).lstrip().split("\n", 1)[0]
            return first.strip() == EXTRACTION_MARKER
    return False


def _sections(text: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for match in _SECTION.finditer(text):
        found.setdefault(match.group("name"), match.group("body"))
    return found


def _items(body: str) -> list[str]:
    """The non-empty, non-placeholder lines of a section, without a leading bullet."""
    items = []
    for raw in body.splitlines():
        item = _BULLET.sub("", raw, count=1).strip()
        if item and not _PLACEHOLDER.match(item):
            items.append(item)
    return items


def parse_line(item: str) -> PromptLine:
    """Read ``"<date>, <speaker>: <text>"`` (bullet already removed); each part is optional."""
    rest = _DATE_PREFIX.sub("", item, count=1)
    dated = rest != item
    match = _SPEAKER.match(rest)
    if match is not None:
        speaker = match.group("speaker").strip()
        # Without a date, only a short name before the colon is taken for a speaker.
        if dated or len(speaker.split()) <= 4:
            return PromptLine(speaker=speaker, text=match.group("text").strip())
    return PromptLine(speaker="", text=rest.strip())


def parse_extraction_prompt(messages: Sequence[Any]) -> ExtractionInput:
    """Read the sections of an extraction call (from its user messages, else from any message)."""
    texts = [
        (message.get("role"), content_text(message.get("content")))
        for message in messages
        if isinstance(message, dict)
    ]
    found = _sections("\n".join(text for role, text in texts if role == "user"))
    if not found:
        found = _sections("\n".join(text for _, text in texts))
    summary = " ".join(found.get("summary", "").split())
    return ExtractionInput(
        memories=tuple(_items(found.get("current_memories", ""))),
        pinned=tuple(_items(found.get("pinned_memories", ""))),
        summary="" if _PLACEHOLDER.match(summary) else summary,
        lines=tuple(parse_line(item) for item in _items(found.get("new_lines", ""))),
    )


# --- the default extractor -------------------------------------------------------------------


def fold_key(text: str) -> str:
    """``text`` with its whitespace runs made one space, case-folded (for de-duplication)."""
    return " ".join(text.split()).casefold()


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    head = text[: limit - 1]
    if " " in head:
        head = head.rsplit(" ", 1)[0]
    return head.rstrip() + "…"


def _fact_sentences(text: str) -> list[str]:
    """The sentences of ``text`` that state a lasting fact by the default mode's rule."""
    sentences = (s.strip() for s in _SENTENCE_END.split(text))
    return [
        _cut(s, MAX_FACT_CHARS - len("User: "))
        for s in sentences
        if s and not s.endswith("?") and _FACT_CUE.search(s)
    ]


def default_extraction(data: ExtractionInput, assistant_name: str | None = None) -> dict[str, Any]:
    """The default mode's answer: current memories plus rule-picked user sentences.

    A deterministic stand-in for a model, documented in the module docstring.
    """
    assistants = {"assistant"} | ({fold_key(assistant_name)} if assistant_name else set())
    user_lines = [line for line in data.lines if fold_key(line.speaker) not in assistants]
    memories = list(data.memories)
    seen = {fold_key(m) for m in (*data.memories, *data.pinned)}
    for line in user_lines:
        for sentence in _fact_sentences(line.text):
            fact = f"User: {sentence}"
            if len(memories) >= MAX_MEMORIES:
                break
            if fold_key(fact) in seen or fold_key(sentence) in seen:
                continue
            seen.add(fold_key(fact))
            memories.append(fact)
    return {"memories": memories, "summary": _default_summary(data.summary, user_lines)}


def _default_summary(old: str, user_lines: Sequence[PromptLine]) -> str:
    words = old.split()
    if not user_lines:
        return " ".join(words[:MAX_SUMMARY_WORDS])
    first_sentence = _SENTENCE_END.split(user_lines[-1].text.strip(), maxsplit=1)[0]
    topic = " ".join(first_sentence.split()[:_TOPIC_WORDS]).rstrip(" .,;:!?…।")
    sentence = f"Then they talked about {topic}." if topic else "Then they talked."
    budget = MAX_SUMMARY_WORDS - len(sentence.split())
    return " ".join([*words[:budget], sentence])
