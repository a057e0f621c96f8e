"""Circuit breakers: after a Redis outage, requests skip Redis for a while instead of each
waiting for the timeout; a failed Cluster primary turns memory off for its users only.

A node whose call failed as unreachable is *tripped* for ``open_s`` seconds: calls for keys on it
skip Redis (requests go on without memory; writes wait in the outage buffer). While tripped it is
*half-open*: every ``probe_s`` seconds one call is let through (a probe), so memory is back within
that long of the node answering. A success closes it at once.

Nodes are named as :func:`litellm_memory_hook.store.client.node_of` names them (``""`` for one
server). :class:`NodeBreakers` is pure state and arithmetic over an injectable monotonic clock;
:class:`Health` adds the whole client's breaker (one server) and what trips them: only an
outage, never a refusal (docs/design.md, failure policy).
"""

from __future__ import annotations

import logging
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from litellm_memory_hook.store.errors import (
    RateLimitedLog,
    RedisFault,
    classify,
    explain,
    fault_key,
)
from litellm_memory_hook.store.keys import ConversationKeys

logger = logging.getLogger("litellm_memory_hook")

#: while a breaker is open, one request tries Redis this often (seconds).
BREAKER_PROBE_S = 0.5


@dataclass
class NodeBreakers:
    """The breakers of every node seen failing.

    Attributes:
        open_s: how long a trip lasts (seconds); renewed by every failure.
        probe_s: while tripped, one call per this many seconds goes through (seconds).
        clock: monotonic seconds.
    """

    open_s: float
    probe_s: float = BREAKER_PROBE_S
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


class Health:
    """Whether a request may use Redis now, for the whole client and per Cluster node.

    Args:
        open_s: how long a trip lasts (``redis.breaker_s``, seconds).
        counters: the hook's counters (``breaker_trips``, ``redis_refused_<kind>``).
        node: the Redis node of a conversation (``""``: one server, every key on it).
        refusals: the rate-limited log of Redis failures, shared with the outage buffer.
        prefix: the key prefix (said in the refusals' lines).
    """

    def __init__(
        self,
        open_s: float,
        counters: Counter[str],
        node: Callable[[ConversationKeys], str],
        refusals: RateLimitedLog,
        prefix: str,
    ) -> None:
        self.open_s = open_s
        self.nodes = NodeBreakers(open_s, BREAKER_PROBE_S)
        self.counters = counters
        self.node = node
        self.refusals = refusals
        self.prefix = prefix
        #: monotonic time the whole client's breaker closes (0: closed)
        self.down_until = 0.0
        #: monotonic time of the whole client's next probe
        self.next_probe = 0.0

    def open(self, keys: ConversationKeys | None = None) -> bool:
        """True while a request for ``keys`` should skip Redis: the whole client's breaker is
        open, or (on a Cluster) the breaker of the node holding ``keys``; ``None``: the whole
        client's only. Half-open: every ``BREAKER_PROBE_S`` one request tries Redis anyway, so
        memory is back within that long of Redis answering."""
        now = time.monotonic()
        if now < self.down_until:
            if now >= self.next_probe:
                self.next_probe = now + BREAKER_PROBE_S
                return False
            return True
        if keys is None:
            return False
        node = self.node(keys)
        return node != "" and self.nodes.is_open(node)

    def probing(self, keys: ConversationKeys) -> bool:
        """True when a call for ``keys`` is a probe (its breaker is tripped, half-open)."""
        if time.monotonic() < self.down_until:
            return True
        node = self.node(keys)
        return node != "" and self.nodes.tripped(node)

    def trip(self, keys: ConversationKeys | None = None, exc: BaseException | None = None) -> None:
        """After a Redis failure (one that a reconnect did not mend), skip Redis for up to
        ``open_s`` (a circuit breaker), probing every ``BREAKER_PROBE_S``: for the node holding
        ``keys`` on a Cluster (users on healthy nodes keep memory), for the whole client on one
        server or when ``keys`` is ``None``.

        Only an outage trips it. ``exc`` is the failure (default: the exception being handled,
        when called from an ``except`` block); a refusal (a missing permission, the memory
        limit, one user's key of another type, READONLY) comes at once and leaves other
        requests and users able to use Redis: it is counted by kind and said in one line per
        period instead, and nothing trips."""
        failure = exc if exc is not None else sys.exc_info()[1]
        if failure is not None:
            kind = classify(failure)
            if kind is not RedisFault.UNREACHABLE:
                if kind.said:
                    self.counters[f"redis_refused_{kind.value}"] += 1
                self.refusals.emit(
                    f"read:{fault_key(kind, failure)}",
                    logging.ERROR if kind.said else logging.WARNING,
                    f"memory hook: {explain(kind, failure, prefix=self.prefix)}; "
                    "requests go on without memory where Redis refuses them",
                )
                return
        node = "" if keys is None else self.node(keys)
        if node:
            self.trip_node(node)
            return
        now = time.monotonic()
        if now >= self.down_until:
            self.counters["breaker_trips"] += 1
            logger.warning("memory hook: Redis failed; memory is off for up to %.1f s", self.open_s)
        self.down_until = now + self.open_s
        self.next_probe = now + BREAKER_PROBE_S

    def trip_node(
        self, node: str, what: str = "memory is off for its users", role: str = ""
    ) -> None:
        """Open the breaker of ``node`` (a Cluster node that failed); a new trip is counted and
        said: the node, its ``role`` (what it holds), and ``what`` waits for it."""
        if self.nodes.trip(node):
            self.counters["breaker_trips"] += 1
            logger.warning(
                "memory hook: Redis node %s%s failed; %s for up to %.1f s",
                node,
                role,
                what,
                self.open_s,
            )

    def ok(self, keys: ConversationKeys | None = None) -> None:
        """Redis answered (for ``keys``: its node): close the breaker."""
        node = "" if keys is None else self.node(keys)
        if node:
            self.nodes.ok(node)
        else:
            self.down_until = 0.0
