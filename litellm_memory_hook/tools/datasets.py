"""Readers for chat histories that are imported, replayed and benchmarked.

Two formats:

* ``locomo``: the LoCoMo benchmark layout (Maharana et al., "Evaluating Very Long-Term
  Conversational Memory of LLM Agents", ACL 2024; snap-research/locomo, CC BY-NC 4.0), also used by
  the project's own multilingual set. A file is a list of samples; ``conversation`` holds
  ``speaker_a`` (taken as the user), ``speaker_b`` (taken as the assistant),
  ``session_N_date_time`` ("1:56 pm on 8 May, 2023") and ``session_N`` (turns with ``speaker``,
  ``dia_id`` "D<N>:<i>" and ``text``); ``qa`` holds ``question``, ``answer``, ``evidence``
  (dia_ids), ``category`` and an optional ``hard`` flag.
* ``jsonl``: one OpenAI-style message per line (``role``, ``content``, optional ``name`` and
  ``ts``: epoch seconds, epoch milliseconds or an ISO 8601 string).

Timestamps are epoch milliseconds, UTC. Turns of one LoCoMo session are spaced one second apart
from the session's date-time, so their order survives in time as well as in sequence.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from litellm_memory_hook.errors import DatasetError

_SESSION_KEY = re.compile(r"^session_(\d+)$")


@dataclass(frozen=True)
class HistoryLine:
    """One message of an imported history.

    Attributes:
        role: "user" or "assistant".
        text: the message text.
        ts_ms: epoch milliseconds (UTC).
        speaker: the speaker's name as written in the source ("" when none).
        line_id: the source's id for the line (LoCoMo ``dia_id``; ``"L<n>"`` for jsonl).
        dated: whether the source gave the line's time (every LoCoMo line; a jsonl line with
            ``ts``). ``False`` when the reader made ``ts_ms`` up (a jsonl line without ``ts``):
            such a time differs from one read of the file to the next, so the importer does not
            match the line on it.
    """

    role: str
    text: str
    ts_ms: int
    speaker: str = ""
    line_id: str = ""
    dated: bool = True


@dataclass(frozen=True)
class QAItem:
    """A question with its labelled evidence lines (LoCoMo ``qa`` entry)."""

    question: str
    answer: str
    evidence: tuple[str, ...]
    category: int
    hard: bool = False


@dataclass(frozen=True)
class History:
    """A whole conversation read from a file, oldest line first."""

    sample_id: str
    lines: tuple[HistoryLine, ...]
    qa: tuple[QAItem, ...] = field(default=())
    user_name: str = ""
    assistant_name: str = ""


def parse_locomo_datetime(value: str) -> datetime:
    """Parse a LoCoMo session date-time such as ``"1:56 pm on 8 May, 2023"`` (taken as UTC).

    Raises:
        DatasetError: the text is not in that form.
    """
    cleaned = " ".join(value.replace(",", " ").split())
    for fmt in ("%I:%M %p on %d %B %Y", "%I:%M %p on %d %b %Y"):
        try:
            return datetime.strptime(cleaned, fmt).replace(tzinfo=UTC)
        except ValueError:
            continue
    raise DatasetError(f"unrecognised LoCoMo date-time: {value!r}")


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DatasetError(f"cannot read {path}: {exc}") from exc


def list_locomo_samples(path: Path) -> list[str]:
    """The ``sample_id`` of every sample in a LoCoMo-format file."""
    data = _read_json(path)
    if not isinstance(data, list):
        raise DatasetError(f"{path}: expected a list of samples")
    return [str(s.get("sample_id", "")) for s in data if isinstance(s, dict)]


def load_locomo(path: Path, sample_id: str) -> History:
    """Read one sample of a LoCoMo-format file.

    Args:
        path: the JSON file.
        sample_id: e.g. ``"conv-26"``.

    Returns:
        The conversation: ``speaker_a`` lines as ``user``, ``speaker_b`` lines as ``assistant``.

    Raises:
        DatasetError: unreadable file, unknown sample, or a malformed session.
    """
    data = _read_json(path)
    if not isinstance(data, list):
        raise DatasetError(f"{path}: expected a list of samples")
    sample = next(
        (s for s in data if isinstance(s, dict) and s.get("sample_id") == sample_id), None
    )
    if sample is None:
        known = ", ".join(str(s.get("sample_id")) for s in data if isinstance(s, dict))
        raise DatasetError(f"{path}: no sample {sample_id!r} (have: {known})")
    conv = sample.get("conversation") or {}
    user_name = str(conv.get("speaker_a", ""))
    assistant_name = str(conv.get("speaker_b", ""))
    sessions = sorted(int(m.group(1)) for key in conv if (m := _SESSION_KEY.match(key)) is not None)
    lines: list[HistoryLine] = []
    for number in sessions:
        when = conv.get(f"session_{number}_date_time")
        if not isinstance(when, str):
            raise DatasetError(f"{sample_id}: session {number} has no date-time")
        base_ms = int(parse_locomo_datetime(when).timestamp() * 1000)
        for i, turn in enumerate(conv[f"session_{number}"]):
            if not isinstance(turn, dict) or not isinstance(turn.get("text"), str):
                continue
            speaker = str(turn.get("speaker", ""))
            role = "user" if speaker == user_name else "assistant"
            lines.append(
                HistoryLine(
                    role=role,
                    text=turn["text"],
                    ts_ms=base_ms + i * 1000,
                    speaker=speaker,
                    line_id=str(turn.get("dia_id", "")),
                )
            )
    qa = tuple(
        QAItem(
            question=str(item.get("question", "")),
            answer=str(item.get("answer", "")),
            evidence=tuple(str(e) for e in item.get("evidence") or ()),
            category=int(item.get("category", 0)),
            hard=bool(item.get("hard", False)),
        )
        for item in sample.get("qa") or ()
        if isinstance(item, dict) and item.get("question")
    )
    return History(
        sample_id=sample_id,
        lines=tuple(lines),
        qa=qa,
        user_name=user_name,
        assistant_name=assistant_name,
    )


def _parse_ts(value: Any, fallback_ms: int) -> int:
    if value is None:
        return fallback_ms
    if isinstance(value, int | float):
        # Seconds before the year 2286, milliseconds after: 1e10 s is the dividing line.
        return int(value * 1000) if value < 1e10 else int(value)
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError as exc:
            raise DatasetError(f"unrecognised timestamp {value!r}") from exc
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)
        return int(parsed.timestamp() * 1000)
    raise DatasetError(f"unrecognised timestamp {value!r}")


def _jsonl_records(path: Path) -> Iterator[tuple[int, Any]]:
    try:
        with path.open(encoding="utf-8") as handle:
            for number, raw in enumerate(handle, start=1):
                if raw.strip():
                    try:
                        yield number, json.loads(raw)
                    except ValueError as exc:
                        raise DatasetError(f"{path}:{number}: not JSON: {exc}") from exc
    except OSError as exc:
        raise DatasetError(f"cannot read {path}: {exc}") from exc


def load_jsonl(path: Path, *, start_ms: int | None = None) -> History:
    """Read a history of one OpenAI-style message per line.

    Lines with a role other than ``user`` / ``assistant`` or without text are skipped. A missing
    ``ts`` continues one second after the previous line; the first line without one starts at
    ``start_ms`` (default: one second per line before now, so an undated file ends now). Lines
    without ``ts`` have ``dated=False``: their time depends on when and where in the file they
    are read.

    Raises:
        DatasetError: unreadable file, a line that is not JSON, or a bad timestamp.
    """
    from litellm_memory_hook.core.messages import content_text

    lines: list[HistoryLine] = []
    records = list(_jsonl_records(path))
    if start_ms is None:
        start_ms = int(datetime.now(tz=UTC).timestamp() * 1000) - 1000 * (len(records) + 1)
    last_ms = start_ms
    for number, record in records:
        if not isinstance(record, dict) or record.get("role") not in ("user", "assistant"):
            continue
        text = content_text(record.get("content"))
        if not text.strip():
            continue
        last_ms = _parse_ts(record.get("ts"), last_ms + 1000)
        lines.append(
            HistoryLine(
                role=str(record["role"]),
                text=text,
                ts_ms=last_ms,
                speaker=str(record.get("name") or ""),
                line_id=f"L{number}",
                dated=record.get("ts") is not None,
            )
        )
    return History(sample_id=path.stem, lines=tuple(lines))
