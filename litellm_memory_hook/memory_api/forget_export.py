"""Forget, export and import through the API: a whole user (every conversation and memory set,
whatever the alias) or one conversation, through the user's index (no ``KEYS``/``SCAN``); the
document is :class:`~litellm_memory_hook.memory_api.export_format.ExportDocument`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from redis.exceptions import RedisError

from litellm_memory_hook.errors import StoreError
from litellm_memory_hook.memory_api.base import APIBase, Progress, now_ms
from litellm_memory_hook.memory_api.errors import MemoryInputError, MemoryNotFoundError
from litellm_memory_hook.memory_api.export_format import (
    ExportDocument,
    conversation_dump,
    export_conversation,
    export_memory_set,
    memory_set_dump,
)
from litellm_memory_hook.memory_api.targets import (
    MemoryTarget,
    check_tenant,
    checked_user,
    no_conversation,
)
from litellm_memory_hook.store import transfer
from litellm_memory_hook.store.forgets import (
    forget_token_ttl_s,
    mark_forgotten,
    refuse_earlier_writes,
)
from litellm_memory_hook.store.keys import ConversationKeys, UserKeys
from litellm_memory_hook.store.redis_store import MemoryStore


@dataclass(frozen=True)
class ForgetResult:
    """What a forget deleted: keys, and the conversations and memory sets they held."""

    deleted_keys: int
    conversations: int
    memory_sets: int


@dataclass(frozen=True)
class ImportExportResult:
    """What importing an export wrote."""

    conversations: int
    turns: int
    memory_sets: int
    memories: int


class ForgetExportAPI(APIBase):
    """Forget, export and import a user's or a conversation's data."""

    async def forget(self, target: MemoryTarget, *, whole_user: bool) -> ForgetResult:
        """Delete every key of the target's user (``whole_user``: every conversation and memory
        set, whatever the alias; through the index, never KEYS) or of the target's conversation
        (its keys, a conversation-scoped memory set; memories shared by the user's other
        conversations stay), and their entries in the index and the due set. Deleting nothing
        is not an error.

        A new forget token is set first (:mod:`litellm_memory_hook.store.forgets`): a turn or
        an extraction whose read came before the forget, still running or waiting in an outage
        buffer, is refused when it would be written, in any process. A full Redis (maxmemory
        under ``noeviction``) refuses the token but takes deletes: the token is set after the
        deletes (they free memory), or else the tokens are deleted, which refuses those writes
        too; then the keys are deleted once more (a write may have landed in between).

        Raises:
            StoreError: Redis failed (forgetting again is safe).
        """
        scope = None if whole_user else target.conversation
        ttl_s = forget_token_ttl_s(self.settings.write_buffer.max_age_s)
        user = target.conversation.user_keys
        marked = await mark_forgotten(self.redis, user, scope, ttl_s=ttl_s)
        result = await self._delete_target(target, whole_user=whole_user)
        if not marked:
            await refuse_earlier_writes(self.redis, user, scope, ttl_s=ttl_s)
            await self._delete_target(target, whole_user=whole_user)
        return result

    async def _delete_target(self, target: MemoryTarget, *, whole_user: bool) -> ForgetResult:
        """The deletes of :meth:`forget`, and what they deleted."""
        user = target.conversation.user_keys
        if not whole_user:
            keys = target.conversation
            existed = await self._has(keys.meta, keys.turns)
            own_set = await self._has(*user.memory_set(keys.index_member).all())
            deleted = await transfer.delete_conversation(self.redis, keys)
            return ForgetResult(deleted, int(existed), int(own_set))
        members = await transfer.index_members(self.redis, user)
        conversations = sum(1 for m in members if m.startswith("c:"))
        memory_sets = 0
        for member in members:
            memory_sets += await self._has(*user.memory_set(member).all())
        deleted = await MemoryStore.for_settings(self.redis, self.settings).forget_user(user)
        await transfer.drop_due_refs(self.redis, user)
        return ForgetResult(deleted, conversations, memory_sets)

    async def export(
        self, target: MemoryTarget, *, whole_user: bool, progress: Progress | None = None
    ) -> ExportDocument:
        """Everything stored for the target's user (``whole_user``) or the target's
        conversation (with the memory set it uses), as an :class:`ExportDocument`.

        Raises:
            MemoryNotFoundError: one conversation was asked for and nothing is stored there.
        """
        user = target.conversation.user_keys
        conversations: list[transfer.ConversationDump] = []
        sets: dict[str, transfer.MemorySetDump] = {}
        if whole_user:
            members = await transfer.index_members(self.redis, user)
        else:
            members = [target.conversation.index_member]
        names = [m for m in members if m.startswith("c:")]
        for done, member in enumerate(names):
            dump = await transfer.read_conversation(self.redis, user.conversation(member[2:]))
            if progress is not None:
                progress(done + 1, len(names))
            if dump.empty:
                continue
            conversations.append(dump)
            scopes = [member]
            if not whole_user:
                scopes.append(dump.meta.get("mscope") or target.memory.scope)
            for scope in scopes:
                if scope not in sets:
                    sets[scope] = await transfer.read_memory_set(self.redis, user.memory_set(scope))
        if not whole_user and not conversations:
            raise MemoryNotFoundError(no_conversation(target))
        for member in members:
            if member.startswith("ns:") and member not in sets:
                sets[member] = await transfer.read_memory_set(self.redis, user.memory_set(member))
        return ExportDocument(
            exported_ms=now_ms(),
            key_prefix=self.settings.storage.key_prefix,
            tenant=target.tenant,
            user=target.user,
            conversation=None if whole_user else target.conversation.conversation,
            conversations=[export_conversation(c) for c in conversations],
            memory_sets=[export_memory_set(m) for m in sets.values() if not m.empty],
        )

    async def import_export(
        self,
        document: ExportDocument,
        *,
        tenant: str,
        user: object,
        fresh: bool = False,
        progress: Progress | None = None,
    ) -> ImportExportResult:
        """Write an export back, for ``user`` of ``tenant`` (the document's or others).

        Without ``fresh``, nothing is written when any of the document's conversations or
        memory sets already holds data for that user; with ``fresh`` they are deleted first.
        An export of one conversation brings its shared memory set along: a set the user still
        has is kept as it is (its memories are newer than the export's), so a forgotten
        conversation can be imported back without ``fresh``.

        Args:
            document: a validated export (:meth:`ExportDocument.parse`).
            tenant: the tenant to write under.
            user: the user id to write under.
            fresh: replace what is stored under the document's conversations and memory sets.
            progress: called with (turns written, turns in the document).

        Raises:
            MemoryInputError: bad user id, data already there (without ``fresh``), a malformed
                turn (then nothing is written). StoreError: Redis failed.
        """
        check_tenant(tenant)
        user_id = checked_user(user)
        keys = UserKeys.for_ids(self.settings.storage.key_prefix, tenant, user_id)
        conversations = [keys.conversation(c.key) for c in document.conversations]
        sets = [keys.memory_set(m.scope) for m in document.memory_sets]
        taken = [c.conversation for c in conversations if await self._has(c.meta, c.turns)]
        live = {m.scope for m in sets if await self._has(*m.all())}
        # one conversation: the user's live memory sets stay as they are; else they are data
        kept = live if document.conversation is not None and not fresh else set()
        taken += [m.scope for m in sets if m.scope in live - kept]
        if taken and not fresh:
            raise MemoryInputError(
                f"user {user_id!r} of tenant {tenant!r} already has data in {', '.join(taken)}; "
                "forget it first, or import with --fresh to replace it"
            )
        # every turn is checked before anything is deleted or written: a malformed document
        # leaves the user's data as it was (a fresh-user test found half an import written)
        prepared = []
        for conversation in document.conversations:
            try:
                prepared.append(transfer.prepare_turns(conversation.turns))
            except ValueError as exc:
                raise MemoryInputError(f"conversation {conversation.id!r}: {exc}") from exc
        if fresh and taken:
            await self._refuse_earlier_writes(
                keys, conversations, whole_user=not document.conversation
            )
        for conversation_keys in conversations:
            await transfer.delete_conversation(self.redis, conversation_keys)
        restored = [
            (m, d) for m, d in zip(sets, document.memory_sets, strict=True) if m.scope not in kept
        ]
        for memory, _ in restored:
            await self._delete((*memory.all(), memory.history))
        store = MemoryStore.for_settings(self.redis, self.settings)
        for memory, memory_set in restored:
            await transfer.restore_memory_set(
                self.redis, memory, memory_set_dump(memory_set), ttl_s=store.ttl_s
            )
            await self._index(keys, memory.scope)
        total = sum(len(c.turns) for c in document.conversations)
        done = 0
        for conversation_keys, conversation, turns in zip(
            conversations, document.conversations, prepared, strict=True
        ):
            dump = conversation_dump(conversation, tenant=tenant, user=user_id)
            scope = conversation.memory_set or conversation_keys.index_member
            base = done

            def step(written: int, base: int = base) -> None:
                if progress is not None:
                    progress(base + written, total)

            try:
                done += await transfer.restore_conversation(
                    store,
                    conversation_keys,
                    dump,
                    memory_scope=scope,
                    progress=step,
                    prepared=turns,
                )
            except ValueError as exc:
                raise MemoryInputError(f"conversation {conversation.id!r}: {exc}") from exc
        if progress is not None:
            progress(done, total)
        return ImportExportResult(
            conversations=len(conversations),
            turns=done,
            memory_sets=len(restored),
            memories=sum(len(d.pinned) + len(d.memories) for _, d in restored),
        )

    async def _refuse_earlier_writes(
        self, keys: UserKeys, conversations: Sequence[ConversationKeys], *, whole_user: bool
    ) -> None:
        """Before a fresh import replaces data: writes read before it (a regenerate replacing
        "its" seq, an extraction commit) do not land in what is imported, as after a forget of
        the user (a whole export) or of the document's conversations."""
        ttl_s = forget_token_ttl_s(self.settings.write_buffer.max_age_s)
        scopes: list[ConversationKeys | None] = [None] if whole_user else list(conversations)
        for scope in scopes:
            await refuse_earlier_writes(self.redis, keys, scope, ttl_s=ttl_s)

    async def _delete(self, names: tuple[str, ...]) -> None:
        try:
            await self.redis.delete(*names)
        except RedisError as exc:
            raise StoreError(f"delete: {exc}") from exc

    async def _index(self, keys: UserKeys, member: str) -> None:
        try:
            async with self.redis.pipeline(transaction=False) as pipe:
                pipe.sadd(keys.index, member)
                pipe.expire(keys.index, self.settings.storage.retention_s)
                await pipe.execute()
        except RedisError as exc:
            raise StoreError(f"user index {keys.index}: {exc}") from exc


__all__ = ["ForgetExportAPI", "ForgetResult", "ImportExportResult"]
