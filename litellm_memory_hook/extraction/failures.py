"""Failed extraction jobs: bounded tries with exponential backoff, then given up until the next
message.

A conversation's failures live in its ``xfail`` hash (:attr:`ConversationKeys.
extraction_failures`, the user's slot): ``attempts`` (tries that failed in a row), ``next_ms``
(no try before this, epoch ms), ``kind`` (of the last failure: :data:`~litellm_memory_hook.
extraction.client.FAILURE_KINDS` or ``reply``, an unusable reply), ``seq`` (the conversation's
last seq when the job was given up; ``0`` while it is not) and ``fit`` (the most characters of
new lines that fitted the model's context, once a context error split a batch; ``0``: the
setting's budget). A job that commits deletes all but ``fit``.

The rules (pure: :func:`after_failure`):

* a failure waits ``extraction.backoff_s`` before the next try, then twice as long each time
  (``extraction.auth_backoff_s`` instead for 401, 403 and 404), at most
  ``extraction.max_backoff_s``; a new message meanwhile does not bring the try forward;
* after ``extraction.max_attempts`` failed tries in a row the job is given up: it leaves the due
  set, and runs again when the conversation has a message it did not have then (a new trigger),
  with a new round of tries.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Final

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from litellm_memory_hook.errors import StoreError
from litellm_memory_hook.settings import MemorySettings
from litellm_memory_hook.store.keys import ConversationKeys

#: kind of a failure whose reply was unusable twice (no JSON, the wrong shape).
REPLY_KIND: Final = "reply"

#: the ``xfail`` hash lives this long after its last write (seconds): long enough for any
#: backoff, short enough that a context budget that once fitted is tried whole again later.
FAILURES_TTL_S: Final = 7 * 86_400


@dataclass(frozen=True)
class Failures:
    """A conversation's extraction failures (see the module docstring for each field)."""

    attempts: int = 0
    next_ms: int = 0
    kind: str = ""
    seq: int = 0
    fit: int = 0

    @property
    def given_up(self) -> bool:
        """Whether the last round of tries was given up."""
        return self.seq > 0

    def waiting_for_message(self, last_seq: int) -> bool:
        """Given up, and the conversation has no message since (``last_seq``: its last seq)."""
        return self.given_up and last_seq <= self.seq

    def new_round(self) -> Failures:
        """The state for a new round of tries (a message came after the job was given up)."""
        return Failures(fit=self.fit)


def after_failure(
    state: Failures, kind: str, *, now_ms: int, last_seq: int, settings: MemorySettings
) -> Failures:
    """The state after one more failed try of kind ``kind`` at ``now_ms`` (epoch ms).

    Returns:
        ``attempts`` + 1; given up (``seq`` = ``last_seq``) when that reaches
        ``extraction.max_attempts``, else ``next_ms`` = now + the backoff: ``extraction.backoff_s``
        (``extraction.auth_backoff_s`` for ``auth`` and ``not_found``) times 2 ** (attempts - 1),
        at most ``extraction.max_backoff_s``.
    """
    attempts = state.attempts + 1
    if attempts >= settings.extraction.max_attempts:
        return replace(state, attempts=attempts, next_ms=0, kind=kind, seq=max(1, last_seq))
    base = (
        settings.extraction.auth_backoff_s
        if kind in ("auth", "not_found")
        else settings.extraction.backoff_s
    )
    wait_s = min(base * 2 ** (attempts - 1), settings.extraction.max_backoff_s)
    return replace(state, attempts=attempts, next_ms=now_ms + int(wait_s * 1000), kind=kind, seq=0)


def _int(raw: object) -> int:
    text = raw.decode() if isinstance(raw, bytes) else str(raw or "0")
    try:
        return int(text)
    except ValueError:
        return 0


class FailureStore:
    """Reads and writes the ``xfail`` hash of conversations.

    Every method raises :class:`StoreError` on a Redis failure.
    """

    def __init__(self, redis: aioredis.Redis) -> None:
        self.redis = redis

    async def read(self, keys: ConversationKeys) -> Failures:
        """The conversation's failures (all zero when it has none)."""
        try:
            raw = await self.redis.hgetall(keys.extraction_failures)
        except RedisError as exc:
            raise StoreError(f"read failures {keys.ref}: {exc}") from exc
        fields = {(k.decode() if isinstance(k, bytes) else str(k)): v for k, v in raw.items()}
        kind = fields.get("kind", b"")
        return Failures(
            attempts=_int(fields.get("attempts")),
            next_ms=_int(fields.get("next_ms")),
            kind=kind.decode() if isinstance(kind, bytes) else str(kind),
            seq=_int(fields.get("seq")),
            fit=_int(fields.get("fit")),
        )

    async def write(self, keys: ConversationKeys, state: Failures) -> None:
        """Store ``state``; an all-zero state deletes the hash."""
        name = keys.extraction_failures
        try:
            if state == Failures():
                await self.redis.delete(name)
                return
            async with self.redis.pipeline(transaction=True) as pipe:
                pipe.delete(name)
                pipe.hset(
                    name,
                    mapping={
                        "attempts": state.attempts,
                        "next_ms": state.next_ms,
                        "kind": state.kind,
                        "seq": state.seq,
                        "fit": state.fit,
                    },
                )
                pipe.expire(name, FAILURES_TTL_S)
                await pipe.execute()
        except RedisError as exc:
            raise StoreError(f"write failures {keys.ref}: {exc}") from exc
