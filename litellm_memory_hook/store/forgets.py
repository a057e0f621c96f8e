"""Forget tokens: a write begun before a forget never lands after it.

A request reads its conversation (pre-call), calls the model, then writes its turns (post-call,
or later from the outage buffer); an extraction job reads, calls the model, then commits. A
forget that comes between the read and the write would be undone by that write: the turns, or
the summary and memories drawn from them, stored again into the forgotten user's keys.

So each forget first sets a random token in the user's ``forgets`` hash
(:attr:`~litellm_memory_hook.store.keys.UserKeys.forgets`): field ``u`` for the whole user,
``c:<conversation>`` for one conversation. Every read that a write depends on also reads the
two tokens of its conversation (:func:`token_of`, ``"<user token>/<conversation token>"``),
and the write script compares them with the hash as it is then (:data:`FORGOTTEN_LUA`): a token
set now that differs from the one read means a forget came in between, and nothing is written.
This holds across proxy processes, the CLI and the worker, since the comparison is in Redis.

The hash is the one key a forget leaves: random tokens, no content, kept for
:func:`forget_token_ttl_s` (an hour past the outage buffer's age limit, the longest a write may
wait). A token that has expired no longer refuses anything; a write read with no token
(``""``: its request ran while Redis could not be read) is not checked.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence

import redis.asyncio as aioredis
from redis.exceptions import OutOfMemoryError, RedisError

from litellm_memory_hook.errors import StoreError
from litellm_memory_hook.store.keys import FORGET_USER_FIELD, ConversationKeys, UserKeys

#: how long a forget token outlives the outage buffer's age limit (seconds): requests still
#: running when the forget came (a long stream) are covered too.
FORGET_TOKEN_MARGIN_S = 3600

FORGOTTEN_LUA = """
-- Shared by the write scripts: true when a forget came after the write's read.
-- key: the user's forgets hash; field: the conversation's field (c:<c>); token: what the read
-- found, '<user token>/<conversation token>' ('' = not read: not checked). A token that is set
-- now and differs from the one read means a forget in between; an absent one refuses nothing.
local function forgotten(key, field, token)
  if token == '' then return false end
  local slash = string.find(token, '/', 1, true)
  if not slash then return false end
  local now = redis.call('HMGET', key, 'u', field)
  if now[1] and now[1] ~= string.sub(token, 1, slash - 1) then return true end
  if now[2] and now[2] ~= string.sub(token, slash + 1) then return true end
  return false
end
"""


def forget_token_ttl_s(buffer_max_age_s: float) -> int:
    """Seconds a forget token is kept: the outage buffer's age limit (``write_buffer_max_age_s``)
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
    try:
        async with redis.pipeline(transaction=False) as pipe:
            pipe.hset(user.forgets, field, secrets.token_hex(8))
            pipe.expire(user.forgets, ttl_s)
            await pipe.execute()
    except OutOfMemoryError:
        return False
    except RedisError as exc:
        raise StoreError(f"forget {user.hash_tag}: {exc}") from exc
    return True


__all__ = [
    "FORGET_TOKEN_MARGIN_S",
    "FORGOTTEN_LUA",
    "forget_token_ttl_s",
    "mark_forgotten",
    "token_of",
]
