"""Circuit breakers per Redis node: a failed Cluster primary turns memory off for its users only.

A node whose call failed as unreachable is *tripped* for ``open_s`` seconds: calls for keys on it
skip Redis (requests go on without memory; writes wait in the outage buffer). While tripped it is
*half-open*: every ``probe_s`` seconds one call is let through (a probe), so memory is back within
that long of the node answering. A success closes it at once.

Nodes are named as :func:`litellm_memory_hook.store.client.node_of` names them (``""`` for one
server). Pure state and arithmetic over an injectable monotonic clock: no I/O.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class NodeBreakers:
    """The breakers of every node seen failing.

    Attributes:
        open_s: how long a trip lasts (seconds); renewed by every failure.
        probe_s: while tripped, one call per this many seconds goes through (seconds).
        clock: monotonic seconds.
    """

    open_s: float
    probe_s: float = 0.5
    clock: Callable[[], float] = time.monotonic
    #: node -> (monotonic time the trip ends, monotonic time of the next probe)
    _state: dict[str, tuple[float, float]] = field(default_factory=dict)

    def is_open(self, node: str) -> bool:
        """True while calls for ``node`` should skip Redis; False when it is closed, and once
        per ``probe_s`` while tripped (that call is the probe)."""
        state = self._state.get(node)
        if state is None:
            return False
        now = self.clock()
        down_until, next_probe = state
        if now >= down_until:
            del self._state[node]
            return False
        if now >= next_probe:
            self._state[node] = (down_until, now + self.probe_s)
            return False
        return True

    def tripped(self, node: str) -> bool:
        """True while ``node`` is tripped (open or half-open): a call let through is a probe."""
        state = self._state.get(node)
        return state is not None and self.clock() < state[0]

    def trip(self, node: str) -> bool:
        """``node`` failed: open its breaker (again) for ``open_s``.

        Returns:
            True when it was closed before (a new trip, to be counted and said).
        """
        now = self.clock()
        fresh = not self.tripped(node)
        self._state[node] = (now + self.open_s, now + self.probe_s)
        return fresh

    def ok(self, node: str) -> None:
        """``node`` answered: close its breaker."""
        self._state.pop(node, None)

    def open_nodes(self) -> list[str]:
        """The nodes tripped now, sorted."""
        now = self.clock()
        return sorted(n for n, (until, _) in self._state.items() if now < until)
