"""Reads of one conversation: what a request needs in one round trip, turns by seq, the last
question before a seq, and small counts.

Every key a read names is in the user's slot, so each is one round trip on a Redis Cluster too.
The request's read (:meth:`ConversationReads.load`) is one script, ``store/lua/load_state.lua``,
plus one ``seq_spans.lua`` call per conversation in the same pipeline when the message names
dates.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from redis.exceptions import RedisError

from litellm_memory_hook.core.models import ConversationState, Turn
from litellm_memory_hook.errors import StoreError
from litellm_memory_hook.store import scripts
from litellm_memory_hook.store.base import StoreBase
from litellm_memory_hook.store.codec import (
    Postings,
    add_postings,
    as_text,
    date_seqs,
    flat_spans,
    in_field_order,
    pairs,
)
from litellm_memory_hook.store.forgets import token_of
from litellm_memory_hook.store.keys import ConversationKeys, MemoryKeys

#: most ARGV one ``unpack`` hands to a command inside ``load_state.lua`` (Lua 5.1's C stack
#: holds 8,000): a longer query reads its postings in slices of this many terms. The script
#: has the number written in it; tests/integration/test_lua_scripts.py holds the two equal.
LOAD_TERMS_PER_CALL = 1000

#: most stored turns ``last_question.lua`` looks at, newest first: an agent's task ~170 tool
#: steps (call, result, reply) back is still found. Measured on this project's machine with
#: 200-character turns: 0.48 ms of Redis time for a scan of 500 that finds nothing, 1.4 ms at
#: 1,000 (``SLOWLOG``); it runs only for a tool step whose stored tail holds no user message.
QUESTION_SCAN_TURNS = 500
#: most bytes of turns ``last_question.lua`` looks at: an agent's tool turns are up to ~64 KB
#: each as stored, and the script's time grows with the bytes it copies (about 2-3 ms a MB
#: here): the question of a task whose steps are that large is found ~15 large steps back.
QUESTION_SCAN_BYTES = 1_000_000


class ConversationReads(StoreBase):
    """Reads of one conversation (a part of
    :class:`~litellm_memory_hook.store.redis_store.MemoryStore`). Every method raises
    :class:`StoreError` (wrapping the Redis error) on failure."""

    _load_state = scripts.Registered("load_state")
    _spans = scripts.Registered("seq_spans")
    _fetch = scripts.Registered("fetch_turns")
    _last_question = scripts.Registered("last_question")

    def _span_calls(
        self, chats: Sequence[ConversationKeys], date_spans: Sequence[tuple[int, int]]
    ) -> list[scripts.ScriptCall]:
        """One ``seq_spans.lua`` call per conversation for :func:`scripts.run_pipeline` (its
        turns, time index and meta; ARGV: the postings cap, then each span's start and end, ms);
        none when no date is asked."""
        if not date_spans:
            return []
        args = [self.postings_cap, *flat_spans(date_spans)]
        return [(self._spans, (chat.turns, chat.times, chat.meta), args) for chat in chats]

    async def load(
        self,
        keys: ConversationKeys,
        memory: MemoryKeys,
        *,
        tail: int,
        query_terms: Sequence[str] = (),
        date_spans: Sequence[tuple[int, int]] = (),
        list_chats: bool = False,
    ) -> tuple[ConversationState, Postings]:
        """Read what a request needs in one round trip (every key is in the user's slot).

        Args:
            keys: the conversation.
            memory: the memory set the conversation uses (its pinned and extracted memories).
            tail: how many of the newest turns to read.
            query_terms: recall terms of the new message; their postings are read too.
            date_spans: ``(start ms, end ms)`` of dates the message names; the seqs of the
                turns said in each are found (``seq_spans.lua``: by a binary search over the
                turns' times, O(log n) per span, while they are in seq order or the
                conversation has no usable time index; else by the time index, whatever order
                the times are stored in: a binary search in each run of rising times, or
                O(log n + postings_cap) with an entry for every turn).
            list_chats: also read the user's index (their other conversations).

        Returns:
            The state (meta, newest turns oldest first, pinned, memories, the forget token)
            and the postings.
        """

        # one script reads it all (a pipeline of six commands cost redis-py twice the CPU);
        # the forget tokens are read first: a forget after them is seen by the write
        names = [
            keys.user_keys.forgets,
            keys.meta,
            keys.turns,
            memory.pinned,
            memory.memories,
            keys.postings,
            keys.user_keys.index,
        ]
        args: list[Any] = [tail, 1 if list_chats else 0, *keys.forget_fields, *query_terms]
        spans: list[Any] = []
        try:
            if date_spans:
                calls = [(self._load_state, names, args), *self._span_calls([keys], date_spans)]
                _, (reply, *spans) = await scripts.run_pipeline(
                    self.redis, scripts.no_commands, calls
                )
            else:
                reply = await self._load_state(keys=names, args=args)
        except RedisError as exc:
            raise StoreError(f"load {keys.ref}: {exc}") from exc
        forgets, meta_items, members, pinned, memories, values, chats = reply
        meta = {as_text(k): as_text(v) for k, v in pairs(meta_items).items()}
        turns: list[Turn] = []
        for member in members:
            try:
                turns.append(Turn.from_member(member))
            except ValueError:
                continue
        state = ConversationState(
            meta=meta,
            tail=turns,
            pinned=in_field_order(pairs(pinned)),
            memories=in_field_order(pairs(memories)),
            forget_token=token_of(forgets),
        )
        postings = Postings(n_docs=int(meta.get("idx_n", "0") or 0))
        if query_terms:
            add_postings(postings, query_terms, values)
        if list_chats:
            postings.chats = sorted(as_text(m) for m in chats)
        if date_spans:
            postings.spans = date_seqs(spans[0])
        return state, postings

    async def fetch_many(
        self, groups: Sequence[tuple[ConversationKeys, Sequence[int]]]
    ) -> list[list[Turn]]:
        """The turns with these seqs in several conversations of one user, in one round trip.

        Returns:
            For each group, its turns in seq order (missing ones skipped).

        Raises:
            StoreError: Redis failed.
        """
        wanted = [(keys, sorted(set(seqs))) for keys, seqs in groups]
        if not any(seqs for _, seqs in wanted):
            return [[] for _ in wanted]

        def build(pipe: Any) -> None:
            for keys, seqs in wanted:
                for seq in seqs:
                    pipe.zrange(keys.turns, seq, seq, byscore=True)

        try:
            replies, _ = await scripts.run_pipeline(self.redis, build)
        except RedisError as exc:
            raise StoreError(f"fetch turns: {exc}") from exc
        found = iter(replies)
        return [[Turn.from_member(m) for _ in seqs for m in next(found)[:1]] for _, seqs in wanted]

    async def fetch_turns(self, keys: ConversationKeys, seqs: Iterable[int]) -> list[Turn]:
        """The turns with these seqs, in seq order (missing ones skipped)."""
        wanted = sorted(set(seqs))
        if not wanted:
            return []
        try:
            members = await self._fetch(keys=[keys.turns], args=wanted)
        except RedisError as exc:
            raise StoreError(f"fetch turns {keys.ref}: {exc}") from exc
        return [Turn.from_member(m) for m in members]

    async def last_question(self, keys: ConversationKeys, before_seq: int) -> Turn | None:
        """The newest stored user turn with a seq below ``before_seq`` (``last_question.lua``,
        at most ``QUESTION_SCAN_TURNS`` turns and ``QUESTION_SCAN_BYTES`` looked at); ``None``
        when there is none within them.

        Raises:
            StoreError: Redis failed.
        """
        try:
            member = await self._last_question(
                keys=[keys.turns], args=[before_seq, QUESTION_SCAN_TURNS, QUESTION_SCAN_BYTES]
            )
        except RedisError as exc:
            raise StoreError(f"read the last question of {keys.ref}: {exc}") from exc
        if not member:
            return None
        try:
            return Turn.from_member(member)
        except ValueError:
            return None

    async def cursor(self, keys: ConversationKeys) -> int:
        """The seq the conversation's extraction has reached (0 when none yet)."""
        try:
            return int(await self.redis.hget(keys.meta, "cursor") or 0)
        except RedisError as exc:
            raise StoreError(f"cursor {keys.ref}: {exc}") from exc

    async def count_turns(self, keys: ConversationKeys) -> int:
        """Number of stored turns."""
        try:
            return int(await self.redis.zcard(keys.turns))
        except RedisError as exc:
            raise StoreError(f"count {keys.ref}: {exc}") from exc

    async def all_turns(self, keys: ConversationKeys) -> list[Turn]:
        """Every stored turn, oldest first (for the CLI and tests; not on the request path)."""
        try:
            members = await self.redis.zrange(keys.turns, 0, -1)
        except RedisError as exc:
            raise StoreError(f"read {keys.ref}: {exc}") from exc
        return [Turn.from_member(m) for m in members if isinstance(m, bytes | str)]
