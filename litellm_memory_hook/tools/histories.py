"""Readers for chat histories that are imported (``litellm-memory import``), replayed
(``litellm-memory replay``) and benchmarked (the repository's ``benchmarks``).

Two formats:

* ``locomo``: the LoCoMo benchmark layout (Maharana et al., "Evaluating Very Long-Term
  Conversational Memory of LLM Agents", ACL 2024; snap-research/locomo, CC BY-NC 4.0), also used by
  the project's own multilingual set. A file is a list of samples; ``conversation`` holds
  ``speaker_a`` (taken as the user), ``speaker_b`` (taken as the assistant),
  ``session_N_date_time`` ("1:56 pm on 8 May, 2023") and ``session_N`` (turns with ``speaker``,
  ``dia_id`` "D<N>:<i>" and ``text``); ``qa`` holds ``question``, ``answer``, ``evidence``
  (dia_ids), ``category`` and an optional ``hard`` flag.
* ``jsonl``: one OpenAI-style message per line (``role``, ``content``, optional ``name`` and
  ``ts``: epoch seconds, epoch milliseconds or an ISO 8601 string; see :func:`parse_ts` for
  which numbers are which and the range of times taken).

What cannot be a turn is either skipped on purpose (jsonl: a ``system``, ``developer``, ``tool``
or ``function`` message, a message with no text, listed in :attr:`History.skipped`; a blank
LoCoMo turn is kept in ``lines`` for the benchmarks, and the importer leaves it out), or refused
with the whole file (:class:`~litellm_memory_hook.errors.DatasetError` naming the first few lines:
an unknown or missing role, content that is not text, a bad timestamp or one outside 1970 to
3000, text holding a lone surrogate (a JSON ``"\\ud800"`` escape: no UTF-8 text can hold it), a
LoCoMo turn of neither speaker): a typo must not drop a message from the middle of a
conversation unnoticed.

Timestamps are epoch milliseconds, UTC. Turns of one LoCoMo session are spaced one second apart
from the session's date-time, so their order survives in time as well as in sequence.
"""

from __future__ import annotations

import codecs
import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from litellm_memory_hook.errors import DatasetError
from litellm_memory_hook.tools.files import not_utf8_message, read_utf8

_SESSION_KEY = re.compile(r"^session_(\d+)$")
#: OpenAI message roles that are not a turn of the conversation: skipped, and said so.
SKIPPED_ROLES = ("system", "developer", "tool", "function")
#: how many lines an error or a skip notice names (then "and N more").
SHOWN_LINES = 3


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
class SkippedLine:
    """A line of a history file that is not a turn, left out on purpose.

    Attributes:
        where: the line in the source (``"line 4"`` for jsonl, the ``dia_id`` for LoCoMo).
        reason: why (``"system message"``, ``"no text"``).
    """

    where: str
    reason: str


@dataclass(frozen=True)
class History:
    """A whole conversation read from a file, oldest line first.

    ``skipped`` lists the lines of the source left out on purpose (see the module's note), for
    the importer to report.
    """

    sample_id: str
    lines: tuple[HistoryLine, ...]
    qa: tuple[QAItem, ...] = field(default=())
    user_name: str = ""
    assistant_name: str = ""
    skipped: tuple[SkippedLine, ...] = field(default=())


def first_few(items: list[str], *, sep: str = "; ") -> str:
    """The first :data:`SHOWN_LINES` of ``items`` joined by ``sep``, then ``and N more``."""
    shown = sep.join(items[:SHOWN_LINES])
    more = len(items) - SHOWN_LINES
    return f"{shown}{sep}and {more} more" if more > 0 else shown


def skipped_summary(skipped: tuple[SkippedLine, ...]) -> str:
    """``2 lines skipped (line 3: system message; line 7: no text)``: what was left out, on one
    line."""
    count = f"{len(skipped)} line" + ("s" if len(skipped) != 1 else "")
    return f"{count} skipped ({first_few([f'{s.where}: {s.reason}' for s in skipped])})"


def _refuse(path: Path, problems: list[str]) -> DatasetError:
    """The error of a file with lines that cannot be imported (nothing is imported)."""
    count = f"{len(problems)} line" + (" cannot" if len(problems) == 1 else "s cannot")
    return DatasetError(
        f"{path}: {count} be imported: {first_few(problems)}; fix or remove "
        f"{'it' if len(problems) == 1 else 'them'} (nothing was imported)"
    )


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
    text = read_utf8(path, DatasetError)
    try:
        return json.loads(text)
    except ValueError as exc:
        raise DatasetError(f"{path} is not a JSON file: {exc}") from exc


def list_locomo_samples(path: Path) -> list[str]:
    """The ``sample_id`` of every sample in a LoCoMo-format file."""
    data = _read_json(path)
    if not isinstance(data, list):
        raise DatasetError(f"{path}: expected a list of samples")
    return [str(s.get("sample_id", "")) for s in data if isinstance(s, dict)]


def _locomo_turn_problem(
    turn: object, where: str, user_name: str, assistant_name: str
) -> str | None:
    """Why a LoCoMo turn cannot be a line (``where: reason``; ``where`` is its ``dia_id`` when
    it has one), or ``None`` when it can."""
    from litellm_memory_hook.core.messages import lone_surrogate

    if not isinstance(turn, dict):
        return f"{where}: not an object"
    where = str(turn.get("dia_id") or where).encode("utf-8", "backslashreplace").decode("utf-8")
    bad = lone_surrogate(turn)
    if bad is not None:
        return f"{where}: {_surrogate_reason(*bad)}"
    if not isinstance(turn.get("text"), str):
        return f"{where}: no 'text' string"
    speaker = str(turn.get("speaker", ""))
    if speaker not in (user_name, assistant_name):
        return (
            f"{where}: speaker {speaker!r} is neither speaker_a {user_name!r} nor "
            f"speaker_b {assistant_name!r}"
        )
    return None


def load_locomo(path: Path, sample_id: str) -> History:
    """Read one sample of a LoCoMo-format file.

    Args:
        path: the JSON file.
        sample_id: e.g. ``"conv-26"``.

    Returns:
        The conversation: ``speaker_a`` lines as ``user``, ``speaker_b`` lines as ``assistant``.

    Turns whose text is blank are kept (the benchmarks count them; the importer leaves them
    out and says so).

    Raises:
        DatasetError: unreadable file, unknown sample, a session without its date-time (or
            one outside 1970 to 3000), or turns that are not an object with a ``text`` string,
            whose ``speaker`` is neither ``speaker_a`` nor ``speaker_b``, or that hold a lone
            surrogate (the first few are named).
    """
    from litellm_memory_hook.core.messages import lone_surrogate

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
    for name in ("speaker_a", "speaker_b"):
        bad = lone_surrogate(conv.get(name), f"conversation.{name}")
        if bad is not None:
            raise DatasetError(f"{path}: {sample_id}: {_surrogate_reason(*bad)}")
    user_name = str(conv.get("speaker_a", ""))
    assistant_name = str(conv.get("speaker_b", ""))
    sessions = sorted(int(m.group(1)) for key in conv if (m := _SESSION_KEY.match(key)) is not None)
    lines: list[HistoryLine] = []
    problems: list[str] = []
    for number in sessions:
        when = conv.get(f"session_{number}_date_time")
        if not isinstance(when, str):
            raise DatasetError(f"{sample_id}: session {number} has no date-time")
        try:
            base_ms = check_ts_ms(int(parse_locomo_datetime(when).timestamp() * 1000), repr(when))
        except DatasetError as exc:
            raise DatasetError(f"{sample_id}: session {number}: {exc}") from exc
        turns = conv[f"session_{number}"]
        if not isinstance(turns, list):
            problems.append(f"{sample_id} session_{number}: not a list of turns")
            continue
        for i, turn in enumerate(turns):
            problem = _locomo_turn_problem(
                turn, f"{sample_id} session_{number} turn {i + 1}", user_name, assistant_name
            )
            if problem is not None:
                problems.append(problem)
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
    if problems:
        raise _refuse(path, problems)
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


#: a number below this is epoch seconds (up to the year 2286), one at or above it milliseconds.
SECONDS_BELOW = 10**10
#: the latest time an imported line may have: 3000-01-01T00:00:00Z, epoch milliseconds.
MAX_TS_MS = int(datetime(3000, 1, 1, tzinfo=UTC).timestamp() * 1000)
_TS_RANGE = "1970-01-01 to 3000-01-01 UTC"


def check_ts_ms(ts_ms: int, shown: str) -> int:
    """``ts_ms`` when it lies within 1970-01-01 and 3000-01-01 UTC (the times an imported line
    may have; a time outside is a unit or a typo, not a message).

    Raises:
        DatasetError: it does not; ``shown`` is the value as the file gave it.
    """
    if not 0 <= ts_ms <= MAX_TS_MS:
        raise DatasetError(f"timestamp {shown} is outside {_TS_RANGE}")
    return ts_ms


def parse_ts(value: Any, fallback_ms: int) -> int:
    """The epoch milliseconds of a jsonl line's ``ts`` (``fallback_ms`` when it is ``None``).

    A number below :data:`SECONDS_BELOW` (10^10) is epoch seconds, one at or above it epoch
    milliseconds (10^10 seconds is the year 2286, 10^10 milliseconds April 1970); a string is
    ISO 8601 (UTC when it names no offset). The time must lie within 1970-01-01 and 3000-01-01
    UTC: a negative number, a number past 3000-01-01 in milliseconds, and an ISO date outside
    are refused, as are ``NaN`` and infinities.

    Raises:
        DatasetError: not such a value, or outside that range.
    """
    if value is None:
        return fallback_ms
    if isinstance(value, int | float) and not isinstance(value, bool):
        shown = json.dumps(value)
        if not math.isfinite(value):
            raise DatasetError(f"timestamp {shown} is not a number")
        if value < 0:
            raise DatasetError(f"timestamp {shown} is before 1970 ({_TS_RANGE})")
        return check_ts_ms(int(value * 1000) if value < SECONDS_BELOW else int(value), shown)
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError as exc:
            raise DatasetError(f"unrecognised timestamp {value!r}") from exc
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)
        return check_ts_ms(int(parsed.timestamp() * 1000), repr(value))
    raise DatasetError(f"unrecognised timestamp {value!r}")


@dataclass(frozen=True)
class _NotJson:
    """A jsonl line that is not JSON (the decoder's message)."""

    message: str


def _jsonl_records(path: Path) -> Iterator[tuple[int, Any]]:
    """``(line number, decoded JSON)`` of each non-blank line (:class:`_NotJson` for a line that
    is not JSON), read as bytes so that a byte that is not UTF-8 is reported with its line and
    file offset."""
    try:
        with path.open("rb") as handle:
            offset = 0
            for number, raw in enumerate(handle, start=1):
                start = offset
                offset += len(raw)
                if number == 1 and raw.startswith(codecs.BOM_UTF8):
                    raw, start = raw[len(codecs.BOM_UTF8) :], start + len(codecs.BOM_UTF8)
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    message = not_utf8_message(path, raw, exc, base=start, first_line=number)
                    raise DatasetError(message) from exc
                if text.strip():
                    try:
                        record = json.loads(text)
                    except ValueError as exc:
                        record = _NotJson(str(exc))
                    yield number, record
    except OSError as exc:
        raise DatasetError(f"cannot read {path}: {exc.strerror or exc}") from exc


def _describe_value(value: object) -> str:
    kinds = {bool: "a boolean", int: "a number", float: "a number", dict: "an object"}
    kinds.update({list: "a list", str: "a string", type(None): "null"})
    kind = kinds.get(type(value), type(value).__name__)
    shown = json.dumps(value, ensure_ascii=False)
    return f"{kind} ({shown[:40]}{'...' if len(shown) > 40 else ''})"


def _surrogate_reason(where: str, code: str) -> str:
    """Why a line whose text holds a lone surrogate (``code``, at ``where``) is refused."""
    what = f"{where} holds" if where else "holds"
    return f"{what} a lone surrogate {code} (a JSON escape that is no Unicode text)"


def _jsonl_problem(record: Any) -> tuple[str, str]:
    """``("", "")`` for a usable message; else ``("skip", reason)`` for a line left out on
    purpose, or ``("error", reason)`` for one that refuses the file."""
    from litellm_memory_hook.core.messages import content_text, is_blank, lone_surrogate

    if isinstance(record, _NotJson):
        return "error", f"not JSON ({record.message})"
    bad = lone_surrogate(record)
    if bad is not None:
        return "error", _surrogate_reason(*bad)
    if not isinstance(record, dict):
        return "error", f"{_describe_value(record)} is not a message object"
    role = record.get("role")
    if role is None:
        return "error", "no role (user or assistant)"
    if role in SKIPPED_ROLES:
        return "skip", f"{role} message"
    if role not in ("user", "assistant"):
        return "error", f"unknown role {json.dumps(role, ensure_ascii=False)} (user or assistant)"
    content = record.get("content")
    if content is not None and not isinstance(content, str | list):
        return "error", f"content is {_describe_value(content)}, not text or a list of parts"
    if is_blank(content_text(content)):
        return "skip", "tool calls, no text" if record.get("tool_calls") else "no text"
    return "", ""


def load_jsonl(path: Path, *, start_ms: int | None = None) -> History:
    """Read a history of one OpenAI-style message per line.

    Messages of the ``system``, ``developer``, ``tool`` and ``function`` roles and messages
    without text (content empty, missing or only white space; an assistant message with only
    tool calls) are left out and listed in ``skipped``. A missing ``ts`` continues one second
    after the previous line; the first line without one starts at ``start_ms`` (default: one
    second per line before now, so an undated file ends now), or, before the file's first dated
    line, a second apart up to a second before it. Lines without ``ts`` have
    ``dated=False``: their time depends on when and where in the file they are read.

    Raises:
        DatasetError: unreadable file, bytes that are not UTF-8, or lines that cannot be a turn
            (not JSON, not an object, a missing or unknown role, content that is neither text
            nor a list of parts, a bad ``ts`` or one outside 1970 to 3000 (:func:`parse_ts`),
            a string holding a lone surrogate): the first few are named and nothing is read.
    """
    from litellm_memory_hook.core.messages import content_text

    lines: list[HistoryLine] = []
    skipped: list[SkippedLine] = []
    problems: list[str] = []
    records = list(_jsonl_records(path))
    if start_ms is None:
        start_ms = int(datetime.now(tz=UTC).timestamp() * 1000) - 1000 * (len(records) + 1)
    last_ms = start_ms
    for number, record in records:
        verdict, reason = _jsonl_problem(record)
        if verdict == "error":
            problems.append(f"line {number}: {reason}")
            continue
        if verdict == "skip":
            skipped.append(SkippedLine(f"line {number}", reason))
            continue
        try:
            last_ms = parse_ts(record.get("ts"), last_ms + 1000)
        except DatasetError as exc:
            problems.append(f"line {number}: {exc}")
            continue
        lines.append(
            HistoryLine(
                role=str(record["role"]),
                text=content_text(record.get("content")),
                ts_ms=last_ms,
                speaker=str(record.get("name") or ""),
                line_id=f"L{number}",
                dated=record.get("ts") is not None,
            )
        )
    if problems:
        raise _refuse(path, problems)
    return History(sample_id=path.stem, lines=_date_leading(lines), skipped=tuple(skipped))


def _date_leading(lines: list[HistoryLine]) -> tuple[HistoryLine, ...]:
    """Undated lines before the file's first dated one end a second before it, a second apart
    (they would otherwise take the reading time, after every dated line)."""
    first = next((i for i, line in enumerate(lines) if line.dated), None)
    if not first:  # none dated, or the first line is
        return tuple(lines)
    at = lines[first].ts_ms
    moved = [
        replace(line, ts_ms=max(0, at - 1000 * (first - i))) for i, line in enumerate(lines[:first])
    ]
    return (*moved, *lines[first:])
