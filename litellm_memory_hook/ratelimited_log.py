"""Lines that would repeat, written at most once per period per kind, with a count.

A failure that lasts (Redis down, a server that will not start) would otherwise print one line
per request or per retry: 71 lines in 40 s for one outage. :class:`RateLimitedLog` writes the
first line of a kind at once; the same kind within ``period_s`` is only counted, and the next
line of that kind after the period says how many were held back. :meth:`RateLimitedLog.flush`
writes the count of a kind that went quiet, so a burst is never left unreported.

It writes through any ``write(text)`` callable: :meth:`RateLimitedLog.to_logger` for a
``logging.Logger`` at a level, or ``print`` / a console's ``print`` for a terminal.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

#: a held-back count is kept for at most this many kinds (the oldest are forgotten).
MAX_KINDS = 1000


def held_note(count: int, period_s: float) -> str:
    """`` (N more like it in the last P s)``, the suffix of a line that stands for others."""
    return f" ({count} more like it in the last {period_s:g} s)"


@dataclass
class RateLimitedLog:
    """At most one line per ``period_s`` per kind (``key``), with how many were held back.

    Attributes:
        write: where a line goes (``print``, a console's print, or :meth:`to_logger`).
        period_s: the shortest time between two lines of one kind.
        clock: monotonic seconds (injectable for tests).
    """

    write: Callable[[str], object]
    period_s: float = 60.0
    clock: Callable[[], float] = time.monotonic
    _last: dict[str, float] = field(default_factory=dict, repr=False)
    _held: dict[str, int] = field(default_factory=dict, repr=False)
    _text: dict[str, str] = field(default_factory=dict, repr=False)

    @classmethod
    def to_logger(
        cls, logger: logging.Logger, level: int = logging.WARNING, period_s: float = 60.0
    ) -> RateLimitedLog:
        """A rate-limited log that writes to ``logger`` at ``level``."""
        return cls(lambda text: logger.log(level, "%s", text), period_s)

    def emit(self, key: str, text: str) -> bool:
        """Write ``text`` unless a line of kind ``key`` was written within the period (then it
        is only counted). A line written after held-back ones ends with their count.

        Returns:
            True when the line was written.
        """
        now = self.clock()
        last = self._last.get(key)
        if last is not None and now - last < self.period_s:
            self._held[key] = self._held.get(key, 0) + 1
            self._text[key] = text
            return False
        held = self._held.pop(key, 0)
        self._text.pop(key, None)
        self._remember(key, now)
        self.write(text + (held_note(held, self.period_s) if held else ""))
        return True

    def flush(self, *, force: bool = False) -> int:
        """Write, for each kind with held-back lines whose period is over (every kind with
        ``force``, e.g. at exit), its last line with the count. Returns the lines written."""
        now = self.clock()
        written = 0
        for key in list(self._held):
            if not force and now - self._last.get(key, now) < self.period_s:
                continue
            held = self._held.pop(key)
            text = self._text.pop(key, key)
            self._remember(key, now)
            # the line shown stands for itself and the others: all ``held`` of them
            self.write(text + held_note(held - 1, self.period_s) if held > 1 else text)
            written += 1
        return written

    def held(self, key: str) -> int:
        """How many lines of kind ``key`` are held back now."""
        return self._held.get(key, 0)

    def _remember(self, key: str, now: float) -> None:
        self._last[key] = now
        if len(self._last) > MAX_KINDS:
            for old in sorted(self._last, key=self._last.__getitem__)[: MAX_KINDS // 2]:
                if old not in self._held:
                    self._last.pop(old, None)
