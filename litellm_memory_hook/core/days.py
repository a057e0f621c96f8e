"""Day marks: where the recent window crosses into an earlier day (a line that said
"tomorrow" 26 hours ago came back undated, and the model answered as if it were today's).

A pure function over the window's messages in window order and when each was said; the cache
layout's volatile tail shows its lines in its ``now`` section, under the current date and time.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime

from litellm_memory_hook.core.dates import user_zone
from litellm_memory_hook.core.messages import keep_head

#: at most this many day marks (the newest days kept): a window rarely spans more.
MAX_DAY_MARKS = 4

#: characters of a message's opening words quoted in its day mark.
QUOTE_CHARS = 48


def _day(ts_ms: int, timezone: str | None) -> date | None:
    try:
        return datetime.fromtimestamp(ts_ms / 1000, user_zone(timezone)).date()
    except (OverflowError, OSError, ValueError):
        return None


def _ago(day: date, today: date) -> str:
    days = (today - day).days
    if days == 0:
        return "today"
    if days == 1:
        return "yesterday"
    return f"{days} days ago" if days > 1 else "later"


def day_marks(
    said: Sequence[tuple[int, str]], now_ms: int, timezone: str | None = None
) -> list[str]:
    """One line per day the window's messages were said on, when any was said before today.

    Args:
        said: ``(ts_ms, text)`` of the window's messages in window order; ``ts_ms`` 0 (not
            known: a message the client sent that the store does not hold) is skipped.
        now_ms: now, epoch milliseconds.
        timezone: the user's IANA zone (days begin at their midnight); ``None``: UTC.

    Returns:
        ``[]`` when every dated message is from today; else, oldest first, at most
        :data:`MAX_DAY_MARKS` lines such as ``'Tuesday 2026-12-01 (yesterday): the messages
        from "My exam is tomorrow at 9 am, I am so nervous." on'``. Linear in ``said``.
    """
    today = _day(now_ms, timezone)
    if today is None:
        return []
    firsts: list[tuple[date, str]] = []
    for ts_ms, text in said:
        if ts_ms <= 0:
            continue
        day = _day(ts_ms, timezone)
        if day is not None and (not firsts or day != firsts[-1][0]):
            firsts.append((day, text))
    if not firsts or all(day >= today for day, _ in firsts):
        return []
    lines = []
    for day, text in firsts[-MAX_DAY_MARKS:]:
        quote = keep_head(" ".join(text[: QUOTE_CHARS * 4].split()), QUOTE_CHARS)
        lines.append(f'{day:%A %Y-%m-%d} ({_ago(day, today)}): the messages from "{quote}" on')
    return lines
