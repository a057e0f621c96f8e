"""The per-request controls a client sends in ``metadata`` (pure), validated.

A bad value is a clear error naming the field (the hook answers HTTP 400), never a silent
default: ``memory_mode`` (``off`` | ``read_only`` | ``read_write``; case and ``-``/``_``
insensitive), ``conversation_id`` (a non-empty string), ``timezone`` (an IANA name),
``persona`` and ``custom_instructions`` (strings), ``memory_regenerate`` and ``memory_flush``
(booleans). Absent or ``null`` means "not given".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from litellm_memory_hook.core.dates import is_zone
from litellm_memory_hook.errors import MemoryHookError

MODES = ("off", "read_only", "read_write")  # from least to most a request may do


class ControlError(MemoryHookError):
    """A request control in ``metadata`` has a bad value; the message names the field."""


@dataclass(frozen=True)
class Controls:
    """The validated controls of one request (``None``: not given)."""

    mode: str | None = None
    conversation_id: str | None = None
    timezone: str | None = None
    persona: str = ""
    custom_instructions: str = ""
    regenerate: bool = False
    flush: bool = False


def _string(metadata: dict[str, Any], name: str) -> str | None:
    value = metadata.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ControlError(f"metadata.{name} must be a string (got {type(value).__name__})")
    return value


def _flag(metadata: dict[str, Any], name: str) -> bool:
    value = metadata.get(name)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise ControlError(f"metadata.{name} must be true or false (got {value!r:.40})")
    return value


def read_controls(metadata: dict[str, Any]) -> Controls:
    """Validate the controls in a request's ``metadata``.

    Raises:
        ControlError: a value of the wrong type, an unknown mode, a blank conversation id or an
            unknown timezone; the message names the field and the allowed values.
    """
    mode = _string(metadata, "memory_mode")
    if mode is not None:
        mode = mode.strip().lower().replace("-", "_")
        if mode not in MODES:
            raise ControlError(
                f"metadata.memory_mode must be one of {', '.join(MODES)} "
                f"(got {metadata.get('memory_mode')!r:.40})"
            )
    conversation = _string(metadata, "conversation_id")
    if conversation is not None and not conversation.strip():
        raise ControlError("metadata.conversation_id must not be blank")
    zone = _string(metadata, "timezone")
    if zone is not None and not is_zone(zone):
        raise ControlError(
            f"metadata.timezone must be an IANA name such as Asia/Kolkata (got {zone!r:.40})"
        )
    return Controls(
        mode=mode,
        conversation_id=conversation.strip() if conversation else None,
        timezone=zone,
        persona=_string(metadata, "persona") or "",
        custom_instructions=_string(metadata, "custom_instructions") or "",
        regenerate=_flag(metadata, "memory_regenerate"),
        flush=_flag(metadata, "memory_flush"),
    )


def effective_mode(asked: str | None, alias_mode: str) -> str:
    """The mode of a request: what it asks, never more than its alias allows."""
    if asked is None:
        return alias_mode
    return min(asked, alias_mode, key=MODES.index)
