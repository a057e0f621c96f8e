"""The memory API's errors: a request it refuses (HTTP 400) and an id it does not find (404)."""

from __future__ import annotations

from litellm_memory_hook.errors import MemoryHookError


class MemoryInputError(MemoryHookError):
    """A request to the memory API is invalid (empty or too long text, unknown alias, no user).

    The HTTP routes answer 400 with the message; the CLI prints it.
    """


class MemoryNotFoundError(MemoryHookError):
    """No memory with that id in the caller's memory set (HTTP 404)."""


__all__ = ["MemoryInputError", "MemoryNotFoundError"]
