"""The memory API: read and edit a user's memories, read a summary, ask for extraction now.

One package used by the CLI (``litellm-memory memories ...``), the HTTP routes on the proxy
(``/memory/v1/...``) and tests, over the same store functions the hook and the worker use.

A memory set is named by (tenant, user, model alias): the alias gives the namespace and the
memory scope (``model_info.memory``), as for chat requests; with ``memory_scope: conversation``
(or for the summary and a flush) the conversation is named too, defaulting to the one a chat
request without a conversation id uses. The tenant always comes from the caller's credentials
(HTTP) or the operator (CLI), never from a request body, so a key never reaches another
tenant's memories: an id of another tenant's memory is simply not found (404).

Modules: :mod:`.targets` (which keys a call works on), :mod:`.memories` (a memory set),
:mod:`.conversations` (users, conversations, summary, flush), :mod:`.forget_export` (forget,
export, import), :mod:`.export_format` (the export document), :mod:`.api` (:class:`MemoryAPI`, all
of them), :mod:`.errors`.
"""

from __future__ import annotations

from litellm_memory_hook.memory_api.api import MemoryAPI
from litellm_memory_hook.memory_api.errors import MemoryInputError, MemoryNotFoundError
from litellm_memory_hook.memory_api.export_format import (
    EXPORT_FORMAT,
    EXPORT_VERSION,
    ExportConversation,
    ExportDocument,
    ExportItem,
    ExportMemorySet,
)
from litellm_memory_hook.memory_api.forget_export import ForgetResult, ImportExportResult
from litellm_memory_hook.memory_api.memories import MemoryListing
from litellm_memory_hook.memory_api.targets import MemoryTarget, resolve_target, resolve_user

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
