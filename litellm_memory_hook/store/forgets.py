"""Forget tokens: a write begun before a forget never lands after it.

A request reads its conversation (pre-call), calls the model, then writes its turns (post-call,
or later from the outage buffer); an extraction job reads, calls the model, then commits. A
forget that comes between the read and the write would be undone by that write: the turns, or
the summary and memories drawn from them, stored again into the forgotten user's keys.

The user's ``forgets`` hash (:attr:`~litellm_memory_hook.store.keys.UserKeys.forgets`) holds
two kinds of token: field ``u`` for the whole user, ``c:<conversation>`` for one conversation.
The first write of a conversation creates both (``w:<random>``, only where absent); a forget
replaces its own (``f:<epoch ms>-<random>``: ``store/lua/mark_forgotten.lua``). Every read that a
write depends on also reads the two tokens (:func:`token_of`: ``"<user token>/<conversation
token>"``), and the write script compares them with the hash as it is then
(``store/lua/includes/forgotten.lua``): a token that changed means a forget came in between, and
nothing is written; a token created by another write where none was read is not a forget. This holds
across proxy processes, the CLI and the worker, since the comparison is in Redis.

A full Redis (``maxmemory`` under ``noeviction``) refuses the new token, but not deletes: the
forget then deletes the tokens instead (:func:`clear_tokens`), which refuses every write that
read one. The field ``n`` (set with the first token, never deleted by a forget) tells such a
clearing from the hash's expiry: a write that read only forget tokens (``f:``) and finds no
hash at all is no forget's (the hash a forget leaves outlives any write's wait, and a request
that straddled its expiry is stored); one that read a write's token (``w:``) is refused, as a
hash written before ``n`` existed and cleared on a full Redis is gone too.

A request that could not read Redis carries ``@<epoch ms>``, when it started: its
write is refused when a forget token was set at or after that time (the clocks of the proxy
and of the forgetting process are compared). ``""`` checks nothing (imports, deletes asked
for now).

After a forget of the whole user the hash is the one key left: the user's forget token, no
content, kept for :func:`forget_token_ttl_s` (an hour past the outage buffer's age limit, the
longest a write may wait); a write's TTL refresh makes it live as long as the user's data.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import time
from collections.abc import Sequence

import redis.asyncio as aioredis
from redis.exceptions import OutOfMemoryError, RedisError

from litellm_memory_hook.errors import StoreError
from litellm_memory_hook.store import scripts
from litellm_memory_hook.store.keys import FORGET_USER_FIELD, ConversationKeys, UserKeys

logger = logging.getLogger("litellm_memory_hook")

#: how long a forget token outlives the outage buffer's age limit (seconds): requests still
#: running when the forget came (a long stream) are covered too.
FORGET_TOKEN_MARGIN_S = 3600


def forget_token_ttl_s(buffer_max_age_s: float) -> int:
    """Seconds a forget token is kept: the outage buffer's age limit (``write_buffer.max_age_s``)
    plus :data:`FORGET_TOKEN_MARGIN_S`."""
    return int(buffer_max_age_s) + FORGET_TOKEN_MARGIN_S


def token_of(values: Sequence[bytes | str | None]) -> str:
    """The token a read found, from ``HMGET forgets u c:<c>`` (:meth:`ConversationKeys.
    forget_fields`): ``"<user token>/<conversation token>"``, each ``""`` when unset."""
    parts = [v.decode() if isinstance(v, bytes) else (v or "") for v in values]
    return "/".join(parts[:2])


async def mark_forgotten(
    redis: aioredis.Redis, user: UserKeys, conversation: ConversationKeys | None, *, ttl_s: int
) -> bool:
    """Set a new forget token for the whole user (``conversation`` None) or one conversation,
    before its keys are deleted: from then on, writes read earlier are refused.

    Returns:
        False when Redis refused the write (``OOM`` of a full Redis under ``noeviction``, which
        still takes deletes); True when set.

    Raises:
        StoreError: Redis failed otherwise (down, a timeout): the forget must not go on.
    """
    field = FORGET_USER_FIELD if conversation is None else conversation.index_member
    script = scripts.register(redis, "mark_forgotten")
    try:
        token = f"f:{int(time.time() * 1000)}-{secrets.token_hex(8)}"
        await script(keys=[user.forgets], args=[field, token, ttl_s])
    except OutOfMemoryError:
        return False
    except RedisError as exc:
        raise StoreError(f"forget {user.hash_tag}: {exc}") from exc
    return True


async def clear_tokens(
    redis: aioredis.Redis, user: UserKeys, conversation: ConversationKeys | None
) -> None:
    """Delete the user's tokens (``conversation`` None; the field ``n`` stays, so the hash is
    not taken for one that expired), or the conversation's and the user's:
    a full Redis takes deletes where it refuses a new token, and a write that read a token is
    refused once it is gone (``lua/includes/forgotten.lua``). For one conversation the user's token
    goes too: a conversation that exists only in an outage buffer has no token of its own yet, and
    its write read the user's (so the user's other writes under way are refused as well).

    Raises:
        StoreError: Redis failed.
    """
    try:
        if await redis.exists(user.forgets):  # never a new key without a TTL
            with contextlib.suppress(OutOfMemoryError):  # a hash written before n existed
                await redis.hsetnx(user.forgets, "n", "1")
        if conversation is None:
            fields = [f for f in await redis.hkeys(user.forgets) if f not in (b"n", "n")]
            if fields:
                await redis.hdel(user.forgets, *fields)
        else:
            await redis.hdel(user.forgets, FORGET_USER_FIELD, conversation.index_member)
    except RedisError as exc:
        raise StoreError(f"forget {user.hash_tag}: {exc}") from exc


async def refuse_earlier_writes(
    redis: aioredis.Redis, user: UserKeys, conversation: ConversationKeys | None, *, ttl_s: int
) -> None:
    """Before keys are deleted (a forget's second pass) or deleted and written anew (``import
    --fresh``): writes whose read came before are refused, as after a forget: a new token
    (:func:`mark_forgotten`), or on a full Redis the tokens deleted (:func:`clear_tokens`).
    Without it, a regenerate read before a fresh import replaces "its" old reply's seq, which
    an imported turn now holds.

    Raises:
        StoreError: Redis failed.
    """
    if not await mark_forgotten(redis, user, conversation, ttl_s=ttl_s):
        logger.info("memory forget: Redis is full; %s's tokens deleted", user.hash_tag)
        await clear_tokens(redis, user, conversation)


__all__ = [
    "FORGET_TOKEN_MARGIN_S",
    "clear_tokens",
    "forget_token_ttl_s",
    "mark_forgotten",
    "refuse_earlier_writes",
    "token_of",
]
