"""Redis failures by kind, and a log line that says each kind once per period.

A failed write is not always an outage. Redis (or the client) fails in ways that call for
different handling:

=============  ===========================================================  ==================
kind           what it is                                                   handling
=============  ===========================================================  ==================
unreachable    connection refused or reset, timeout, a Cluster without a    transient: the
               node for the slot (``CLUSTERDOWN``, ``TRYAGAIN``), a server  breaker opens
               still ``LOADING``, any other exception of the client         (that node only)
               (``OSError``, redis-py's ``RedisClusterException``)
readonly       ``READONLY``: the node is a replica now (a failover)          reconnect, retry
noperm         ``NOPERM``: the Redis user lacks a command or key             refused
noscript       ``NOSCRIPT``: a script is missing and could not be loaded     refused
oom            ``OOM``: ``maxmemory`` reached under ``noeviction``           said; retried soon
wrongtype      ``WRONGTYPE``: a key holds another type (one user's key)      refused
script         another error raised inside a Lua script                     refused
refused        any other error reply                                        refused
error          an exception of the package itself, not of the client        refused
=============  ===========================================================  ==================

A *refused* write comes back at once and will come back the same way until someone fixes the
ACL or the key: it is set aside in its conversation (retried now and then, never in front of
other users' writes). Every kind but an outage or a failover is also *said*: counted by kind and
logged in one clear line per cause per period. A full Redis (OOM) is said but retried soon, in
order, as it refuses every conversation alike and frees up on its own.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum

from redis.exceptions import (
    ClusterDownError,
    NoPermissionError,
    NoScriptError,
    OutOfMemoryError,
    ReadOnlyError,
    RedisClusterException,
    RedisError,
    ResponseError,
    TryAgainError,
)
from redis.exceptions import (
    ConnectionError as RedisConnectionError,
)
from redis.exceptions import (
    TimeoutError as RedisTimeoutError,
)

from litellm_memory_hook.errors import StoreError

logger = logging.getLogger("litellm_memory_hook")


class RedisFault(StrEnum):
    """The kind of a failed Redis call (see the module's table)."""

    UNREACHABLE = "unreachable"
    READONLY = "readonly"
    NOPERM = "noperm"
    NOSCRIPT = "noscript"
    OOM = "oom"
    WRONGTYPE = "wrongtype"
    SCRIPT = "script"
    REFUSED = "refused"
    ERROR = "error"

    @property
    def transient(self) -> bool:
        """True when the same call may succeed in a moment and fails alike for every
        conversation on the node (an outage, a failover, a full Redis): retried soon, in
        order."""
        return self in (RedisFault.UNREACHABLE, RedisFault.READONLY, RedisFault.OOM)

    @property
    def refused(self) -> bool:
        """True when Redis (or our code) refuses this call until something changes (an ACL, a
        key): the write is set aside in its conversation."""
        return not self.transient

    @property
    def said(self) -> bool:
        """True for a refusal an operator must fix (every kind but an outage or a failover):
        counted as ``redis_refused_<kind>`` and said in one clear line per period."""
        return self not in (RedisFault.UNREACHABLE, RedisFault.READONLY)


#: every kind, in the table's order (metrics render one series per kind)
FAULT_KINDS: tuple[RedisFault, ...] = tuple(RedisFault)

_SCRIPT_TAIL = re.compile(r"\s*script: [0-9a-f]{40}.*$", re.DOTALL)


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and its causes, outermost first (a StoreError wraps the client's error)."""
    out: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and len(out) < 8:
        out.append(current)
        current = current.__cause__ or (
            None if current.__suppress_context__ else current.__context__
        )
    return out


def _response_kind(exc: ResponseError) -> RedisFault:
    """The kind of an error reply (the reply's first word, as a script passes it on)."""
    if isinstance(exc, ReadOnlyError):
        return RedisFault.READONLY
    if isinstance(exc, ClusterDownError | TryAgainError):
        return RedisFault.UNREACHABLE  # a Cluster between states (a node lost or just back)
    if isinstance(exc, NoPermissionError):
        return RedisFault.NOPERM
    if isinstance(exc, NoScriptError):
        return RedisFault.NOSCRIPT
    if isinstance(exc, OutOfMemoryError):
        return RedisFault.OOM
    text = str(exc)
    head = text.split(" ", 1)[0]
    by_head = {
        "WRONGTYPE": RedisFault.WRONGTYPE,
        "NOPERM": RedisFault.NOPERM,
        "OOM": RedisFault.OOM,
        "READONLY": RedisFault.READONLY,
        "NOSCRIPT": RedisFault.NOSCRIPT,
        "CLUSTERDOWN": RedisFault.UNREACHABLE,
        "TRYAGAIN": RedisFault.UNREACHABLE,
        "MASTERDOWN": RedisFault.UNREACHABLE,
        "LOADING": RedisFault.UNREACHABLE,
    }
    if head in by_head:
        return by_head[head]
    if "script:" in text or "@user_script" in text or "Error running script" in text:
        return RedisFault.SCRIPT
    return RedisFault.REFUSED


def classify(exc: BaseException) -> RedisFault:
    """The kind of a failure, read from ``exc`` and its causes.

    Args:
        exc: what a store call raised: a :class:`~litellm_memory_hook.errors.StoreError`
            wrapping the client's error, the client's error itself, or any other exception.

    Returns:
        The first kind the chain tells: an error reply by its code; a connection error, a
        timeout, an ``OSError``, ``asyncio.TimeoutError`` or a Cluster client error as
        ``unreachable``; a ``StoreError`` with no such cause as ``unreachable`` (the store
        raises it for Redis failures); anything else (a bug of ours) as ``error``.
    """
    for link in _chain(exc):
        if isinstance(link, ResponseError):
            return _response_kind(link)
        if isinstance(
            link,
            RedisConnectionError
            | RedisTimeoutError
            | RedisClusterException
            | OSError
            | asyncio.TimeoutError,
        ):
            return RedisFault.UNREACHABLE
        if isinstance(link, RedisError):
            return RedisFault.UNREACHABLE
    if any(isinstance(link, StoreError) for link in _chain(exc)):
        return RedisFault.UNREACHABLE
    return RedisFault.ERROR


def detail(exc: BaseException) -> str:
    """The client's message for a failure, without a script's sha and line (they differ per
    script, not per cause): ``"this user has no permissions to run the 'evalsha' command"``."""
    links = _chain(exc)
    text = str(links[-1]) or type(links[-1]).__name__
    return _SCRIPT_TAIL.sub("", text).strip()[:300]


_ADVICE = {
    RedisFault.NOPERM: (
        "the Redis user lacks a permission ({detail}); memory needs every command and key of "
        "`litellm-memory doctor` (scripting included: +@all ~{prefix}:* is enough)"
    ),
    RedisFault.NOSCRIPT: (
        "Redis has no copy of a memory script and could not load one ({detail}); allow "
        "SCRIPT LOAD and EVALSHA for the Redis user"
    ),
    RedisFault.OOM: (
        "Redis reached its memory limit ({detail}); raise maxmemory or free memory (the "
        "policy must stay noeviction)"
    ),
    RedisFault.WRONGTYPE: (
        "a key of this conversation holds another type of value ({detail}); only this "
        "conversation is affected"
    ),
    RedisFault.SCRIPT: "a memory script failed ({detail})",
    RedisFault.REFUSED: "Redis refused a write ({detail})",
    RedisFault.ERROR: "a write failed in the memory hook ({detail})",
    RedisFault.READONLY: (
        "Redis answered READONLY: the node became a replica after a failover ({detail})"
    ),
    RedisFault.UNREACHABLE: "Redis is unreachable ({detail})",
}


def explain(kind: RedisFault, exc: BaseException, *, prefix: str = "mem") -> str:
    """One sentence for the log: what happened and what to change (``kind`` of ``exc``)."""
    return _ADVICE[kind].format(detail=detail(exc), prefix=prefix)


@dataclass
class RateLimitedLog:
    """Log lines that would repeat, once per ``period_s`` per key, with how many were held back.

    ``emit(key, level, text)`` logs at once when ``key`` was not logged within the last
    ``period_s`` seconds, appending ``" (N more since the last line)"`` when some were held
    back; otherwise it only counts. ``clock`` (monotonic seconds) is injectable for tests.
    """

    period_s: float
    clock: Callable[[], float] = time.monotonic
    _last: dict[str, float] = field(default_factory=dict)
    _held: dict[str, int] = field(default_factory=dict)

    def emit(self, key: str, level: int, text: str) -> bool:
        """Log ``text`` for ``key`` unless it was logged within the period.

        Returns:
            True when a line was logged.
        """
        now = self.clock()
        last = self._last.get(key)
        if last is not None and now - last < self.period_s:
            self._held[key] = self._held.get(key, 0) + 1
            return False
        held = self._held.pop(key, 0)
        self._last[key] = now
        if len(self._last) > 1000:  # bounded: forget the oldest keys
            for old in sorted(self._last, key=self._last.__getitem__)[:500]:
                self._last.pop(old, None)
        suffix = f" ({held} more since the last line)" if held else ""
        logger.log(level, "%s%s", text, suffix)
        return True


def fault_key(kind: RedisFault, exc: BaseException) -> str:
    """The rate-limit key of a failure: its kind and its message (one line per cause)."""
    return f"{kind.value}:{detail(exc)[:120]}"
