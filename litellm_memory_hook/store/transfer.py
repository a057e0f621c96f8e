"""Reading, deleting and restoring a user's keys through the user's index (export, forget,
import of an export). Never ``KEYS`` or ``SCAN``.

The user's index set ``mem:{t:u}:index`` names every conversation (``c:<c>``) and memory set
(``ns:<namespace>``) of the user; :meth:`UserKeys.keys_of` gives every key of a member. A dump
holds what a user's data is, not how it is indexed: the recall postings, ``meta.idx_n`` and
extraction leases are left out and rebuilt (postings, ``idx_n``) when a dump is restored.

Restoring keeps every stored value: turns keep their seqs and their exact JSON members (they are
appended through :meth:`MemoryStore.append` in runs of consecutive seqs, so the recall index is
built by the same script as for live traffic), memory items keep their ids, the summary, cursor,
meta fields, the ``calls`` hash, tombstones, the memory set's version and the due time are
written back as read.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

import orjson
import redis.asyncio as aioredis
from redis.exceptions import RedisError
from redis.typing import EncodableT

from litellm_memory_hook.core.indexing import stored_terms
from litellm_memory_hook.core.models import (
    IndexedTurn,
    Turn,
    compact_body,
    full_member,
    stored_text,
    text_in_msg,
)
from litellm_memory_hook.errors import StoreError
from litellm_memory_hook.store import scripts
from litellm_memory_hook.store.keys import (
    CURSOR_COPY_FIELD,
    ConversationKeys,
    MemoryKeys,
    UserKeys,
    due_key,
)
from litellm_memory_hook.store.redis_store import MAX_SEQ, MemoryStore

#: turns read per round trip, and appended per script call, when dumping and restoring.
CHUNK_TURNS = 250
#: meta fields that are an index's bookkeeping, not data: rebuilt on restore (``truns``: the
#: time index's form, store/lua/includes/time_index.lua).
DERIVED_META = frozenset({"idx_n", "truns"})

Progress = Callable[[int], None]


def _fields(values: dict[str, str] | dict[str, int]) -> dict[EncodableT, EncodableT]:
    """A hash mapping typed for redis-py's ``hset``."""
    return {name: value for name, value in values.items()}


def _text(value: bytes | str) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def _hash(flat: Sequence[bytes | str]) -> dict[str, str]:
    """A script's HGETALL reply (fields and values, alternating) as a dict, sorted by field."""
    return dict(sorted(zip(map(_text, flat[::2]), map(_text, flat[1::2]), strict=True)))


@dataclass
class MemorySetDump:
    """A memory set as stored: items by id (creation-ordered), tombstones, version."""

    scope: str
    pinned: dict[str, str] = field(default_factory=dict)
    memories: dict[str, str] = field(default_factory=dict)
    tombs: dict[str, int] = field(default_factory=dict)
    version: int = 0

    @property
    def empty(self) -> bool:
        """Nothing stored (no items, no tombstones, version 0)."""
        return not (self.pinned or self.memories or self.tombs or self.version)


@dataclass
class ConversationDump:
    """A conversation as stored.

    Attributes:
        key: the conversation id in key form (``c:<key>`` in the index).
        meta: the meta hash without :data:`DERIVED_META` (raw ids, alias, summary, cursor, seq,
            timestamps ...).
        turns: the stored turns, oldest first, each the JSON object of its member (with
            ``seq``).
        calls: ``litellm_call_id`` -> seq (idempotent writes).
        due_ms: its due time for extraction (epoch ms), or ``None``.
    """

    key: str
    meta: dict[str, str] = field(default_factory=dict)
    turns: list[dict[str, Any]] = field(default_factory=list)
    calls: dict[str, int] = field(default_factory=dict)
    due_ms: int | None = None

    @property
    def empty(self) -> bool:
        """No meta and no turns: nothing is stored under this conversation."""
        return not self.meta and not self.turns


async def index_members(redis: aioredis.Redis, user: UserKeys) -> list[str]:
    """The members of the user's index, sorted (``c:<c>`` and ``ns:<namespace>``)."""
    try:
        return sorted(_text(m) for m in await redis.smembers(user.index))
    except RedisError as exc:
        raise StoreError(f"read {user.index}: {exc}") from exc


async def read_memory_set(redis: aioredis.Redis, memory: MemoryKeys) -> MemorySetDump:
    """Every item, tombstone and the version of a memory set, read at one point in time
    (``store/lua/read_memory_set.lua``, one round trip; it also answers while Redis refuses writes).

    Raises:
        StoreError: Redis failed.
    """
    script = scripts.register(redis, "read_memory_set")
    try:
        pinned, memories, tombs, version = await script(keys=list(memory.all()))
    except RedisError as exc:
        raise StoreError(f"read memories {memory.scope}: {exc}") from exc
    return MemorySetDump(
        scope=memory.scope,
        pinned=_hash(pinned),
        memories=_hash(memories),
        tombs={k: int(v) for k, v in _hash(tombs).items()},
        version=int(version or 0),
    )


async def read_conversation(
    redis: aioredis.Redis, keys: ConversationKeys, progress: Progress | None = None
) -> ConversationDump:
    """A conversation's meta, turns (read in chunks by seq, so concurrent trims cannot shift
    them), calls and due time. ``progress`` is called with the number of turns read so far.
    Only reads: it also answers while Redis refuses writes (meta and calls are read together
    by ``store/lua/read_conversation_meta.lua``, not in a MULTI, whose commands Redis then refuses).

    Raises:
        StoreError: Redis failed, or a stored turn is not JSON.
    """
    dump = ConversationDump(keys.conversation)
    script = scripts.register(redis, "read_conversation_meta")
    try:
        meta, calls = await script(keys=[keys.meta, keys.calls])
        due = await redis.zscore(due_key(keys.prefix), keys.ref)  # a global key: on its own
        last = 0
        while True:
            members = await redis.zrangebyscore(
                keys.turns, f"({last}", "+inf", start=0, num=CHUNK_TURNS
            )
            if not members:
                break
            for member in members:
                turn = orjson.loads(member if isinstance(member, bytes | str) else b"")
                if isinstance(turn, dict):
                    turn = full_member(turn)  # an export shows the full form, whatever stored
                    turn["text"] = stored_text(turn)  # the export has it on every turn
                    dump.turns.append(turn)
                    last = max(last, int(turn.get("seq") or 0))
            if progress is not None:
                progress(len(dump.turns))
            if len(members) < CHUNK_TURNS:
                break
    except RedisError as exc:
        raise StoreError(f"read {keys.ref}: {exc}") from exc
    except orjson.JSONDecodeError as exc:
        raise StoreError(f"read {keys.ref}: a stored turn is not JSON: {exc}") from exc
    dump.meta = _hash(meta)
    for name in DERIVED_META:
        dump.meta.pop(name, None)
    # the cursor's copy is not a call: an import writes it again from the meta's cursor
    dump.calls = {k: int(v) for k, v in _hash(calls).items() if k != CURSOR_COPY_FIELD}
    dump.due_ms = None if due is None else int(due)
    return dump


async def delete_conversation(redis: aioredis.Redis, keys: ConversationKeys) -> int:
    """Delete every key of a conversation (its own memory set included, for
    ``memory_scope: conversation``), its index entry and its due entry.

    Returns:
        How many keys were deleted.
    """
    user = keys.user_keys
    member = keys.index_member
    try:
        deleted = int(await redis.delete(*user.keys_of(member)))
        await redis.srem(user.index, member)
        await redis.zrem(due_key(keys.prefix), keys.ref)
    except RedisError as exc:
        raise StoreError(f"forget {keys.ref}: {exc}") from exc
    return deleted


async def drop_due_refs(redis: aioredis.Redis, user: UserKeys) -> int:
    """Remove every due entry of the user (``t:u:*``, found with ZSCAN of the due set, which
    holds only waiting conversations), also those of conversations missing from the index.

    Returns:
        How many entries were removed.
    """
    due = due_key(user.prefix)
    try:
        refs = [ref async for ref, _ in redis.zscan_iter(due, match=f"{user.tenant}:{user.user}:*")]
        return int(await redis.zrem(due, *refs)) if refs else 0
    except RedisError as exc:
        raise StoreError(f"forget {user.hash_tag} in {due}: {exc}") from exc


async def has_data(redis: aioredis.Redis, keys: Iterable[str]) -> bool:
    """Whether any of these keys exists."""
    names = list(keys)
    if not names:
        return False
    try:
        return int(await redis.exists(*names)) > 0
    except RedisError as exc:
        raise StoreError(f"read: {exc}") from exc


async def restore_memory_set(
    redis: aioredis.Redis, memory: MemoryKeys, dump: MemorySetDump, *, ttl_s: int
) -> None:
    """Write a memory set's items, tombstones and version (added to what is there), with the
    retention TTL, in one transaction."""
    try:
        async with redis.pipeline(transaction=True) as pipe:
            if dump.pinned:
                pipe.hset(memory.pinned, mapping=_fields(dump.pinned))
            if dump.memories:
                pipe.hset(memory.memories, mapping=_fields(dump.memories))
            if dump.tombs:
                pipe.hset(memory.tombs, mapping=_fields(dump.tombs))
            pipe.hset(memory.state, "version", dump.version)
            for key in memory.all():
                pipe.expire(key, ttl_s)
            await pipe.execute()
    except RedisError as exc:
        raise StoreError(f"restore memories {memory.scope}: {exc}") from exc


#: most characters that fields of a turn this version does not know (written by a newer one)
#: may add to it when an import writes it back exactly; a turn with more is written from the
#: fields this version knows (the limit of one other stored field, ``MAX_FIELD_CHARS``).
UNKNOWN_FIELDS_CHARS = 8000


@dataclass(frozen=True)
class _StoredTurn(Turn):
    """A turn that writes back exactly the JSON body it was read with (every field, also those
    this version of :class:`Turn` does not know), unless bounding changed it: ``body`` is a
    ``derived`` field (:func:`~litellm_memory_hook.core.bounds.bound_turn` resets it, never cuts
    it), and the turn is then written from its bounded fields."""

    body: str = field(default="", metadata={"derived": True})

    def body_json(self) -> str:
        """The stored JSON object without ``seq`` and its opening brace."""
        return self.body or super().body_json()


def stored_turn(data: dict[str, Any]) -> IndexedTurn:
    """A dumped turn (its member's JSON object) ready to append again, with the index terms
    it was stored under.

    Raises:
        ValueError: not a stored turn (no role, no positive seq, or a seq over
            :data:`~litellm_memory_hook.store.redis_store.MAX_SEQ`).
    """
    seq = data.get("seq")
    if isinstance(seq, bool) or not isinstance(seq, int) or seq < 1:
        raise ValueError(f"turn without a positive integer 'seq': {str(data)[:80]}")
    if seq > MAX_SEQ:
        raise ValueError(f"turn 'seq' {seq} is over {MAX_SEQ} (the recall index's limit)")
    rest = {k: v for k, v in data.items() if k != "seq"}
    if text_in_msg(rest.get("text"), rest.get("msg")):
        del rest["text"]  # stored once, as Turn.body_json stores it (an export carries it)
    body = orjson.dumps(rest).decode("utf-8")
    turn = Turn.from_member(body)
    # the same serialisation as Turn.body_json (the append script prepends '{"seq":N,'), in
    # the compact form it stores (an export shows the full one)
    exact = json.dumps(compact_body(rest), ensure_ascii=False, separators=(",", ":"))[1:]
    if len(exact) > len(turn.body_json()) + UNKNOWN_FIELDS_CHARS:
        exact = ""  # written from the fields this version knows (then bounded)
    fields = {name: getattr(turn, name) for name in Turn.__dataclass_fields__}
    fields["seq"] = seq
    return stored_terms(_StoredTurn(**fields, body=exact))


def seq_runs(turns: Sequence[IndexedTurn], chunk: int = CHUNK_TURNS) -> list[list[IndexedTurn]]:
    """Split turns (ascending seqs) into runs of consecutive seqs of at most ``chunk`` turns."""
    runs: list[list[IndexedTurn]] = []
    for item in turns:
        if runs and len(runs[-1]) < chunk and runs[-1][-1].turn.seq + 1 == item.turn.seq:
            runs[-1].append(item)
        else:
            runs.append([item])
    return runs


def prepare_turns(turns: Sequence[dict[str, Any]]) -> list[IndexedTurn]:
    """A dump's turns ready to append (:func:`stored_turn` of each), checked before anything is
    written.

    Raises:
        ValueError: a turn is malformed or seqs are not ascending.
    """
    prepared = [stored_turn(t) for t in turns]
    if any(b.turn.seq <= a.turn.seq for a, b in pairwise(prepared)):
        raise ValueError("turn seqs are not ascending")
    return prepared


async def restore_conversation(
    store: MemoryStore,
    keys: ConversationKeys,
    dump: ConversationDump,
    *,
    memory_scope: str,
    progress: Progress | None = None,
    prepared: Sequence[IndexedTurn] | None = None,
) -> int:
    """Write a conversation back: turns with their seqs (and recall index), meta, calls, index
    entries for it and its memory set, its due time; every key with the retention TTL.

    The conversation should be empty (the caller checks): turns are appended at their seqs.

    Args:
        store: the store (its TTL applies).
        keys: where to write (the dump's ids or others: importing under another user).
        dump: what to write; ``turns`` in ascending seq order.
        memory_scope: the index member of the memory set the conversation uses.
        progress: called with the number of turns written so far.
        prepared: :func:`prepare_turns` of ``dump.turns`` when the caller already checked them
            (an import checks every conversation before it writes any).

    Returns:
        The number of turns written.

    Raises:
        ValueError: a turn is malformed or seqs are not ascending (nothing written).
        StoreError: Redis failed (what was written stays; forget and import again).
    """
    turns = list(prepared) if prepared is not None else prepare_turns(dump.turns)
    seqs = [t.turn.seq for t in turns]
    redis = store.redis
    written = 0
    for run in seq_runs(turns):
        try:
            await redis.hset(keys.meta, "seq", run[0].turn.seq - 1)
        except RedisError as exc:
            raise StoreError(f"restore {keys.ref}: {exc}") from exc
        result = await store.append(keys, run)
        if result.first_seq != run[0].turn.seq:
            raise StoreError(f"restore {keys.ref}: seq {result.first_seq} != {run[0].turn.seq}")
        written += len(run)
        if progress is not None:
            progress(written)
    meta = {k: v for k, v in dump.meta.items() if k not in DERIVED_META}
    # The seq counter never goes below a stored turn (the next turn would take its seq), and
    # the extraction cursor never above the counter (turns up to it would never be extracted),
    # whatever the document says.
    last = max(_count(meta.get("seq")), seqs[-1] if seqs else 0)
    meta["seq"] = str(last)
    if "cursor" in meta:
        meta["cursor"] = str(min(_count(meta["cursor"]), last))
    user = keys.user_keys
    try:
        async with redis.pipeline(transaction=True) as pipe:
            if "updated_ms" not in meta:
                pipe.hdel(keys.meta, "updated_ms")
            if meta:
                pipe.hset(keys.meta, mapping=_fields(meta))
            calls = {k: v for k, v in dump.calls.items() if k != CURSOR_COPY_FIELD}
            calls[CURSOR_COPY_FIELD] = _count(meta.get("cursor"))  # restores an evicted meta's
            pipe.hset(keys.calls, mapping=_fields(calls))
            for key in (keys.meta, keys.turns, keys.calls, keys.postings, keys.times):
                pipe.expire(key, store.ttl_s)
            await pipe.execute()
        async with redis.pipeline(transaction=False) as pipe:
            pipe.sadd(user.index, keys.index_member, memory_scope)
            pipe.expire(user.index, store.ttl_s)
            if dump.due_ms is not None:
                pipe.zadd(due_key(keys.prefix), {keys.ref: dump.due_ms})
            await pipe.execute()
    except RedisError as exc:
        raise StoreError(f"restore {keys.ref}: {exc}") from exc
    return written


def _count(value: str | None) -> int:
    """A counter as a meta field holds it (a non-negative integer; anything else is 0)."""
    text = (value or "").strip()
    return int(text) if text.isascii() and text.isdigit() else 0


__all__ = [
    "CHUNK_TURNS",
    "DERIVED_META",
    "ConversationDump",
    "MemorySetDump",
    "delete_conversation",
    "drop_due_refs",
    "has_data",
    "index_members",
    "read_conversation",
    "read_memory_set",
    "restore_conversation",
    "restore_memory_set",
    "seq_runs",
    "stored_turn",
]
