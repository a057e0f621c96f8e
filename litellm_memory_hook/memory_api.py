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

Forget and export work through the user's index (no ``KEYS``/``SCAN``): the whole user (every
conversation and memory set, whatever the alias) or one conversation. The export format
(:class:`ExportDocument`, JSON, ``"format": "litellm-memory-export"``, ``"version": 1``)::

    {"format": "litellm-memory-export", "version": 1, "exported_ms": 1718000000000,
     "key_prefix": "mem", "tenant": "master", "user": "alice", "conversation": null,
     "conversations": [
       {"id": "demo", "key": "demo", "alias": "demo", "namespace": "demo",
        "memory_set": "ns:demo", "summary": "...", "cursor": 12, "seq": 14,
        "created_ms": ..., "updated_ms": ..., "due_ms": null,
        "meta": {"tenant": "master", "user": "alice", "extracted_ms": "..."},
        "turns": [{"seq": 1, "role": "user", "text": "My cat is called Miso.",
                   "ts": 1718000000000, "call_id": "..."}, ...],
        "calls": {"<litellm_call_id>": 2}}],
     "memory_sets": [
       {"scope": "ns:demo", "version": 3,
        "pinned": [{"id": "1718000000000-a1b2c3", "text": "My daughter is Asha."}],
        "memories": [{"id": "...", "text": "User: has a cat called Miso."}],
        "tombstones": {"<fact hash>": 1718000000000}}]}

``conversation`` is set when one conversation was exported; each turn is the stored JSON object
(``seq``, ``role``, ``text``, ``ts`` in epoch ms, and when set ``name``, ``call_id``,
``tool_calls``, ``tool_call_id``, ``partial``, ``ctx``, ``fp`` ...); ``meta`` holds the
conversation's other meta fields. Importing a document (:meth:`MemoryAPI.import_export`)
writes everything back as it was (turn seqs, item ids, summary, cursor, version, due time) and
rebuilds the recall index, so export, forget, import, export gives the same document (apart from
``exported_ms``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import redis.asyncio as aioredis
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from redis.exceptions import RedisError

from litellm_memory_hook.errors import MemoryHookError, StoreError
from litellm_memory_hook.extraction.parse import fact_hash, fact_key
from litellm_memory_hook.settings import AliasMemoryConfig, MemorySettings
from litellm_memory_hook.store import directory, transfer
from litellm_memory_hook.store.forgets import (
    forget_token_ttl_s,
    mark_forgotten,
    refuse_earlier_writes,
)
from litellm_memory_hook.store.keys import (
    TENANT_FORMS,
    ConversationKeys,
    MemoryKeys,
    UserKeys,
    conversation_scope,
    is_tenant,
    normalize_user_id,
    user_scope,
)
from litellm_memory_hook.store.memory_history import HistoryEntry, MemoryHistory, Restored
from litellm_memory_hook.store.memory_sets import MemoryItem, MemorySetStore
from litellm_memory_hook.store.queue import ExtractionQueue
from litellm_memory_hook.store.redis_store import MAX_SEQ, MemoryStore

logger = logging.getLogger("litellm_memory_hook")


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


#: why a user id was refused (:func:`~litellm_memory_hook.store.keys.normalize_user_id`).
_BAD_USER = (
    "'user' must be a user id that can get memory: not empty or invisible, not a placeholder "
    "such as 'null', 'default' or 'anonymous'"
)


def _check_tenant(tenant: str) -> None:
    if not is_tenant(tenant):
        raise MemoryInputError(f"tenant {tenant!r} is not a tenant id: use {TENANT_FORMS}")


def _no_conversation(target: MemoryTarget) -> str:
    return f"no conversation {target.conversation.conversation!r} for user {target.user!r}"


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
        MemoryInputError: the tenant is not one of
            :data:`~litellm_memory_hook.store.keys.TENANT_FORMS`, the user id is not
            usable, or the alias has no memory.
    """
    _check_tenant(tenant)
    user_id = normalize_user_id(user)
    if user_id is None:
        raise MemoryInputError(_BAD_USER)
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


def resolve_user(settings: MemorySettings, *, tenant: str, user: object) -> MemoryTarget:
    """The target of a forget of a whole user named without a model alias: an alias removed
    from the config, or memory turned off, must not keep a user's data from being forgotten.
    Only its user's keys are used (its conversation and memory set are placeholders named
    ``-``, which a forget of the whole user does not use).

    Raises:
        MemoryInputError: the tenant or the user id is not usable.
    """
    _check_tenant(tenant)
    user_id = normalize_user_id(user)
    if user_id is None:
        raise MemoryInputError(_BAD_USER)
    keys = ConversationKeys.for_ids(settings.key_prefix, tenant, user_id, "-")
    return MemoryTarget(tenant, user_id, "", "", keys, keys.user_keys.memory_set("ns:-"))


# -- the export format ----------------------------------------------------------------------------

EXPORT_FORMAT = "litellm-memory-export"
EXPORT_VERSION = 1
_KEY_FORM = r"^[A-Za-z0-9_.@-]{1,64}$"
_SCOPE_FORM = r"^(ns|c):[A-Za-z0-9_.@-]{1,64}$"
#: meta fields shown as their own fields of an exported conversation (JSON name -> meta field).
_META_FIELDS = {
    "id": "conversation",
    "alias": "alias",
    "namespace": "namespace",
    "memory_set": "mscope",
    "summary": "summary",
    "cursor": "cursor",
    "seq": "seq",
    "created_ms": "created_ms",
    "updated_ms": "updated_ms",
}
_INT_FIELDS = ("cursor", "seq", "created_ms", "updated_ms")


class ExportItem(BaseModel):
    """A memory: its creation-ordered id and its text."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1, max_length=128, description="e.g. 1718000000000-a1b2c3")
    text: str


class ExportMemorySet(BaseModel):
    """A memory set: pinned (user-written) and extracted memories, tombstones, version."""

    model_config = ConfigDict(extra="forbid")

    scope: str = Field(
        pattern=_SCOPE_FORM,
        description="ns:<namespace> (shared by the user's conversations) or c:<conversation>.",
    )
    version: int = Field(ge=0, description="Bumped by every change of the set.")
    pinned: list[ExportItem] = Field(default_factory=list, description="Oldest first.")
    memories: list[ExportItem] = Field(default_factory=list, description="Oldest first.")
    tombstones: dict[str, int] = Field(
        default_factory=dict,
        description="Deleted extracted memories: fact hash -> deletion time (epoch ms).",
    )


class ExportConversation(BaseModel):
    """A conversation: ids, summary and extraction state, every stored turn."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(description="The conversation id as the client sent it.")
    key: str = Field(pattern=_KEY_FORM, description="The id as it appears in key names.")
    alias: str = ""
    namespace: str = ""
    memory_set: str = Field(default="", description="The memory set it uses (its scope).")
    summary: str = ""
    cursor: int = Field(default=0, ge=0, le=MAX_SEQ, description="Extracted through this seq.")
    seq: int = Field(default=0, ge=0, le=MAX_SEQ, description="The last seq given out.")
    created_ms: int | None = None
    updated_ms: int | None = None
    due_ms: int | None = Field(default=None, description="Due for extraction (epoch ms).")
    meta: dict[str, str] = Field(default_factory=dict, description="Other meta fields.")
    turns: list[dict[str, Any]] = Field(
        default_factory=list, description="Stored turns, oldest first (seq, role, text, ts...)."
    )
    calls: dict[str, int] = Field(
        default_factory=dict, description="litellm_call_id -> seq of the stored reply."
    )


class ExportDocument(BaseModel):
    """Everything stored for a user (or one conversation of theirs), version 1."""

    model_config = ConfigDict(extra="forbid")

    format: Literal["litellm-memory-export"] = "litellm-memory-export"
    version: Literal[1] = 1
    exported_ms: int = Field(description="When it was exported (epoch ms).")
    key_prefix: str = Field(description="The key prefix it was read from (information only).")
    tenant: str = Field(description="The tenant it was read from (master, team-<id> ...).")
    user: str = Field(description="The user id, as chat requests send it.")
    conversation: str | None = Field(
        default=None, description="Set when one conversation was exported."
    )
    conversations: list[ExportConversation] = Field(default_factory=list)
    memory_sets: list[ExportMemorySet] = Field(default_factory=list)

    @classmethod
    def parse(cls, data: object) -> ExportDocument:
        """Validate a decoded JSON document.

        Raises:
            MemoryInputError: not an export of a version this code reads, or malformed (the
                message names the first problem), or a string holds a lone surrogate (it could
                not be stored).
        """
        if not isinstance(data, dict) or data.get("format") != EXPORT_FORMAT:
            raise MemoryInputError(
                f"not a litellm-memory export ('format' is not {EXPORT_FORMAT!r})"
            )
        if data.get("version") != EXPORT_VERSION:
            raise MemoryInputError(
                f"export version {data.get('version')!r} is not supported (this version reads "
                f"{EXPORT_VERSION})"
            )
        from litellm_memory_hook.core.messages import lone_surrogate

        bad = lone_surrogate(data)
        if bad is not None:
            where, code = bad
            where = where.replace("[", ".").replace("]", "")  # as pydantic names a place
            raise MemoryInputError(
                f"bad export at {where}: holds a lone surrogate {code} (a JSON escape that is "
                "no Unicode text)"
            )
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise MemoryInputError(f"bad export at {where}: {first['msg']}") from exc


def _export_conversation(dump: transfer.ConversationDump) -> ExportConversation:
    meta = dict(dump.meta)
    fields: dict[str, Any] = {}
    for name, meta_name in _META_FIELDS.items():
        if meta_name in meta:
            value = meta.pop(meta_name)
            fields[name] = int(value or 0) if name in _INT_FIELDS else value
    fields.setdefault("id", dump.key)
    return ExportConversation(
        key=dump.key,
        due_ms=dump.due_ms,
        meta=meta,
        turns=dump.turns,
        calls=dump.calls,
        **fields,
    )


def _conversation_dump(
    conversation: ExportConversation, *, tenant: str, user: str
) -> transfer.ConversationDump:
    meta = dict(conversation.meta)
    present = conversation.model_fields_set
    for name, meta_name in _META_FIELDS.items():
        value = getattr(conversation, name)
        if value is None or (name not in present and name not in ("id", "cursor", "seq")):
            continue
        meta[meta_name] = str(value)
    if "tenant" in meta:
        meta["tenant"] = tenant
    if "user" in meta:
        meta["user"] = user
    return transfer.ConversationDump(
        key=conversation.key,
        meta=meta,
        turns=list(conversation.turns),
        calls=dict(conversation.calls),
        due_ms=conversation.due_ms,
    )


def _export_memory_set(dump: transfer.MemorySetDump) -> ExportMemorySet:
    return ExportMemorySet(
        scope=dump.scope,
        version=dump.version,
        pinned=[ExportItem(id=k, text=v) for k, v in dump.pinned.items()],
        memories=[ExportItem(id=k, text=v) for k, v in dump.memories.items()],
        tombstones=dump.tombs,
    )


def _memory_set_dump(memory_set: ExportMemorySet) -> transfer.MemorySetDump:
    return transfer.MemorySetDump(
        scope=memory_set.scope,
        pinned={i.id: i.text for i in memory_set.pinned},
        memories={i.id: i.text for i in memory_set.memories},
        tombs=dict(memory_set.tombstones),
        version=memory_set.version,
    )


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


Progress = Callable[[int, int], None]


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
        self.removed = MemoryHistory(redis, ttl_s=settings.retention_s)

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

    async def users(
        self, tenant: str, *, search: str = "", offset: int = 0, limit: int = 50
    ) -> directory.Page[directory.UserEntry]:
        """A page of the tenant's stored users, sorted by id, whose id contains ``search``
        (case-insensitive), found by SCAN (:func:`litellm_memory_hook.store.directory.list_users`).

        Raises:
            MemoryInputError: not a tenant id.
        """
        _check_tenant(tenant)
        return await directory.list_users(
            self.redis,
            self.settings.key_prefix,
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
        _check_tenant(tenant)
        raw = normalize_user_id(user)
        if raw is None:
            raise MemoryInputError(_BAD_USER)
        keys = UserKeys.for_ids(self.settings.key_prefix, tenant, raw)
        if not await directory.has_user(self.redis, keys):
            raise MemoryNotFoundError(f"no such user {raw!r} in tenant {tenant!r}")
        return keys

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
        return MemoryItem(item_id, value)

    async def edit(self, target: MemoryTarget, item_id: str, text: object) -> MemoryItem:
        """Replace a pinned memory's text.

        Raises:
            MemoryInputError: bad text, or the id is an extracted memory (the model's, not
                editable: delete it and pin the new text). MemoryNotFoundError: no such memory.
        """
        value = self._checked_text(text)
        if not await self.memsets.edit_pinned(target.memory, item_id, value):
            if any(m.id == item_id for m in (await self.list(target)).memories):
                raise MemoryInputError(
                    f"{item_id!r} is an extracted memory: only pinned memories can be edited "
                    "(delete it, then pin the new text)"
                )
            raise MemoryNotFoundError(f"no pinned memory {item_id!r}")
        return MemoryItem(item_id, value)

    async def correct_extracted(
        self, target: MemoryTarget, item_id: str, text: object
    ) -> MemoryItem:
        """Correct an extracted memory: pin ``text`` (:meth:`pin`) and delete the extracted one
        (:meth:`delete_memory`, whose tombstone keeps its fact from being extracted again), as
        the inspector's Edit of an extracted memory does with the same two calls. Users may
        correct what the model wrote; the correction is theirs, so it is pinned.

        Returns:
            The new pinned memory.

        Raises:
            MemoryInputError: bad text, or the pinned limit is reached.
            MemoryNotFoundError: no extracted memory with that id.
        """
        value = self._checked_text(text)
        if not any(m.id == item_id for m in (await self.list(target)).memories):
            raise MemoryNotFoundError(f"no extracted memory {item_id!r}")
        item = await self.pin(target, value)
        await self.delete_memory(target, item_id)
        return item

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

    async def history(self, target: MemoryTarget) -> Sequence[HistoryEntry]:
        """The memories extraction jobs replaced or deleted from the target's set, newest first
        (at most ``memory_history_max``; :mod:`litellm_memory_hook.store.memory_history`)."""
        return await self.removed.entries(target.memory)

    async def restore(self, target: MemoryTarget, entry_id: str) -> MemoryItem:
        """Put a history entry's memory back (its id and text exactly; a tombstone of the same
        fact is removed) and take the entry out of the history; counted as
        ``memories_restored`` in ``mem:stats``.

        Raises:
            MemoryNotFoundError: no such entry in the set's history.
            MemoryInputError: the set holds that memory (its id or the same fact) already, or
                ``max_memories`` memories.
        """
        found = await self.removed.find(target.memory, entry_id)
        if found is None:
            raise MemoryNotFoundError(f"no history entry {entry_id!r}")
        entry = found[0]
        same = [
            m
            for m in (await self.list(target)).memories
            if fact_key(m.text) == fact_key(entry.text)
        ]
        if same:
            raise MemoryInputError(f"the memory set holds that memory already ({same[0].id})")
        done, _ = await self.removed.restore(
            target.memory,
            entry_id,
            fact_hash=fact_hash(entry.text),
            max_items=self.settings.max_memories,
        )
        if done is Restored.NO_ENTRY:
            raise MemoryNotFoundError(f"no history entry {entry_id!r}")
        if done is Restored.STORED:
            raise MemoryInputError(f"the memory set holds memory {entry.memory_id!r} already")
        if done is Restored.FULL:
            raise MemoryInputError(
                f"the memory set holds {self.settings.max_memories} memories (max_memories): "
                "delete one first"
            )
        await self.queue.count(memories_restored=1)
        return MemoryItem(entry.memory_id, entry.text)

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
            raise MemoryNotFoundError(_no_conversation(target))
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
            raise MemoryNotFoundError(_no_conversation(target) + ": nothing to extract")
        now = _now_ms()
        await self.queue.schedule(target.conversation, now, earlier_only=True)
        return now

    # -- forget, export, import -------------------------------------------------------------

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
        ttl_s = forget_token_ttl_s(self.settings.write_buffer_max_age_s)
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
            raise MemoryNotFoundError(_no_conversation(target))
        for member in members:
            if member.startswith("ns:") and member not in sets:
                sets[member] = await transfer.read_memory_set(self.redis, user.memory_set(member))
        return ExportDocument(
            exported_ms=_now_ms(),
            key_prefix=self.settings.key_prefix,
            tenant=target.tenant,
            user=target.user,
            conversation=None if whole_user else target.conversation.conversation,
            conversations=[_export_conversation(c) for c in conversations],
            memory_sets=[_export_memory_set(m) for m in sets.values() if not m.empty],
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
        _check_tenant(tenant)
        user_id = normalize_user_id(user)
        if user_id is None:
            raise MemoryInputError(_BAD_USER)
        keys = UserKeys.for_ids(self.settings.key_prefix, tenant, user_id)
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
                self.redis, memory, _memory_set_dump(memory_set), ttl_s=store.ttl_s
            )
            await self._index(keys, memory.scope)
        total = sum(len(c.turns) for c in document.conversations)
        done = 0
        for conversation_keys, conversation, turns in zip(
            conversations, document.conversations, prepared, strict=True
        ):
            dump = _conversation_dump(conversation, tenant=tenant, user=user_id)
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
        ttl_s = forget_token_ttl_s(self.settings.write_buffer_max_age_s)
        scopes: list[ConversationKeys | None] = [None] if whole_user else list(conversations)
        for scope in scopes:
            await refuse_earlier_writes(self.redis, keys, scope, ttl_s=ttl_s)

    async def _has(self, *names: str) -> bool:
        return await transfer.has_data(self.redis, names)

    async def _delete(self, names: tuple[str, ...]) -> None:
        try:
            await self.redis.delete(*names)
        except RedisError as exc:
            raise StoreError(f"delete: {exc}") from exc

    async def _index(self, keys: UserKeys, member: str) -> None:
        try:
            async with self.redis.pipeline(transaction=False) as pipe:
                pipe.sadd(keys.index, member)
                pipe.expire(keys.index, self.settings.retention_s)
                await pipe.execute()
        except RedisError as exc:
            raise StoreError(f"user index {keys.index}: {exc}") from exc


__all__ = [
    "EXPORT_FORMAT",
    "EXPORT_VERSION",
    "ExportConversation",
    "ExportDocument",
    "ExportItem",
    "ExportMemorySet",
    "ForgetResult",
    "ImportExportResult",
    "MemoryAPI",
    "MemoryInputError",
    "MemoryListing",
    "MemoryNotFoundError",
    "MemoryTarget",
    "resolve_target",
    "resolve_user",
]
