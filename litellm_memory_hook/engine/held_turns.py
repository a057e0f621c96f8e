"""The turns a request will store, held in this process from its pre-call step to its post-call
step. The signed record that crosses the model call (in the request's metadata) names them by
a token instead of carrying them: LiteLLM copies and logs request metadata, and a whole
history's record was megabytes, serialised and signed twice on the event loop.

Bounded: at most ``max_items`` entries and ``max_chars`` characters of turn text, each for at
most ``max_age_s`` (a request whose post-call hook never runs, a model call that failed, ages
out); the oldest go first, counted as ``held_dropped``. Why the record is signed:
docs/security.md#what-a-client-cannot-do.
"""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from litellm_memory_hook.core.models import Turn


@dataclass(frozen=True)
class Held:
    """One request's turns: ``pending`` to store, ``replace`` the stored ones they replace."""

    pending: tuple[Turn, ...]
    replace: tuple[Turn, ...]
    chars: int
    at: float


class HeldTurns:
    """Turns by token (see the module docstring).

    Args:
        max_items: most entries held.
        max_chars: most characters of turn text held in all.
        max_age_s: an entry older than this (seconds) is dropped.
        clock: monotonic seconds.
        on_drop: called once for each entry a bound drops.
    """

    def __init__(
        self,
        max_items: int = 20_000,
        max_chars: int = 256_000_000,
        max_age_s: float = 3600.0,
        clock: Callable[[], float] = time.monotonic,
        on_drop: Callable[[], None] | None = None,
    ) -> None:
        self.max_items = max_items
        self.max_chars = max_chars
        self.max_age_s = max_age_s
        self._clock = clock
        self._on_drop = on_drop
        self._items: OrderedDict[str, Held] = OrderedDict()
        self._chars = 0
        #: entries dropped by a bound before their post-call hook took them
        self.dropped = 0

    def __len__(self) -> int:
        return len(self._items)

    def hold(self, pending: Sequence[Turn], replace: Sequence[Turn]) -> str:
        """Hold the turns; returns their token (32 hex digits)."""
        token = secrets.token_hex(16)
        chars = sum(len(t.text) for t in pending) + sum(len(t.text) for t in replace)
        self._items[token] = Held(tuple(pending), tuple(replace), chars, self._clock())
        self._chars += chars
        self._trim()
        return token

    def take(self, token: object) -> Held | None:
        """The turns of ``token``, removed; ``None`` when unknown or dropped."""
        if not isinstance(token, str):
            return None
        self._trim()
        held = self._items.pop(token, None)
        if held is not None:
            self._chars -= held.chars
        return held

    def _trim(self) -> None:
        oldest = self._clock() - self.max_age_s
        while self._items:
            token, held = next(iter(self._items.items()))
            if (
                len(self._items) <= self.max_items
                and self._chars <= self.max_chars
                and held.at >= oldest
            ):
                break
            del self._items[token]
            self._chars -= held.chars
            self.dropped += 1
            if self._on_drop is not None:
                self._on_drop()
