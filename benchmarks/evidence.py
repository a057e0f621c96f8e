"""Which labelled evidence reached the model, layer by layer: the sections of the system message
the hook built (``<memories>``, ``<summary>``, ``<earlier_lines>`` ...), the oracle's observations
each memory item is (``GET /_standin/oracle``), and a question's cover by layer (the rules are in
:mod:`benchmarks.extraction`'s docstring, step 5).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from litellm_memory_hook.core.escape import escape_data
from litellm_memory_hook.core.messages import content_text
from litellm_memory_hook.core.prompt import DATA_TAG, DEFAULT_SECTION_NOTES, REMINDER_TAG
from litellm_memory_hook.extraction.parse import fact_key
from litellm_memory_hook.tools.histories import HistoryLine

LAYERS: Final[tuple[str, ...]] = (
    "window",
    "recall",
    "memories",
    "summary",
    "window_recall",
    "all_layers",
    "memories_only",
)
"""Cover fields of a question, a sample and the pooled result (see :mod:`benchmarks.extraction`)."""
_SECTIONS: Final = ("fixed_memories", "memories", "summary", "earlier_lines")
_SECTION_RE: Final = re.compile(
    r"^<(?P<name>{names})>\n(?P<body>.*?)\n</(?P=name)>$".format(names="|".join(_SECTIONS)),
    re.MULTILINE | re.DOTALL,
)
_DATA_RE: Final = re.compile(rf"^<{DATA_TAG}>\n(?P<body>.*?)\n</{DATA_TAG}>$", re.M | re.S)
_ELLIPSIS: Final = "…"


def parse_sections(system_text: str) -> dict[str, list[str]]:
    """The items of the memory sections of a system message the hook built.

    Reads the ``<memory_context>`` block (layout: :mod:`litellm_memory_hook.core.prompt`):
    ``fixed_memories``, ``memories`` and ``earlier_lines`` give their ``- `` items (bullet
    removed, still escaped); ``summary`` gives its text lines without the default note. A
    section that is absent gives no key.
    """
    block = _DATA_RE.search(system_text)
    if block is None:
        return {}
    found: dict[str, list[str]] = {}
    for match in _SECTION_RE.finditer(block.group("body")):
        name = match.group("name")
        rows = match.group("body").split("\n")
        if name == "summary":
            note = DEFAULT_SECTION_NOTES.get(name, "")
            found[name] = [row for row in rows if row.strip() and row != note]
        else:
            found[name] = [row[2:] for row in rows if row.startswith("- ")]
    return found


def memory_sections(
    messages: Sequence[Mapping[str, Any]],
) -> tuple[dict[str, list[str]], list[Mapping[str, Any]]]:
    """The memory sections of a request the hook built, in either layout, and the client's
    messages without them: the seed layout's one system message, or the cache layout's head
    (the first system message), its tail (a system message before the user's last message, or
    a leading data part of that message) and the window between. Returns ``(sections by name,
    the other messages with any leading tail part of the last user message removed)``."""
    found: dict[str, list[str]] = {}
    rest: list[Mapping[str, Any]] = []
    for message in messages:
        if message.get("role") == "system":
            for name, items in parse_sections(content_text(message.get("content"))).items():
                found.setdefault(name, []).extend(items)
            continue
        content = message.get("content")
        if message.get("role") == "user" and isinstance(content, str):
            head, marker, words = content.partition(f"</{REMINDER_TAG}>")
            if marker and head.startswith((f"<{DATA_TAG}>", f"<{REMINDER_TAG}>")):
                for name, items in parse_sections(head).items():
                    found.setdefault(name, []).extend(items)
                message = {**message, "content": words.lstrip("\n")}
        rest.append(message)
    return found, rest


class OracleIndex:
    """LoCoMo observations by comparison key: memory item -> the ``dia_ids`` it was drawn from.

    Args:
        mapping: ``{fact_text: [dia_id, ...]}`` as ``GET /_standin/oracle?sample_id=`` answers.
    """

    def __init__(self, mapping: Mapping[str, Sequence[str]]) -> None:
        self.ids: dict[str, set[str]] = {}
        for fact, evidence in mapping.items():
            key = fact_key(escape_data(fact))
            if key:
                self.ids.setdefault(key, set()).update(str(e) for e in evidence)

    def lookup(self, item: str) -> set[str] | None:
        """The dia_ids of a (escaped) memory item; ``None`` when it is no known observation."""
        key = fact_key(escape_data(item))
        if key in self.ids:
            return self.ids[key]
        text = item.rstrip()
        if text.endswith(_ELLIPSIS):
            stem = fact_key(escape_data(text[: -len(_ELLIPSIS)]))
            if stem:
                hits = [ids for k, ids in self.ids.items() if k.startswith(stem)]
                if hits:
                    return set().union(*hits)
        return None


def evidence_ids(evidence: Sequence[str]) -> list[str]:
    """A question's evidence ids in order, without repeats; ``"D8:6; D9:17"`` counts as two."""
    ids = (part.strip() for raw in evidence for part in raw.split(";"))
    return list(dict.fromkeys(i for i in ids if i))


@dataclass(frozen=True)
class QuestionCover:
    """What of one question's evidence reached the model, per layer (counts of lines).

    Attributes:
        index: the question's position among the sample's questions with evidence.
        category: LoCoMo category (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop,
            5 adversarial).
        evidence: evidence ids that name a line of the conversation.
        unknown_evidence: evidence ids that name no line (left out of ``evidence``).
        window ... memories_only: evidence lines covered by each layer (see :data:`LAYERS`).
        prompt_chars: characters of all message text the model received.
        memory_items: items in ``<memories>`` and ``<fixed_memories>``.
        unmapped_items: of those, items that are no known observation (0 expected in oracle
            mode).
    """

    index: int
    category: int
    evidence: tuple[str, ...]
    unknown_evidence: int
    window: int
    recall: int
    memories: int
    summary: int
    window_recall: int
    all_layers: int
    memories_only: int
    prompt_chars: int
    memory_items: int
    unmapped_items: int


def question_cover(
    body: Mapping[str, Any],
    evidence: Sequence[str],
    lines_by_id: Mapping[str, HistoryLine],
    oracle: OracleIndex,
    *,
    index: int = 0,
    category: int = 0,
) -> QuestionCover:
    """Measure one question from the request body the model received (rules: module docstring).

    Args:
        body: the chat request body the stand-in recorded.
        evidence: the question's evidence ids (as labelled; split on ";").
        lines_by_id: the conversation's lines by ``line_id`` (LoCoMo ``dia_id``).
        oracle: the sample's observations.
    """
    messages = [m for m in body.get("messages") or () if isinstance(m, dict)]
    sections, rest = memory_sections(messages)
    window_texts = [escape_data(content_text(m.get("content"))) for m in rest[:-1]]
    recall_text = "\n".join(sections.get("earlier_lines", ()))
    summary_text = "\n".join(sections.get("summary", ()))
    items = [*sections.get("fixed_memories", ()), *sections.get("memories", ())]
    memory_ids: set[str] = set()
    unmapped = 0
    for item in items:
        found = oracle.lookup(item)
        if found is None:
            unmapped += 1
        else:
            memory_ids |= found
    ids = evidence_ids(evidence)
    known = [i for i in ids if i in lines_by_id]
    counts = dict.fromkeys(LAYERS, 0)
    for dia_id in known:
        text = escape_data(lines_by_id[dia_id].text)
        hit = {
            "window": bool(text) and any(text in w for w in window_texts),
            "recall": bool(text) and text in recall_text,
            "memories": dia_id in memory_ids,
            "summary": bool(text) and text in summary_text,
        }
        hit["window_recall"] = hit["window"] or hit["recall"]
        hit["all_layers"] = hit["window_recall"] or hit["memories"] or hit["summary"]
        hit["memories_only"] = hit["memories"] and not hit["window_recall"]
        for name in LAYERS:
            counts[name] += int(hit[name])
    return QuestionCover(
        index=index,
        category=category,
        evidence=tuple(known),
        unknown_evidence=len(ids) - len(known),
        prompt_chars=sum(len(content_text(m.get("content"))) for m in messages),
        memory_items=len(items),
        unmapped_items=unmapped,
        **counts,
    )


__all__ = [
    "LAYERS",
    "OracleIndex",
    "QuestionCover",
    "evidence_ids",
    "memory_sections",
    "parse_sections",
    "question_cover",
]
