"""Writes of one conversation: append turns (one script, or bounded batches), delete turns, and
list the conversation in the user's index.

Every write is a Lua script on the keys of one user (one Cluster slot), idempotent on the
request's ``litellm_call_id``, and refused when a forget came after the request's read
(:mod:`litellm_memory_hook.store.forgets`). A request's own write is one atomic script
(``store/lua/append_turns.lua``); a larger write (a long history seeding a new conversation, an
import) runs as ``begin_write.lua`` and batches of ``write_turns.lua``, at most ``batch_turns``
turns and ``batch_terms`` index terms each, a few ms each (issue 9 item 7). Every turn is held to
the bounds of :mod:`litellm_memory_hook.core.bounds` before it is stored.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from redis.exceptions import RedisError

from litellm_memory_hook.core.bounds import bound_id, bound_meta_value, bound_turn
from litellm_memory_hook.core.indexing import stored_terms
from litellm_memory_hook.core.models import IndexedTurn
from litellm_memory_hook.errors import StoreError
from litellm_memory_hook.slices import map_sliced
from litellm_memory_hook.store import scripts
from litellm_memory_hook.store.base import StoreBase
from litellm_memory_hook.store.codec import removal_args, term_args
from litellm_memory_hook.store.keys import ConversationKeys, MemoryKeys

#: meta field prefix of a batched write under way (``begin_write.lua``): ``writing:<call id>``.
PROGRESS_PREFIX = "writing:"


def write_progress_ms(meta: Mapping[str, str]) -> list[int]:
    """When each batched write under way in a conversation last made progress (epoch ms), from
    its meta: the time its ``writing:`` field holds (``begin_write.lua``), else (a value written
    before the time was kept) the conversation's ``updated_ms``. Empty when none is under way."""
    out = []
    for name, value in meta.items():
        if name.startswith(PROGRESS_PREFIX):
            parts = value.split()
            at = parts[3] if len(parts) >= 4 else meta.get("updated_ms", "0")
            out.append(int(at) if at.isdigit() else 0)
    return out


@dataclass(frozen=True)
class AppendResult:
    """What an append did: ``written`` False means the call id was already stored, or (with
    ``forgotten``) a forget came in between.

    ``cursor`` is the conversation's extraction cursor (meta ``cursor``) as the append found it
    when one script did the write; ``None`` after a batched write (read it with
    :meth:`~litellm_memory_hook.store.reads.ConversationReads.cursor` if needed).
    """

    written: bool
    first_seq: int
    last_seq: int
    cursor: int | None = None
    #: nothing was written because a forget of the user or conversation came after the
    #: request's read (:mod:`litellm_memory_hook.store.forgets`)
    forgotten: bool = False
    #: the conversation's meta hash was gone beside stored turns (evicted): the seqs went on
    #: from the newest stored turn (``store/lua/includes/restore_meta.lua``); the extraction
    #: cursor came back from its copy in the calls hash
    meta_restored: bool = False
    #: with ``meta_restored``: the cursor had no copy (the calls hash went too) and was set to
    #: the newest stored seq, so no job extracts the whole history again
    cursor_guessed: bool = False


def now_ms() -> int:
    """Wall-clock time in epoch milliseconds."""
    return int(time.time() * 1000)


class ConversationWrites(StoreBase):
    """Writes of one conversation (a part of
    :class:`~litellm_memory_hook.store.redis_store.MemoryStore`). Every method raises
    :class:`StoreError` (wrapping the Redis error) on failure."""

    _append = scripts.Registered("append_turns")
    _delete = scripts.Registered("delete_turns")
    _begin = scripts.Registered("begin_write")
    _write_batch = scripts.Registered("write_turns")

    async def append(
        self,
        keys: ConversationKeys,
        turns: Sequence[IndexedTurn],
        *,
        call_id: str = "",
        meta_if_new: dict[str, str] | None = None,
        replace: Sequence[IndexedTurn] = (),
        at_ms: int | None = None,
        seeded: int = 0,
        memory: MemoryKeys | None = None,
        forget_token: str = "",
    ) -> AppendResult:
        """Append turns, idempotent on ``call_id``: one Lua script, or bounded batches.

        Every turn is first held to :attr:`limits` (:func:`~litellm_memory_hook.core.bounds.
        bound_turn`; a turn that changes is re-indexed from what is stored); meta values are cut
        to :data:`~litellm_memory_hook.core.bounds.META_VALUE_CHARS`, a long ``call_id`` is
        hashed to 128 characters.

        A write of at most ``batch_turns`` turns and ``batch_terms`` distinct index terms
        (``replace`` included) is one atomic script: every request's own turn pair. A larger one
        (a long history seeding a new conversation, an import) deletes ``replace`` first (in
        batches), then runs a begin script that decides whether the seed is still wanted (the
        conversation is empty),
        reserves the seqs of every turn it writes and records its progress in the meta field
        ``writing:<call id>``, then batches of at most ``batch_turns`` turns, each a script that
        only runs where the previous one stopped. So the seed is written once under concurrent
        first requests (the reservation makes the conversation non-empty at once), turns other
        requests store meanwhile come after the reserved ones, and a retry with the same
        ``call_id`` after a failure part-way resumes where the write stopped. Until the last
        batch, readers may see the reserved seqs partly written.

        Args:
            keys: the conversation.
            turns: new turns, oldest first, with their index terms.
            call_id: ``litellm_call_id``; a second append with the same id writes nothing.
            meta_if_new: meta fields set only when absent (raw ids, namespace, created time).
            replace: stored turns to remove first (a regenerate's old reply): exactly these
                seqs, each only if still stored, leave the sorted set and the index; turns that
                other requests stored meanwhile are never touched.
            at_ms: ``updated_ms`` to record (default now).
            seeded: the first this-many ``turns`` are the client's own history seeding a new
                conversation; they are skipped when the conversation is no longer empty.
            memory: the conversation's memory set: when given, a write also does what
                :meth:`touch_user_index` does (the conversation and the set join the user's
                index; the index and the set get the TTL again), in the same script for a
                one-script write (one round trip for a request's turn pair), after the last
                batch otherwise. Nothing is touched when ``call_id`` was already stored.
            forget_token: the forget token the request's read found
                (:attr:`ConversationState.forget_token`): when a forget of the user or the
                conversation came since, nothing is written (``forgotten``); ``""`` checks
                nothing (a request that ran while Redis could not be read).

        Raises:
            StoreError: Redis failed (a batched write may be part-way: append again with the
                same ``call_id`` to finish it).
        """
        # a long history is bounded in slices: other requests run between them
        items = await map_sliced(self._bounded, turns)
        call_id = bound_id(call_id, self.limits.id_chars)
        at = at_ms if at_ms is not None else now_ms()
        meta_items = [(k, bound_meta_value(v)) for k, v in (meta_if_new or {}).items()]
        head: list[Any] = [len(meta_items)]
        for name, value in meta_items:
            head.extend((name, value))
        if not self._fits_one_script((*items, *replace)):
            # deleted first, in batches (deleting again on a retry changes nothing)
            if replace and await self.delete_turns(keys, replace, forget_token=forget_token) < 0:
                return AppendResult(False, 0, 0, forgotten=True)
            result = await self._append_batched(
                keys, items, call_id, [*head, *removal_args(())], at, seeded, forget_token
            )
            if result.written and memory is not None:
                await self.touch_user_index(keys, memory)
            return result
        head.extend(removal_args(replace))
        args: list[Any] = [
            call_id,
            self.ttl_s,
            at,
            self.postings_cap,
            keys.index_member,
            forget_token,
            secrets.token_hex(8),
            *head,
            seeded,
            len(items),
        ]
        for item in items:
            args.extend((item.turn.body_json(), 1 if item.terms else 0))
        args.extend(term_args(items))
        names = self._script_keys(keys)
        if memory is not None:
            names.extend((keys.user_keys.index, *memory.all()))
            args.extend((2, keys.index_member, memory.scope))
        try:
            reply = await self._append(keys=names, args=args)
        except Exception as exc:  # any failure of the client, not only a Redis reply
            raise StoreError(f"append {keys.ref}: {exc}") from exc
        written, first, last, cursor = (int(x) for x in reply[:4])
        if written < 0:
            return AppendResult(False, 0, 0, forgotten=True)
        restored = int(reply[4]) if len(reply) > 4 else 0
        return AppendResult(
            bool(written),
            first,
            last,
            cursor,
            meta_restored=restored >= 1,
            cursor_guessed=restored == 2,
        )

    def _bounded(self, item: IndexedTurn) -> IndexedTurn:
        """The turn within :attr:`limits`; re-indexed when bounding changed it (its name is
        indexed: the terms must be those :func:`stored_terms` gives for what is stored)."""
        turn = bound_turn(item.turn, self.limits)
        if turn is item.turn:
            return item
        return stored_terms(turn) if item.terms else IndexedTurn(turn)

    @staticmethod
    def _script_keys(keys: ConversationKeys) -> list[str]:
        """KEYS[1..6] of every write script: the conversation's meta, turns, calls and postings,
        the user's forgets hash (:mod:`litellm_memory_hook.store.forgets`), the conversation's
        time index."""
        return [
            keys.meta,
            keys.turns,
            keys.calls,
            keys.postings,
            keys.user_keys.forgets,
            keys.times,
        ]

    def _fits_one_script(self, items: Sequence[IndexedTurn]) -> bool:
        if len(items) > self.batch_turns:
            return False
        if sum(len(item.terms) for item in items) <= self.batch_terms:
            return True
        return len({t for item in items for t in item.terms}) <= self.batch_terms

    def _batches(self, items: Sequence[IndexedTurn], start: int) -> Iterator[tuple[int, int]]:
        """``(start, end)`` index ranges of at most ``batch_turns`` turns and ``batch_terms``
        distinct terms each (one index field read and written per distinct term; a turn with
        more terms than that goes alone)."""
        while start < len(items):
            end, terms = start, set[str]()
            while end < len(items) and end - start < self.batch_turns:
                grown = terms.union(items[end].terms)
                if len(grown) > self.batch_terms and end > start:
                    break
                terms = grown
                end += 1
            yield start, end
            start = end

    async def _append_batched(
        self,
        keys: ConversationKeys,
        items: Sequence[IndexedTurn],
        call_id: str,
        head: Sequence[Any],
        at: int,
        seeded: int,
        forget_token: str,
    ) -> AppendResult:
        progress = PROGRESS_PREFIX + (call_id or "t-" + secrets.token_hex(8))
        names = self._script_keys(keys)
        token = [keys.index_member, forget_token, secrets.token_hex(8)]
        try:
            begun = [
                int(x)
                for x in await self._begin(
                    keys=[*names, keys.user_keys.index],
                    args=[call_id, progress, self.ttl_s, at, *token, *head, seeded, len(items)],
                )
            ]
            status, first, last, skipped, start = begun[:5]
            restored = begun[5] if len(begun) > 5 else 0
            if status < 0:
                return AppendResult(False, 0, 0, forgotten=True)
            if status == 0:
                return AppendResult(False, first, last)
            todo = items[seeded:] if skipped else items
            if last == 0:
                return AppendResult(
                    True, 0, 0, meta_restored=restored >= 1, cursor_guessed=restored == 2
                )
            for begin, end in self._batches(todo, start):
                args: list[Any] = [
                    progress,
                    self.ttl_s,
                    at,
                    self.postings_cap,
                    begin,
                    end,
                    1 if end == len(todo) else 0,
                ]
                args.extend((keys.index_member, forget_token, end - begin))
                for offset in range(begin, end):
                    item = todo[offset]
                    args.extend((first + offset, item.turn.body_json(), 1 if item.terms else 0))
                args.extend(term_args(todo[begin:end]))
                done = int(await self._write_batch(keys=names, args=args))
                if done < 0:
                    return AppendResult(False, 0, 0, forgotten=True)
                if not done:
                    # Another run of this call id went on (or the conversation was deleted).
                    return AppendResult(False, first, last)
        except Exception as exc:  # any failure of the client, not only a Redis reply
            raise StoreError(f"append {keys.ref}: {exc}") from exc
        return AppendResult(
            True, first, last, meta_restored=restored >= 1, cursor_guessed=restored == 2
        )

    async def delete_turns(
        self, keys: ConversationKeys, turns: Sequence[IndexedTurn], *, forget_token: str = ""
    ) -> int:
        """Delete stored turns by seq and their recall-index entries, in scripts of at most
        ``batch_turns`` turns and ``batch_terms`` terms (each batch atomic).

        Each turn leaves the ``turns`` sorted set; each of its terms gets ``df - 1`` (the field is
        deleted when that reaches 0) and loses the turn's seq from its postings list when the seq
        is there; ``meta.idx_n`` drops by one for each indexed turn (one with terms). Seqs that are
        not stored (0, never written, already deleted) are skipped, so a repeated call changes
        nothing. The ``calls`` hash is left alone. Every key of the conversation gets the
        retention TTL again, in the same script, so they still expire together.

        Guarantee (``turns`` must carry the terms they were appended with, which
        :func:`litellm_memory_hook.core.indexing.stored_terms` gives for any stored turn): the
        document frequencies and ``idx_n`` are exactly those of an index built from the turns
        that remain. A term's postings list holds the newest ``m`` remaining turns that contain
        it, ascending, with no gap and no deleted seq, for some ``m <= min(postings_cap, df)``;
        ``m = min(postings_cap, df)`` (the list a fresh index of the remaining turns would hold)
        whenever the cap never dropped a posting of the term. Otherwise the list can be shorter:
        seqs the cap dropped earlier are not brought back (they are no longer stored), so after
        adding all turns and deleting some, the list is the newest ``postings_cap`` postings
        before the deletion minus the deleted seqs. Recall then misses only old matches of a
        term that is common enough to have been capped.

        Args:
            keys: the conversation.
            turns: stored turns (``turn.seq`` > 0) with their index terms; repeats of a seq count
                once.
            forget_token: the forget token of the read that chose these turns (``""``: a delete
                asked for now, not checked).

        Returns:
            How many turns were removed (stored turns among ``turns``); -1 when a forget came
            after that read (nothing removed: seqs start again after a forget).

        Raises:
            StoreError: Redis failed (batches before the failing one stay done; calling again
                finishes the job, as deleting is idempotent).
        """
        seen: set[int] = set()
        unique: list[IndexedTurn] = []
        for item in turns:
            seq = item.turn.seq
            if seq <= 0 or seq in seen:
                continue
            seen.add(seq)
            unique.append(item)
        removed = 0
        names = self._script_keys(keys)
        for start, end in self._batches(unique, 0):
            args: list[Any] = [
                self.ttl_s,
                keys.index_member,
                forget_token,
                *removal_args(unique[start:end]),
            ]
            try:
                done = int(await self._delete(keys=names, args=args))
            except RedisError as exc:
                raise StoreError(f"delete turns {keys.ref}: {exc}") from exc
            if done < 0:
                return -1
            removed += done
        return removed

    async def touch_user_index(self, keys: ConversationKeys, memory: MemoryKeys) -> None:
        """Add the conversation and its memory set to the user's index, and give the index and
        the memory set's keys the retention TTL again (one round trip, the user's slot).

        A user who keeps talking keeps their memories: every stored turn refreshes them.
        """
        user = keys.user_keys
        try:
            async with self.redis.pipeline(transaction=False) as pipe:
                pipe.sadd(user.index, keys.index_member, memory.scope)
                for key in (user.index, *memory.all()):
                    pipe.expire(key, self.ttl_s)
                await pipe.execute()
        except RedisError as exc:
            raise StoreError(f"user index {user.index}: {exc}") from exc
