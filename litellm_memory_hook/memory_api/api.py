"""The memory API in one class: a memory set's calls, users' and conversations' calls, forget,
export and import (each group in a module of its own)."""

from __future__ import annotations

from litellm_memory_hook.memory_api.conversations import ConversationAPI
from litellm_memory_hook.memory_api.forget_export import ForgetExportAPI
from litellm_memory_hook.memory_api.memories import MemorySetAPI


class MemoryAPI(MemorySetAPI, ConversationAPI, ForgetExportAPI):
    """List, pin, edit and delete memories; read summaries; flush; forget, export and import.

    Args:
        redis: an asyncio client (``decode_responses=False``).
        settings: the global settings (limits: ``memories.max_pinned_items``,
            ``memories.max_pinned_item_chars``; TTL).

    Every method raises :class:`StoreError` when Redis fails.
    """


__all__ = ["MemoryAPI"]
