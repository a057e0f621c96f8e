"""Date and time labels as the prompt shows them, unambiguous in every zone a user can set.

Pure functions. ISO order (year-month-day, 24-hour clock) in the user's IANA zone, then ``UTC``
or the numeric UTC offset in force at that moment, never a zone abbreviation:
``"2023-05-08 19:26 +05:30"``, ``"2023-05-08 13:56 UTC"``; the current time also names its
weekday (``"Thursday 2026-12-03 14:05 +01:00"``). Timestamps are epoch milliseconds.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from functools import lru_cache

from litellm_memory_hook.core.dates import user_zone


def _offset_label(offset: timedelta) -> str:
    """``+05:30``, ``-03:00``, ``+00:00``; seconds only when the offset has them (``+05:21:10``,
    the local mean time some zones used before standard time)."""
    seconds = int(offset.total_seconds())
    sign = "+" if seconds >= 0 else "-"
    hours, rest = divmod(abs(seconds), 3600)
    minutes, secs = divmod(rest, 60)
    label = f"{sign}{hours:02d}:{minutes:02d}"
    return f"{label}:{secs:02d}" if secs else label


def time_label(ts_ms: int, timezone: str | None = None) -> str:
    """The date label of a recalled line: unambiguous in every zone a user can set.

    ISO order (year-month-day, 24-hour clock) in the user's zone, then ``UTC`` for UTC or the
    numeric UTC offset in force at that moment (``+05:30``, ``-03:00``, ``+00:00``), never a zone
    abbreviation: "IST" is India, Israel or Ireland, "CST" China or the US, and a repeated hour at
    the end of summer time gets two different offsets. The same form as the extraction prompt's
    line times.

    Args:
        ts_ms: epoch milliseconds.
        timezone: IANA zone; ``None``, ``""`` or an unknown name gives UTC.

    Returns:
        ``"2023-05-08 19:26 +05:30"``; ``"2023-05-08 13:56 UTC"`` whenever the offset is zero;
        ``"time unknown"`` for a timestamp out of range.
    """
    return _time_label(ts_ms, timezone)


def now_label(ts_ms: int, timezone: str | None = None) -> str:
    """The current date and time as the prompt shows it: the weekday, then
    :func:`time_label` (``"Thursday 2026-12-03 14:05 +01:00"``); ``"time unknown"`` for a
    timestamp out of range."""
    label = _time_label(ts_ms, timezone)
    try:
        weekday = datetime.fromtimestamp(ts_ms / 1000, user_zone(timezone)).strftime("%A")
    except (OverflowError, OSError, ValueError):
        return label
    return f"{weekday} {label}"


@lru_cache(maxsize=8192)
def _time_label(ts_ms: int, timezone: str | None) -> str:
    # Cached: a request sizes and then shows each recalled line, and lines recur from request
    # to request.
    zone = user_zone(timezone)
    try:
        moment = datetime.fromtimestamp(ts_ms / 1000, zone)
    except (OverflowError, OSError, ValueError):
        return "time unknown"
    offset = moment.utcoffset() or timedelta(0)
    if not offset:
        return f"{moment:%Y-%m-%d %H:%M} UTC"  # UTC itself, or a zone at +00:00 at that moment
    return f"{moment:%Y-%m-%d %H:%M} {_offset_label(offset)}"
