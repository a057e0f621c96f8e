"""Dates a query names, as spans of time in the user's zone (pure functions).

A date term (kind ``DATE_PREFIX``, :mod:`litellm_memory_hook.core.recall`) lifts the lines said
within its span among those the query's words matched; in a question
(:func:`litellm_memory_hook.core.recall.asks_about_time`) whose date weighs at least as much as
each of its other words (:func:`litellm_memory_hook.core.recall.dates_lead`; the words of the
dates themselves are left out by :func:`without_dates`) it recalls the lines said then on its
own. Two kinds of form are read, English only:

* absolute, with a four-digit year: "8 May 2023", "8th of May, 2023", "May 8, 2023", ISO
  "2023-05-08" (a day), "May 2023" (a month), a season of a year ("summer 2023", "the summer
  of 2023": its three months, as northern-hemisphere meteorological seasons: spring March to
  May, summer June to August, autumn or fall September to November, winter December to
  February of the next year, so "winter 2023" and "winter 2023/24" are December 2023 to
  February 2024) and a year after "in", "during", "throughout" or "of" ("in 2023", "in the
  year 2023"; a number alone, "2023 steps", is no year); an impossible day ("31 June 2023")
  counts as its month;
* relative to the request's time (``now_ms``), in the user's zone: "today", "yesterday", "the
  day before yesterday", "N days ago" (a day); "last/on <weekday>" (the latest such day before
  today); "this week", "last week" (ISO weeks, Monday first; this week up to today), "N weeks
  ago" (the 7 days around the day N weeks back); "this month", "last month", "N months ago"
  (calendar months); "this year", "last year"; "the past week/month/year" (the last 7, 30 or
  365 days). N is a number up to 99 or a word up to "twelve"
  ("a"/"an" is one).

Not read: dates without a year ("8 May", "last summer"), future forms ("tomorrow", "next
week"; memory holds the past), and other languages. At most ``MAX_DATES_PER_QUERY`` spans, in
text order.

A message asks about a time (:func:`litellm_memory_hook.core.recall.asks_about_time`) when it
holds a question mark or its first word is an English question word (``QUESTION_WORDS``: "what
happened last Tuesday" needs no "?"); a request that only contains a date ("remind me on 3 May
2023 to call Bob") does not.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo

import regex

__all__ = [
    "DATE_PREFIX",
    "MAX_DATES_PER_QUERY",
    "QUESTION_WORDS",
    "DateSpan",
    "is_zone",
    "query_dates",
    "user_zone",
    "without_dates",
]

DATE_PREFIX = "@"
"""Prefix of date terms: a date named in the query (:func:`query_dates`). They are never stored:
the store finds the lines of that span by time, and
:func:`litellm_memory_hook.core.recall.date_postings` turns them into postings for the scorer."""

MAX_DATES_PER_QUERY = 4
"""Most dates taken from one query (each costs the store one lookup by time)."""

_MONTHS: dict[str, int] = {}
for _number, _name in enumerate(
    (
        "january",
        "february",
        "march",
        "april",
        "may",
        "june",
        "july",
        "august",
        "september",
        "october",
        "november",
        "december",
    ),
    start=1,
):
    _MONTHS[_name] = _number
    _MONTHS[_name[:3]] = _number
_MONTHS["sept"] = 9
_MONTH = "|".join(sorted(_MONTHS, key=len, reverse=True))
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"
_DATE_FORMS = (
    # 8 May 2023, 8th of May, 2023
    regex.compile(rf"\b{_DAY}\s+(?:of\s+)?(?P<month>{_MONTH})\.?,?\s+{_YEAR}\b", regex.I),
    # May 8, 2023
    regex.compile(rf"\b(?P<month>{_MONTH})\.?\s+{_DAY},?\s+{_YEAR}\b", regex.I),
    # 2023-05-08
    regex.compile(r"\b(?P<year>(?:19|20)\d\d)-(?P<mnum>[01]\d)-(?P<day>[0-3]\d)\b"),
)
_MONTH_FORM = regex.compile(rf"\b(?P<month>{_MONTH})\.?,?\s+{_YEAR}\b", regex.I)
_SEASON_MONTHS = {"spring": 3, "summer": 6, "autumn": 9, "fall": 9, "winter": 12}
"""The first month of each season (northern-hemisphere meteorological seasons, three months
each)."""
# summer 2023, the summer of 2023, winter 2023 and winter 2023/24 (December 2023 to February
# 2024); not the head of an ISO date ("summer 2023-05-08")
_SEASON_FORM = regex.compile(
    rf"\b(?P<season>{'|'.join(_SEASON_MONTHS)})\s+(?:of\s+)?{_YEAR}(?:[-/](?:\d\d){{1,2}})?"
    r"\b(?![-/.]\d)",
    regex.I,
)
# in 2023, during 2023, in the year 2023; not "since" / "from" (another
# span), nor a bare number ("2023 steps"), nor the head of an ISO date ("in 2023-05-08")
_YEAR_FORM = regex.compile(
    rf"\b(?:in|during|throughout|of)\s+(?:the\s+year\s+)?{_YEAR}\b(?![-/.]\d)", regex.I
)
_ANY_YEAR = regex.compile(r"(?:19|20)\d\d")  # every form has one: a cheap test first


@dataclass(frozen=True)
class DateSpan:
    """A day, week, month, season or year named in a query, as a span of time in the user's
    zone.

    Attributes:
        term: its term (kind ``DATE_PREFIX``): ``"@2023-05-08"`` (a day), ``"@2023-05"`` (a
            month), ``"@2023"`` (a year), ``"@2023-05-01..2023-05-08"`` (other spans, end
            excluded: a week, a season ``"@2023-06-01..2023-09-01"``).
        start_ms / end_ms: the span, epoch ms, end excluded: local midnight to midnight.
    """

    term: str
    start_ms: int
    end_ms: int


def is_zone(name: str) -> bool:
    """Whether ``name`` is an IANA time zone this system knows (``Asia/Kolkata``, ``UTC``):
    the check of ``metadata.timezone`` (HTTP 400) and of the ``timezone`` setting."""
    try:
        ZoneInfo(name)
    except (KeyError, ValueError, OSError):  # ZoneInfoNotFoundError is a KeyError
        return False
    return True


def user_zone(name: str | None) -> tzinfo:
    """The user's zone: the IANA zone ``name``; UTC for ``None``, ``""`` or an unknown name."""
    if not name:
        return UTC
    try:
        return ZoneInfo(name)
    except (KeyError, ValueError, OSError):  # ZoneInfoNotFoundError is a KeyError
        return UTC


def _local_ms(day: date, zone: tzinfo) -> int:
    return int(datetime(day.year, day.month, day.day, tzinfo=zone).timestamp() * 1000)


_NUMBER_WORDS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
}
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_COUNT = r"(?P<n>\d{1,2}|" + "|".join(_NUMBER_WORDS) + r")"
_RELATIVE = regex.compile(
    r"\b(?:"
    r"(?P<before>the\s+day\s+before\s+yesterday)"
    r"|(?P<yesterday>yesterday)"
    r"|(?P<today>today|tonight|this\s+morning)"
    rf"|{_COUNT}\s+(?P<unit>day|week|month|year)s?\s+ago"
    r"|(?P<which>last|this|past)\s+(?P<period>week|month|year)"
    rf"|(?:last|on)\s+(?P<weekday>{'|'.join(_WEEKDAYS)})"
    r")\b",
    regex.I,
)


def _month_start(day: date, back: int = 0) -> date:
    """The first day of the month ``back`` months before ``day``'s."""
    index = day.year * 12 + day.month - 1 - back
    return date(index // 12, index % 12 + 1, 1)


def _span(first: date, end: date, zone: tzinfo) -> DateSpan:
    """The span ``[first, end)`` of local days, named as a day, a month, a year or a range."""
    if end - first == timedelta(days=1):
        name = first.isoformat()
    elif first.day == 1 and end == _month_start(first, -1):
        name = first.isoformat()[:7]
    elif (first.month, first.day) == (1, 1) and end == date(first.year + 1, 1, 1):
        name = str(first.year)
    else:
        name = f"{first.isoformat()}..{end.isoformat()}"
    return DateSpan(f"{DATE_PREFIX}{name}", _local_ms(first, zone), _local_ms(end, zone))


def _relative(match: regex.Match[str], today: date) -> tuple[date, date] | None:
    """The local days ``[first, end)`` a relative form names (see the module docstring)."""
    day = timedelta(days=1)
    groups = match.groupdict()
    if groups["before"]:
        return today - 2 * day, today - day
    if groups["yesterday"]:
        return today - day, today
    if groups["today"]:
        return today, today + day
    if groups["weekday"]:
        back = (today.weekday() - _WEEKDAYS.index(groups["weekday"].lower())) % 7 or 7
        return today - back * day, today - (back - 1) * day
    if groups["unit"]:
        count = groups["n"].lower()
        n = int(count) if count.isdigit() else _NUMBER_WORDS[count]
        unit = groups["unit"].lower()
        if unit == "day":
            return today - n * day, today - (n - 1) * day
        if unit == "week":
            middle = today - 7 * n * day
            return middle - 3 * day, middle + 4 * day
        if unit == "month":
            return _month_start(today, n), _month_start(today, n - 1)
        return date(today.year - n, 1, 1), date(today.year - n + 1, 1, 1)
    period, which = groups["period"].lower(), groups["which"].lower()
    if which == "past":  # the last 7, 30 or 365 days, today included
        length = {"week": 7, "month": 30, "year": 365}[period]
        return today - (length - 1) * day, today + day
    back = 0 if which == "this" else 1
    if period == "week":
        monday = today - today.weekday() * day - 7 * back * day
        return monday, (today + day if back == 0 else monday + 7 * day)
    if period == "month":
        return _month_start(today, back), (today + day if back == 0 else _month_start(today))
    first = date(today.year - back, 1, 1)
    return first, (today + day if back == 0 else date(today.year, 1, 1))


def query_dates(
    text: str, timezone: str | None = None, now_ms: int | None = None
) -> list[DateSpan]:
    """The days, weeks, months, seasons and years a query names (module docstring), as spans of
    time in the user's zone.

    Args:
        text: the new user message.
        timezone: IANA zone of the user; ``None`` or an unknown name gives UTC.
        now_ms: the request's time, epoch ms; ``None`` reads no relative form.

    Returns:
        The spans, distinct, in text order, at most ``MAX_DATES_PER_QUERY``.
    """
    zone = user_zone(timezone)
    found: list[tuple[int, DateSpan]] = []
    if _ANY_YEAR.search(text) is not None:
        found.extend(_absolute(text, zone))
    if now_ms is not None:
        today = datetime.fromtimestamp(now_ms / 1000, zone).date()
        for match in _RELATIVE.finditer(text):
            days = _relative(match, today)
            if days is not None:
                found.append((match.start(), _span(*days, zone)))
    spans = list(dict.fromkeys(span for _, span in sorted(found, key=lambda x: x[0])))
    return spans[:MAX_DATES_PER_QUERY]


def _absolute(text: str, zone: tzinfo) -> list[tuple[int, DateSpan]]:
    """The absolute forms of ``text`` (with a year), each with its position."""
    found: list[tuple[int, DateSpan]] = []
    taken: list[tuple[int, int]] = []
    for form in _DATE_FORMS:
        for match in form.finditer(text):
            groups = match.groupdict()
            month = _MONTHS[groups["month"].lower()] if groups.get("month") else 0
            try:
                day = date(int(groups["year"]), month or int(groups["mnum"]), int(groups["day"]))
            except ValueError:
                continue
            found.append((match.start(), _span(day, day + timedelta(days=1), zone)))
            taken.append(match.span())
    for match in _MONTH_FORM.finditer(text):
        if any(a <= match.start() < b for a, b in taken):
            continue
        first = date(int(match.group("year")), _MONTHS[match.group("month").lower()], 1)
        found.append((match.start(), _span(first, _month_start(first, -1), zone)))
        taken.append(match.span())
    for match in _SEASON_FORM.finditer(text):
        if any(a <= match.start("year") < b for a, b in taken):
            continue
        first = date(int(match.group("year")), _SEASON_MONTHS[match.group("season").lower()], 1)
        found.append((match.start(), _span(first, _month_start(first, -3), zone)))
        taken.append(match.span())
    for match in _YEAR_FORM.finditer(text):
        at = match.start("year")
        if any(a <= at < b for a, b in taken):
            continue
        year = int(match.group("year"))
        found.append((at, _span(date(year, 1, 1), date(year + 1, 1, 1), zone)))
    return found


QUESTION_WORDS: frozenset[str] = frozenset(
    [
        "what",
        "which",
        "who",
        "whom",
        "whose",
        "where",
        "when",
        "why",
        "how",
        "did",
        "do",
        "does",
        "was",
        "were",
        "have",
        "had",
    ]
)
"""English words that open a question without a question mark ("what happened last Tuesday"):
:func:`litellm_memory_hook.core.recall.asks_about_time`. English only, like the date forms;
imperatives ("remind", "tell") are not among them."""


def without_dates(text: str, now_ms: int | None = None) -> str:
    """``text`` with every date form :func:`query_dates` reads replaced by a space: the words a
    query has besides its dates ("What did we talk about on 2 May 2023?" -> "What did we talk
    about on  ?"), whose terms :func:`litellm_memory_hook.core.recall.dates_lead` weighs
    against the dates.

    Args:
        text: the new user message.
        now_ms: the request's time; ``None`` leaves the relative forms ("yesterday") in place,
            as :func:`query_dates` does not read them then.

    Returns:
        The text without its date forms (an impossible day such as "31 June 2023" included).
    """
    forms: list[regex.Pattern[str]] = []
    if _ANY_YEAR.search(text) is not None:
        forms.extend((*_DATE_FORMS, _MONTH_FORM, _SEASON_FORM, _YEAR_FORM))
    if now_ms is not None:
        forms.append(_RELATIVE)
    for form in forms:
        text = form.sub(" ", text)
    return text
