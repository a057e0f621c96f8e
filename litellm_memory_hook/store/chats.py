"""The user's conversations as a whole: the postings of a query in their other conversations
(``recall.scope: user``), the pruning of their index, and the forget of everything they have.

A user's index set (:attr:`~litellm_memory_hook.store.keys.UserKeys.index`) lists their
conversations (``c:<conversation>``) and memory sets (``ns:<namespace>``, ...); it is how these
find a user's keys, never ``KEYS``. A conversation whose keys expired leaves its member behind
until a read finds it gone and prunes it (``store/lua/prune_chats.lua``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from redis.exceptions import RedisError

from litellm_memory_hook.errors import StoreError
from litellm_memory_hook.store import scripts
from litellm_memory_hook.store.codec import Postings, add_postings, as_int, as_text, date_seqs
from litellm_memory_hook.store.keys import ConversationKeys, UserKeys, due_key
from litellm_memory_hook.store.reads import ConversationReads

logger = logging.getLogger("litellm_memory_hook")

#: meta fields read of each of the user's other conversations (``recall.scope: user``).
CHAT_META_FIELDS = ("updated_ms", "namespace", "conversation", "idx_n")

#: most conversations one ``prune_chats.lua`` call looks at (a short script).
PRUNE_BATCH = 200


@dataclass
class ChatPostings:
    """The index entries of one of the user's other conversations, read for a query.

    Attributes:
        keys: the conversation.
        meta: its ``CHAT_META_FIELDS`` (``conversation`` is the raw id, for the chat's label).
        postings: its postings of the query's terms, N and date spans.
    """

    keys: ConversationKeys
    meta: dict[str, str]
    postings: Postings


def _meta_of(reply: Sequence[Any]) -> dict[str, str]:
    return {name: as_text(v) for name, v in zip(CHAT_META_FIELDS, reply, strict=True) if v}


class UserChats(ConversationReads):
    """Reads and deletes across a user's conversations (a part of
    :class:`~litellm_memory_hook.store.redis_store.MemoryStore`)."""

    _prune_chats = scripts.Registered("prune_chats")

    async def load_chats(
        self,
        user: UserKeys,
        members: Sequence[str],
        *,
        query_terms: Sequence[str],
        date_spans: Sequence[tuple[int, int]] = (),
        max_chats: int,
        accept: Callable[[dict[str, str]], bool] | None = None,
    ) -> list[ChatPostings]:
        """The postings of a query's terms in the user's other conversations (``recall.scope:
        user``): only those terms' postings are read, so the cost does not grow with the
        conversations' length; at most ``max_chats`` conversations, the most recently updated.

        One round trip when the user has at most ``max_chats`` other conversations, else two
        (their ``updated_ms`` first). Every key is in the user's slot.

        Args:
            user: the user's keys.
            members: index members of the other conversations (``c:<conversation>``).
            query_terms: the query's terms.
            date_spans: dates the query names (see :meth:`load`).
            max_chats: most conversations read.
            accept: which conversations may be recalled, given their meta (the same alias
                namespace); ``None`` takes all.

        Returns:
            The conversations read and accepted, most recently updated first.

        Raises:
            StoreError: Redis failed.
        """
        chats = [user.conversation(m.removeprefix("c:")) for m in members if m.startswith("c:")]
        if not chats or max_chats <= 0 or not query_terms:
            return []
        dead: list[ConversationKeys] = []
        try:
            if len(chats) > max_chats:
                chats, dead = await self._most_recent(chats, max_chats, accept)

            def build(pipe: Any) -> None:
                for chat in chats:
                    pipe.hmget(chat.meta, list(CHAT_META_FIELDS))
                    pipe.hmget(chat.postings, list(query_terms))

            calls = self._span_calls(chats, date_spans)
            replies, spans = await scripts.run_pipeline(self.redis, build, calls)
        except RedisError as exc:
            raise StoreError(f"load chats of {user.hash_tag}: {exc}") from exc
        out: list[ChatPostings] = []
        for number, chat in enumerate(chats):
            meta = _meta_of(replies[number * 2])
            if not meta:
                dead.append(chat)
            if not meta.get("idx_n") or (accept is not None and not accept(meta)):
                continue
            postings = Postings(n_docs=as_int(meta.get("idx_n")))
            add_postings(postings, query_terms, replies[number * 2 + 1])
            if date_spans:
                postings.spans = date_seqs(spans[number])
            out.append(ChatPostings(chat, meta, postings))
        out.sort(key=lambda c: as_int(c.meta.get("updated_ms")), reverse=True)
        if dead:
            await self.prune_chats(user, dead)
        return out

    async def _most_recent(
        self,
        chats: Sequence[ConversationKeys],
        max_chats: int,
        accept: Callable[[dict[str, str]], bool] | None,
    ) -> tuple[list[ConversationKeys], list[ConversationKeys]]:
        """The ``max_chats`` most recently updated of ``chats`` that ``accept`` takes, and those
        whose meta is gone (one round trip).

        Raises:
            RedisError: Redis failed.
        """
        async with self.redis.pipeline(transaction=False) as pipe:
            for chat in chats:
                pipe.hmget(chat.meta, list(CHAT_META_FIELDS))
            metas = [_meta_of(r) for r in await pipe.execute()]
        dead = [chat for chat, meta in zip(chats, metas, strict=True) if not meta]
        ranked = sorted(
            (
                m
                for m in zip(chats, metas, strict=True)
                if m[1] and (accept is None or accept(m[1]))
            ),
            key=lambda m: as_int(m[1].get("updated_ms")),
            reverse=True,
        )
        return [chat for chat, _ in ranked[:max_chats]], dead

    async def prune_chats(self, user: UserKeys, chats: Sequence[ConversationKeys]) -> int:
        """Take these conversations out of the user's index where they no longer exist (none of
        their keys, their conversation-scoped memory set's included, is left:
        ``prune_chats.lua`` checks in Redis), in scripts of at most :data:`PRUNE_BATCH`. Best
        effort: a Redis error is logged and ignored (the next read tries again).

        Returns:
            How many members went.
        """
        gone = 0
        for start in range(0, len(chats), PRUNE_BATCH):
            batch = chats[start : start + PRUNE_BATCH]
            names = [user.index]
            args: list[Any] = []
            for chat in batch:
                own = user.keys_of(chat.index_member)
                names.extend(own)
                args.extend((chat.index_member, len(own)))
            try:
                gone += int(await self._prune_chats(keys=names, args=args))
            except RedisError as exc:
                logger.warning("prune the index of %s: %s", user.hash_tag, exc)
                break
        return gone

    async def forget_user(self, user: UserKeys) -> int:
        """Delete every key of a user (conversations, memory sets, the index) through the user's
        index, never KEYS, and remove the user's conversations from the due set.

        Returns:
            How many keys were deleted.

        Raises:
            StoreError: Redis failed (run it again: it only deletes).
        """
        try:
            members = [as_text(m) for m in await self.redis.smembers(user.index)]
            names = [name for member in members for name in user.keys_of(member)]
            refs = [
                f"{user.tenant}:{user.user}:{m.removeprefix('c:')}"
                for m in members
                if m.startswith("c:")
            ]
            deleted = 0
            for start in range(0, len(names), 500):
                deleted += int(await self.redis.delete(*names[start : start + 500]))
            deleted += int(await self.redis.delete(user.index))
            if refs:
                await self.redis.zrem(due_key(user.prefix), *refs)
        except RedisError as exc:
            raise StoreError(f"forget {user.hash_tag}: {exc}") from exc
        return deleted
