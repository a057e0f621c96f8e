"""The request and response shapes of the memory API routes (``/memory/v1``), as the proxy's
``/openapi.json`` documents them: bodies, answers, query and path parameters, and the error
answers each route may give. Times are epoch milliseconds; ``seq`` and ``cursor`` count a
conversation's stored messages. The routes: :mod:`litellm_memory_hook.proxy.routes`.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Path, Query
from pydantic import BaseModel, ConfigDict, Field

from litellm_memory_hook.store.memory_sets import MemoryItem


class MemoryItemOut(BaseModel):
    """One memory: its id, its text and its creation time (epoch milliseconds)."""

    id: str = Field(description="Creation-ordered id, e.g. 1718000000000-a1b2c3.")
    text: str = Field(description="The memory as stored (pinned: exactly as typed, trimmed).")
    created_ms: int = Field(description="Creation time, epoch milliseconds.")

    @classmethod
    def of(cls, item: MemoryItem) -> MemoryItemOut:
        """The response shape of a stored item."""
        return cls(id=item.id, text=item.text, created_ms=item.created_ms)


class MemoryListOut(BaseModel):
    """A user's memory set: pinned (user-written) and extracted (model-written) memories."""

    pinned: list[MemoryItemOut] = Field(description="User-written memories, oldest first.")
    memories: list[MemoryItemOut] = Field(description="Model-extracted memories, oldest first.")
    version: int = Field(description="Bumped by every change of the set.")


class SummaryOut(BaseModel):
    """A conversation's rolling summary and extraction state."""

    summary: str = Field(description="The summary so far ('' before the first extraction).")
    cursor: int = Field(description="The message seq the summary and memories cover.")
    seq: int = Field(description="The last stored message seq.")
    due_ms: int | None = Field(
        description="When the next extraction is due (epoch ms); null when none is scheduled."
    )


class FlushOut(BaseModel):
    """When the flushed conversation is due for extraction."""

    due_ms: int = Field(description="Epoch milliseconds (now).")


class ForgetOut(BaseModel):
    """What a forget deleted."""

    user: str = Field(description="The user id.")
    conversation: str | None = Field(
        description="The conversation forgotten; null when the whole user was."
    )
    deleted_keys: int = Field(description="Redis keys deleted.")
    conversations: int = Field(description="Conversations that held data.")
    memory_sets: int = Field(description="Memory sets (pinned and extracted memories) deleted.")


class ErrorOut(BaseModel):
    """An error: ``detail`` names the problem."""

    detail: str


_UserField = Field(description="The user id, as chat requests send it in 'user'.")
_ModelField = Field(description="A memory-enabled model alias, e.g. demo.")
_ConversationField = Field(
    default=None,
    description="Conversation id (default: the alias's default conversation).",
)


class _TextIn(BaseModel):
    """A body that names a memory set and carries a memory's text (:class:`PinIn`,
    :class:`EditIn`; each sets its own ``text`` description and example)."""

    model_config = ConfigDict(extra="forbid")

    user: str = _UserField
    model: str = _ModelField
    text: str
    conversation: str | None = _ConversationField


def _example(text: str) -> ConfigDict:
    """The config a :class:`_TextIn` body adds to its base's: an OpenAPI example with ``text``."""
    return ConfigDict(
        json_schema_extra={"examples": [{"user": "alice", "model": "demo", "text": text}]}
    )


class PinIn(_TextIn):
    """Body of ``POST /memory/v1/pinned``."""

    model_config = _example("My cat is called Miso.")

    text: str = Field(description="The memory, as the user wrote it (trimmed; length-limited).")


class EditIn(_TextIn):
    """Body of ``PATCH /memory/v1/pinned/{id}``."""

    model_config = _example("My cat is called Mochi.")

    text: str = Field(description="The new text (trimmed; length-limited).")


class FlushIn(BaseModel):
    """Body of ``POST /memory/v1/flush``."""

    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"user": "alice", "model": "demo"}]}
    )

    user: str = _UserField
    model: str = _ModelField
    conversation: str | None = _ConversationField


UserQuery = Annotated[str, Query(description="The user id, as chat requests send it in 'user'.")]
ModelQuery = Annotated[str, Query(description="A memory-enabled model alias, e.g. demo.")]
ForgetModelQuery = Annotated[
    str | None,
    Query(
        description="A memory-enabled model alias, e.g. demo; used with 'conversation' only "
        "(a whole user is forgotten whatever the alias)."
    ),
]
ConversationQuery = Annotated[
    str | None, Query(description="Conversation id (default: the alias's default conversation).")
]
ItemId = Annotated[str, Path(alias="id", max_length=128, description="The memory's id.")]
UserPath = Annotated[
    str, Path(max_length=512, description="The user id, as chat requests send it in 'user'.")
]


#: the error answers of every route (OpenAPI ``responses``).
_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorOut, "description": "Bad input; the detail names the problem."},
    401: {"model": ErrorOut, "description": "Missing or wrong API key."},
    403: {"model": ErrorOut, "description": "The key may not be used, or has no identity."},
    503: {"model": ErrorOut, "description": "The memory store (Redis) is unavailable."},
}
_NOT_FOUND: dict[int | str, dict[str, Any]] = {
    **_ERRORS,
    404: {"model": ErrorOut, "description": "No such memory or conversation for this caller."},
}
