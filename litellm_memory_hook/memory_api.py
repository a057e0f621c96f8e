"""The memory API: read and edit a user's memories, read a summary, ask for extraction now.

One module used by the CLI (``litellm-memory memories ...``), the HTTP routes on the proxy
(``/memory/v1/...``) and tests, over the same store functions the hook and the worker use.

A memory set is named by (tenant, user, model alias): the alias gives the namespace and the
memory scope (``model_info.memory``), as for chat requests; with ``memory_scope: conversation``
(or for the summary and a flush) the conversation is named too, defaulting to the one a chat
request without a conversation id uses. The tenant always comes from the caller's credentials
(HTTP) or the operator (CLI), never from a request body, so a key never reaches another
tenant's memories: an id of another tenant's memory is simply not found (404).

Pinned memories are stored exactly as the user typed them (trimmed at the ends) and reach the
model escaped as data; the model never changes them. Deleting an extracted memory leaves a
tombstone (its fact hash), so the same fact is not extracted again from old messages (case C19).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from litellm_memory_hook.errors import MemoryHookError, StoreError
from litellm_memory_hook.extraction.parse import fact_hash
from litellm_memory_hook.settings import AliasMemoryConfig, MemorySettings
from litellm_memory_hook.store.keys import (
    ConversationKeys,
    MemoryKeys,
    conversation_scope,
    normalize_user_id,
    user_scope,
)
from litellm_memory_hook.store.memory_sets import MemoryItem, MemorySetStore
from litellm_memory_hook.store.queue import ExtractionQueue


class MemoryInputError(MemoryHookError):
    """A request to the memory API is invalid (empty or too long text, unknown alias, no user).

    The HTTP routes answer 400 with the message; the CLI prints it.
    """


class MemoryNotFoundError(MemoryHookError):
    """No memory with that id in the caller's memory set (HTTP 404)."""


@dataclass(frozen=True)
class MemoryTarget:
    """The keys a memory API call works on, and the raw ids they came from."""

    tenant: str
    user: str
    alias: str
    namespace: str
    conversation: ConversationKeys
    memory: MemoryKeys


@dataclass(frozen=True)
class MemoryListing:
    """A memory set as the API shows it: items oldest first and the set's version."""

    pinned: list[MemoryItem]
    memories: list[MemoryItem]
    version: int


def resolve_target(
    settings: MemorySettings,
    alias_lookup: Callable[[str], AliasMemoryConfig | None],
    *,
    tenant: str,
    user: object,
    model: str,
    conversation: str | None = None,
) -> MemoryTarget:
    """The memory set and conversation named by a caller.

    Args:
        settings: the global settings (key prefix).
        alias_lookup: alias name -> its memory config (``None``: unknown or memory off).
        tenant: the caller's tenant (from auth, never from the body).
        user: the user id, as a chat request would send it.
        model: the model alias.
        conversation: a conversation id; default: the alias namespace's default conversation.

    Raises:
        MemoryInputError: the user id is not usable, or the alias has no memory.
    """
    user_id = normalize_user_id(user)
    if user_id is None:
        raise MemoryInputError("'user' must be a non-empty user id")
    if not isinstance(model, str) or not model.strip():
        raise MemoryInputError("'model' must name a memory-enabled model alias")
    alias = alias_lookup(model)
    if alias is None:
        raise MemoryInputError(f"model {model!r} is not a memory-enabled alias")
    namespace = alias.namespace or model
    raw_conversation = conversation.strip() if isinstance(conversation, str) else ""
    keys = ConversationKeys.for_ids(
        settings.key_prefix, tenant, user_id, raw_conversation or namespace
    )
    scope = (
        conversation_scope(keys.conversation)
        if alias.memory_scope == "conversation"
        else user_scope(namespace)
    )
    return MemoryTarget(tenant, user_id, model, namespace, keys, keys.user_keys.memory_set(scope))


def _now_ms() -> int:
    return int(time.time() * 1000)


class MemoryAPI:
    """List, pin, edit and delete memories; read summaries; flush.

    Args:
        redis: an asyncio client (``decode_responses=False``).
        settings: the global settings (limits: ``max_pinned``, ``pinned_item_chars``; TTL).

    Every method raises :class:`StoreError` when Redis fails.
    """

    def __init__(self, redis: aioredis.Redis, settings: MemorySettings) -> None:
        self.redis = redis
        self.settings = settings
        self.memsets = MemorySetStore(redis, ttl_s=settings.retention_s)
        self.queue = ExtractionQueue(redis, settings.key_prefix)

    def _checked_text(self, text: object) -> str:
        if not isinstance(text, str):
            raise MemoryInputError("'text' must be a string")
        value = text.strip()
        if not value:
            raise MemoryInputError("'text' is empty")
        limit = self.settings.pinned_item_chars
        if len(value) > limit:
            raise MemoryInputError(f"'text' has {len(value)} characters; the limit is {limit}")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise MemoryInputError("'text' is not valid Unicode text") from exc
        return value

    async def list(self, target: MemoryTarget) -> MemoryListing:
        """The pinned and extracted memories of the target's set, oldest first."""
        state = await self.memsets.read(target.memory)
        return MemoryListing(state.pinned, state.memories, state.version)

    async def pin(self, target: MemoryTarget, text: object) -> MemoryItem:
        """Add a pinned memory (stored as typed, trimmed).

        Raises:
            MemoryInputError: empty, too long or not text; or the set has ``max_pinned``.
        """
        value = self._checked_text(text)
        item_id = await self.memsets.pin(
            target.memory, value, now_ms=_now_ms(), max_items=self.settings.max_pinned
        )
        if not item_id:
            raise MemoryInputError(
                f"this user already has {self.settings.max_pinned} pinned memories"
            )
        await self._touch_index(target)
        return MemoryItem(item_id, value)

    async def edit(self, target: MemoryTarget, item_id: str, text: object) -> MemoryItem:
        """Replace a pinned memory's text.

        Raises:
            MemoryInputError: bad text. MemoryNotFoundError: no such pinned memory.
        """
        value = self._checked_text(text)
        if not await self.memsets.edit_pinned(target.memory, item_id, value):
            raise MemoryNotFoundError(f"no pinned memory {item_id!r}")
        return MemoryItem(item_id, value)

    async def delete_pinned(self, target: MemoryTarget, item_id: str) -> None:
        """Delete a pinned memory.

        Raises:
            MemoryNotFoundError: no such pinned memory.
        """
        if not await self.memsets.delete(
            target.memory, item_id, pinned=True, tomb="", now_ms=_now_ms()
        ):
            raise MemoryNotFoundError(f"no pinned memory {item_id!r}")

    async def delete_memory(self, target: MemoryTarget, item_id: str) -> None:
        """Delete an extracted memory and leave its tombstone (not extracted again, C19).

        Raises:
            MemoryNotFoundError: no such extracted memory.
        """
        try:
            text = await self.redis.hget(target.memory.memories, item_id)
        except RedisError as exc:
            raise StoreError(f"read memory {item_id}: {exc}") from exc
        if text is None:
            raise MemoryNotFoundError(f"no extracted memory {item_id!r}")
        value = text.decode("utf-8", "replace") if isinstance(text, bytes) else str(text)
        if not await self.memsets.delete(
            target.memory, item_id, pinned=False, tomb=fact_hash(value), now_ms=_now_ms()
        ):
            raise MemoryNotFoundError(f"no extracted memory {item_id!r}")

    async def summary(self, target: MemoryTarget) -> dict[str, object]:
        """The conversation's summary and extraction state: ``summary`` (str), ``cursor`` and
        ``seq`` (the seq extracted through and the last seq), ``due_ms`` (epoch ms or None)."""
        try:
            summary, cursor, seq = await self.redis.hmget(
                target.conversation.meta, ["summary", "cursor", "seq"]
            )
        except RedisError as exc:
            raise StoreError(f"read summary: {exc}") from exc
        return {
            "summary": summary.decode("utf-8", "replace") if isinstance(summary, bytes) else "",
            "cursor": int(cursor or 0),
            "seq": int(seq or 0),
            "due_ms": await self.queue.due_time(target.conversation),
        }

    async def flush(self, target: MemoryTarget) -> int:
        """Make the conversation due for extraction now; returns the due time (epoch ms)."""
        now = _now_ms()
        await self.queue.schedule(target.conversation, now, earlier_only=True)
        return now

    async def _touch_index(self, target: MemoryTarget) -> None:
        index = target.conversation.user_keys.index
        try:
            async with self.redis.pipeline(transaction=False) as pipe:
                pipe.sadd(index, target.memory.scope)
                pipe.expire(index, self.settings.retention_s)
                await pipe.execute()
        except RedisError as exc:
            raise StoreError(f"user index {index}: {exc}") from exc


__all__ = [
    "MemoryAPI",
    "MemoryInputError",
    "MemoryListing",
    "MemoryNotFoundError",
    "MemoryTarget",
    "resolve_target",
]
