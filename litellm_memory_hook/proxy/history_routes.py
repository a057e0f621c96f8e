"""HTTP routes of a memory set's history: what extraction jobs removed, and restoring it.

==========  ====================================  ==================================================
method      path                                  answer
==========  ====================================  ==================================================
GET         /memory/v1/history?user&model         200 ``{"history": [entry]}``, newest first; entry
            [&conversation]                       = ``{"id", "memory_id", "text", "removed_ms",
                                                  "reason", "by", "conversation", "from_seq",
                                                  "through_seq"}`` (times epoch ms; reason
                                                  ``update``, ``delete`` or ``cap``)
POST        /memory/v1/history/{id}/restore       200 the restored memory ``{"id", "text",
                                                  "created_ms"}`` (its id and text as they were);
                                                  body ``{"user", "model" [, "conversation"]}``;
                                                  404 no such entry, 400 the set holds it already
                                                  or is full
==========  ====================================  ==================================================

Auth, tenants and errors as for every route of :mod:`litellm_memory_hook.proxy.routes`, which
imports this module so that these routes are on its router: the caller's tenant comes from its
key (:func:`~litellm_memory_hook.proxy.routes.caller_tenant`), so an entry of another tenant's
set is not found (404). Example::

    curl -s -H "$H" 'http://127.0.0.1:4000/memory/v1/history?user=alice&model=demo'
    curl -s -X POST -H "$H" -H 'content-type: application/json' \\
      http://127.0.0.1:4000/memory/v1/history/1718000000000-a1b2c3/restore \\
      -d '{"user": "alice", "model": "demo"}'
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from litellm_memory_hook.proxy.routes import (
    _NOT_FOUND,
    Auth,
    ConversationQuery,
    Hook,
    ItemId,
    MemoryItemOut,
    ModelQuery,
    UserQuery,
    _answers,
    _ConversationField,
    _ModelField,
    _target,
    _UserField,
    memory_api,
    router,
)


class HistoryEntryOut(BaseModel):
    """A memory an extraction job replaced or deleted."""

    id: str = Field(description="The entry's id (what a restore names).")
    memory_id: str = Field(description="The memory's id, given back on restore.")
    text: str = Field(description="The memory's text as it was stored.")
    removed_ms: int = Field(description="When the job removed it, epoch milliseconds.")
    reason: str = Field(description="update, delete, or cap (room made for a new memory).")
    by: str = Field(description="The new text, the contradicting fact, or the new memory.")
    conversation: str = Field(description="The conversation (key form) whose job removed it.")
    from_seq: int = Field(description="The first message seq the job read.")
    through_seq: int = Field(description="The last message seq the job read.")


class HistoryOut(BaseModel):
    """A memory set's history, newest first (at most ``memories.max_history_items`` entries)."""

    history: list[HistoryEntryOut]


class RestoreIn(BaseModel):
    """Body of ``POST /memory/v1/history/{id}/restore``."""

    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"user": "alice", "model": "demo"}]}
    )

    user: str = _UserField
    model: str = _ModelField
    conversation: str | None = _ConversationField


@router.get("/history", response_model=HistoryOut, responses=_NOT_FOUND)
async def list_history(
    hook: Hook,
    auth: Auth,
    user: UserQuery,
    model: ModelQuery,
    conversation: ConversationQuery = None,
) -> HistoryOut:
    """The memories extraction jobs replaced or deleted from a user's set, newest first."""
    with _answers(hook):
        target = _target(hook, auth, user, model, conversation)
        entries = await memory_api(hook).history(target)
    return HistoryOut(history=[HistoryEntryOut.model_validate(e.as_json()) for e in entries])


@router.post("/history/{id}/restore", response_model=MemoryItemOut, responses=_NOT_FOUND)
async def restore_memory(hook: Hook, auth: Auth, item_id: ItemId, body: RestoreIn) -> MemoryItemOut:
    """Put a removed memory back exactly (its id and text); the entry leaves the history."""
    with _answers(hook):
        target = _target(hook, auth, body.user, body.model, body.conversation)
        item = await memory_api(hook).restore(target, item_id)
    return MemoryItemOut.of(item)


__all__ = ["HistoryEntryOut", "HistoryOut", "RestoreIn", "list_history", "restore_memory"]
