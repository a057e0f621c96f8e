"""The stand-in model's ``oracle`` extraction mode (for benchmarks): labelled facts from a file.

It answers extraction calls from the LoCoMo ``observation`` labels of a LoCoMo-format file
(``--oracle FILE``). Each new line of the prompt is matched to its ``dia_id`` by its escaped text
(:func:`~litellm_memory_hook.core.escape.escape_data` on the dataset text, exact; a line the
prompt cut short with "…" matches by its remaining start or end); the speaker, when it names a
dataset speaker, breaks ties; the sample with the most matching lines is the conversation, and
a text said twice in it takes the occurrence whose position fits its neighbours. The reply is
the current memories followed by every observation with an evidence ``dia_id`` among those
lines, in dataset order, de-duplicated; the summary is the old summary unchanged.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from litellm_memory_hook.core.escape import escape_data
from litellm_memory_hook.errors import DatasetError
from litellm_memory_hook.tools.files import read_utf8
from litellm_memory_hook.tools.standin_extraction import ExtractionInput, PromptLine, fold_key

_ELLIPSES: Final = ("…", "...")
_MIN_PARTIAL_CHARS: Final = 12


@dataclass(frozen=True)
class _DatasetLine:
    sample: str
    dia_id: str
    speaker: str  # escaped and case-folded
    position: int  # order within the sample


def _evidence(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return tuple(part for part in re.split(r"[\s,;]+", value) if part)
    if isinstance(value, list):
        return tuple(str(v) for v in value if v)
    return ()


def _numbered(mapping: dict[str, Any], pattern: str) -> list[Any]:
    """``mapping``'s values whose key matches ``pattern`` (one number group), by that number."""
    regex = re.compile(pattern)
    keyed = [(int(m.group(1)), value) for key, value in mapping.items() if (m := regex.match(key))]
    return [value for _, value in sorted(keyed, key=lambda pair: pair[0])]


class Oracle:
    """The observation labels of a LoCoMo-format file, indexed by the escaped text of each line.

    Args:
        samples: the file's list of samples (``sample_id``, ``conversation``, ``observation``).
    """

    def __init__(self, samples: Sequence[Any]) -> None:
        self.by_text: dict[str, list[_DatasetLine]] = {}
        self.facts: dict[str, list[tuple[str, tuple[str, ...]]]] = {}
        self.sample_order: dict[str, int] = {}
        for number, sample in enumerate(samples):
            if not isinstance(sample, dict):
                continue
            sample_id = str(sample.get("sample_id", f"sample-{number}"))
            self.sample_order.setdefault(sample_id, number)
            self._add_lines(sample_id, sample.get("conversation") or {})
            self._add_facts(sample_id, sample.get("observation") or {})

    @classmethod
    def load(cls, path: str | Path) -> Oracle:
        """Read a LoCoMo-format JSON file.

        Raises:
            DatasetError: the file is unreadable, not JSON, or not a list of samples.
        """
        text = read_utf8(Path(path), DatasetError)
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise DatasetError(f"oracle file {path} is not a JSON file: {exc}") from exc
        if not isinstance(data, list):
            raise DatasetError(f"{path}: expected a list of LoCoMo samples")
        return cls(data)

    def _add_lines(self, sample_id: str, conversation: dict[str, Any]) -> None:
        position = 0
        for session in _numbered(conversation, r"^session_(\d+)$"):
            for turn in session if isinstance(session, list) else ():
                if not isinstance(turn, dict) or not isinstance(turn.get("text"), str):
                    continue
                line = _DatasetLine(
                    sample=sample_id,
                    dia_id=str(turn.get("dia_id", "")),
                    speaker=escape_data(str(turn.get("speaker", ""))).casefold(),
                    position=position,
                )
                self.by_text.setdefault(escape_data(turn["text"]), []).append(line)
                position += 1

    def _add_facts(self, sample_id: str, observation: dict[str, Any]) -> None:
        facts = self.facts.setdefault(sample_id, [])
        for session in _numbered(observation, r"^session_(\d+)_observation$"):
            for items in session.values() if isinstance(session, dict) else ():
                for item in items if isinstance(items, list) else ():
                    if isinstance(item, list) and len(item) >= 2 and isinstance(item[0], str):
                        facts.append((item[0], _evidence(item[1])))

    def evidence_map(self, sample_id: str | None = None) -> dict[str, list[str]]:
        """``{fact_text: [dia_id, ...]}`` for every observation (of one sample when given)."""
        mapping: dict[str, list[str]] = {}
        for sample, facts in self.facts.items():
            if sample_id is not None and sample != sample_id:
                continue
            for fact, evidence in facts:
                known = mapping.setdefault(fact, [])
                known.extend(e for e in evidence if e not in known)
        return mapping

    def _candidates(self, line: PromptLine) -> list[_DatasetLine]:
        text = escape_data(line.text)
        found = self.by_text.get(text, [])
        if not found:
            found = self._partial_candidates(text)
        speaker = escape_data(line.speaker).casefold()
        same_speaker = [c for c in found if c.speaker == speaker]
        return same_speaker or found

    def _partial_candidates(self, text: str) -> list[_DatasetLine]:
        """Lines the prompt cut short: ``"start…"`` or ``"…end"``."""
        for mark in _ELLIPSES:
            if (
                text.endswith(mark)
                and len(stem := text[: -len(mark)].rstrip()) >= _MIN_PARTIAL_CHARS
            ):
                return [c for full, cs in self.by_text.items() if full.startswith(stem) for c in cs]
            if (
                text.startswith(mark)
                and len(stem := text[len(mark) :].lstrip()) >= _MIN_PARTIAL_CHARS
            ):
                return [c for full, cs in self.by_text.items() if full.endswith(stem) for c in cs]
        return []

    def match(self, lines: Sequence[PromptLine]) -> tuple[str, list[_DatasetLine]]:
        """The sample these lines come from and the dataset line of each line that matched."""
        candidates = [self._candidates(line) for line in lines]
        votes = Counter(sample for found in candidates for sample in {c.sample for c in found})
        if not votes:
            return "", []
        sample = min(votes, key=lambda s: (-votes[s], self.sample_order.get(s, 0)))
        per_line = [[c for c in found if c.sample == sample] for found in candidates]
        anchors = {i: found[0].position for i, found in enumerate(per_line) if len(found) == 1}
        chosen = []
        for i, found in enumerate(per_line):
            if len(found) > 1 and anchors:
                nearest = min(anchors, key=lambda j: (abs(i - j), j))
                expected = anchors[nearest] + (i - nearest)
                found = sorted(found, key=lambda c: (abs(c.position - expected), c.position))
            if found:
                chosen.append(found[0])
        return sample, chosen

    def extraction(self, data: ExtractionInput) -> dict[str, Any]:
        """The oracle mode's answer: current memories plus the observations of the new lines."""
        sample, matched = self.match(data.lines)
        ids = {line.dia_id for line in matched}
        memories = list(data.memories)
        seen = {fold_key(escape_data(m)) for m in memories}
        for fact, evidence in self.facts.get(sample, ()):
            if ids.intersection(evidence) and fold_key(escape_data(fact)) not in seen:
                seen.add(fold_key(escape_data(fact)))
                memories.append(fact)
        return {"memories": memories, "summary": data.summary}
