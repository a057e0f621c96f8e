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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from litellm_memory_hook.core.messages import message_chars
from litellm_memory_hook.core.models import Turn
from litellm_memory_hook.core.plan import Seed
from litellm_memory_hook.slices import map_sliced


@dataclass(frozen=True)
class Held:
    """One request's turns: ``pending`` to store, ``replace`` the stored ones they replace,
    and the ``seed`` stored before ``pending`` (a whole-history client's first request; its
    messages become turns at the write, :meth:`seed_turns`), with ``made``: the turns of the
    seed's messages the request sent, made before the model call (by index in the seed), so
    that what LiteLLM does to a message it sends never reaches the store."""

    pending: tuple[Turn, ...]
    replace: tuple[Turn, ...]
    chars: int
    at: float
    seed: Seed | None = None
    made: Mapping[int, Turn] = field(default_factory=dict)

    async def seed_turns(self) -> list[Turn]:
        """The seed's turns, oldest first, made in slices of the event loop
        (:func:`~litellm_memory_hook.slices.map_sliced`): ~20 us a message."""
        seed = self.seed
        if seed is None:
            return []
        made = self.made
        turns = await map_sliced(lambda i: made.get(i) or seed.turn(i), range(len(seed.messages)))
        return [t for t in turns if t is not None]


def sent_now(seed: Seed, sent: Sequence[Mapping[str, Any]]) -> dict[int, Turn]:
    """The turns of the seed's messages that go upstream in ``sent`` (the rebuilt request's
    messages), by index in the seed. A message counts as sent when it, its ``content`` or its
    ``tool_calls`` is an object of a sent message (a copy that marks it for the cache shares
    its parts): LiteLLM may change what it sends, and the store keeps what the client sent.
    Linear in both; the window holds few messages."""
    shared = {id(m) for m in sent}
    for message in sent:
        for part in (message.get("content"), message.get("tool_calls")):
            if isinstance(part, (list, dict)):
                shared.add(id(part))
    made: dict[int, Turn] = {}
    for index, message in enumerate(seed.messages):
        parts = (message, message.get("content"), message.get("tool_calls"))
        if any(id(p) in shared for p in parts if isinstance(p, (list, dict))):
            turn = seed.turn(index)
            if turn is not None:
                made[index] = turn
    return made


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

    def hold(
        self,
        pending: Sequence[Turn],
        replace: Sequence[Turn],
        seed: Seed | None = None,
        made: Mapping[int, Turn] | None = None,
    ) -> str:
        """Hold the turns (and a seed, with the turns made of its sent messages: :class:`Held`);
        returns their token (32 hex digits)."""
        token = secrets.token_hex(16)
        chars = sum(len(t.text) for t in pending) + sum(len(t.text) for t in replace)
        if seed is not None:
            chars += sum(message_chars(m) for m in seed.messages)
        held = Held(tuple(pending), tuple(replace), chars, self._clock(), seed, dict(made or {}))
        self._items[token] = held
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
