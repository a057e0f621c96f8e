"""Error classes. Every error this package raises on purpose derives from :class:`MemoryHookError`.

The hook turns each of them (and any other exception from our code) into a log line and a counter,
never into an HTTP 500 (docs/design.md#failure-policy).
"""

from __future__ import annotations


class MemoryHookError(Exception):
    """Base class of the package's errors."""


class ConfigError(MemoryHookError):
    """The settings or an alias's ``model_info.memory`` block are invalid."""


class InvalidIdError(MemoryHookError):
    """A tenant, user or conversation id cannot be used (empty or a placeholder)."""


class StoreError(MemoryHookError):
    """A Redis read or write failed; the message names the operation."""


class DatasetError(MemoryHookError):
    """An import or benchmark file cannot be read."""


class ExtractionError(MemoryHookError):
    """An extraction reply cannot be used (no JSON object, a missing key, a wrong shape).

    The worker counts it, keeps what was stored and tries again after the next message.
    """
