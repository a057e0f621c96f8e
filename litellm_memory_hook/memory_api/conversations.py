"""Users and conversations through the API: the pages of a tenant's users and of a user's
conversations, a conversation's summary and extraction state, and making it due for extraction now.
"""

from __future__ import annotations

from redis.exceptions import RedisError

from litellm_memory_hook.errors import StoreError
from litellm_memory_hook.memory_api.base import APIBase, now_ms
from litellm_memory_hook.memory_api.errors import MemoryNotFoundError
from litellm_memory_hook.memory_api.targets import (
    MemoryTarget,
    check_tenant,
    checked_user,
    no_conversation,
)
from litellm_memory_hook.store import directory
from litellm_memory_hook.store.keys import UserKeys


class ConversationAPI(APIBase):
    """The calls on a tenant's users and on one conversation."""

    async def users(
        self, tenant: str, *, search: str = "", offset: int = 0, limit: int = 50
    ) -> directory.Page[directory.UserEntry]:
        """A page of the tenant's stored users, sorted by id, whose id contains ``search``
        (case-insensitive), found by SCAN (:func:`litellm_memory_hook.store.directory.list_users`).

        Raises:
            MemoryInputError: not a tenant id.
        """
        check_tenant(tenant)
        return await directory.list_users(
            self.redis,
            self.settings.storage.key_prefix,
            tenant,
            search=search,
            offset=offset,
            limit=limit,
        )

    async def conversations(
        self, tenant: str, user: object, *, search: str = "", offset: int = 0, limit: int = 50
    ) -> directory.Page[directory.ConversationEntry]:
        """A page of the user's stored conversations, most recently written first, whose id or
        alias contains ``search`` (case-insensitive).

        Raises:
            MemoryInputError: not a tenant id or not a usable user id.
            MemoryNotFoundError: nothing is stored for that user in the tenant.
        """
        keys = await self.existing_user(tenant, user)
        return await directory.list_conversations(
            self.redis, keys, search=search, offset=offset, limit=limit
        )

    async def existing_user(self, tenant: str, user: object) -> UserKeys:
        """The keys of a user that has something stored in the tenant.

        Raises:
            MemoryInputError: not a tenant id or not a usable user id.
            MemoryNotFoundError: nothing is stored for that user in the tenant (a mistyped id).
        """
        check_tenant(tenant)
        raw = checked_user(user)
        keys = UserKeys.for_ids(self.settings.storage.key_prefix, tenant, raw)
        if not await directory.has_user(self.redis, keys):
            raise MemoryNotFoundError(f"no such user {raw!r} in tenant {tenant!r}")
        return keys

    async def summary(self, target: MemoryTarget) -> dict[str, object]:
        """The conversation's summary and extraction state: ``summary`` (str), ``cursor`` and
        ``seq`` (the seq extracted through and the last seq), ``due_ms`` (epoch ms or None).

        Raises:
            MemoryNotFoundError: no such conversation (nothing stored: a mistyped conversation
                or user id, or a forgotten one), as for export and flush.
            StoreError: Redis failed.
        """
        try:
            summary, cursor, seq = await self.redis.hmget(
                target.conversation.meta, ["summary", "cursor", "seq"]
            )
        except RedisError as exc:
            raise StoreError(f"read summary: {exc}") from exc
        if summary is None and seq is None and not await self._has(target.conversation.turns):
            raise MemoryNotFoundError(no_conversation(target))
        return {
            "summary": summary.decode("utf-8", "replace") if isinstance(summary, bytes) else "",
            "cursor": int(cursor or 0),
            "seq": int(seq or 0),
            "due_ms": await self.queue.due_time(target.conversation),
        }

    async def flush(self, target: MemoryTarget) -> int:
        """Make the conversation due for extraction now; returns the due time (epoch ms).

        Raises:
            MemoryNotFoundError: the conversation has no stored turns (nothing to extract; a
                mistyped conversation or user id would otherwise be "due" and never change).
            StoreError: Redis failed.
        """
        if not await self._has(target.conversation.turns):
            raise MemoryNotFoundError(no_conversation(target) + ": nothing to extract")
        now = now_ms()
        await self.queue.schedule(target.conversation, now, earlier_only=True)
        return now


__all__ = ["ConversationAPI"]
