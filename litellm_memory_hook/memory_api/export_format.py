"""The export format: everything stored for a user (or one conversation of theirs) as one JSON
document, and its conversion to and from the dumps of :mod:`litellm_memory_hook.store.transfer`.

The format (:class:`ExportDocument`, JSON, ``"format": "litellm-memory-export"``,
``"version": 1``)::

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
in its full form (:func:`~litellm_memory_hook.core.models.full_member`: ``seq``, ``role``,
``text``, ``ts`` in epoch ms, and when set ``name``, ``call_id``, ``tool_calls``,
``tool_call_id``, ``partial``, ``ctx``, ``fp``, ``msg`` ...; the store keeps it compact);
``meta`` holds the conversation's other meta fields. Importing a document
(:meth:`MemoryAPI.import_export`) writes everything back as it was (turn seqs, item ids, summary,
cursor, version, due time) and rebuilds the recall index, so export, forget, import, export gives
the same document (apart from ``exported_ms``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from litellm_memory_hook.memory_api.errors import MemoryInputError
from litellm_memory_hook.store import transfer
from litellm_memory_hook.store.redis_store import MAX_SEQ

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


def export_conversation(dump: transfer.ConversationDump) -> ExportConversation:
    """A stored conversation as the document shows it."""
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


def conversation_dump(
    conversation: ExportConversation, *, tenant: str, user: str
) -> transfer.ConversationDump:
    """A document's conversation as the store writes it back, for ``user`` of ``tenant``."""
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


def export_memory_set(dump: transfer.MemorySetDump) -> ExportMemorySet:
    """A stored memory set as the document shows it."""
    return ExportMemorySet(
        scope=dump.scope,
        version=dump.version,
        pinned=[ExportItem(id=k, text=v) for k, v in dump.pinned.items()],
        memories=[ExportItem(id=k, text=v) for k, v in dump.memories.items()],
        tombstones=dump.tombs,
    )


def memory_set_dump(memory_set: ExportMemorySet) -> transfer.MemorySetDump:
    """A document's memory set as the store writes it back."""
    return transfer.MemorySetDump(
        scope=memory_set.scope,
        pinned={i.id: i.text for i in memory_set.pinned},
        memories={i.id: i.text for i in memory_set.memories},
        tombs=dict(memory_set.tombstones),
        version=memory_set.version,
    )


__all__ = [
    "EXPORT_FORMAT",
    "EXPORT_VERSION",
    "ExportConversation",
    "ExportDocument",
    "ExportItem",
    "ExportMemorySet",
    "conversation_dump",
    "export_conversation",
    "export_memory_set",
    "memory_set_dump",
]
