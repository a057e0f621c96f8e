"""The per-alias block (``model_info: memory:`` of a model alias): :class:`AliasMemoryConfig`,
its own ``window`` and ``recall`` over the global ones, and :func:`parse_alias_config`.

An alias without that block (or with ``enabled: false``) is passed through untouched.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from litellm_memory_hook.core.prompt import PromptWording
from litellm_memory_hook.errors import ConfigError
from litellm_memory_hook.extraction.prompt import ExtractionWording
from litellm_memory_hook.settings.flat_keys import _LOG_DEPRECATIONS, ALIAS_FLAT_KEYS, grouped
from litellm_memory_hook.settings.groups import _KEY_PREFIX_PATTERN
from litellm_memory_hook.settings.sources import _dotted, describe_invalid

_ALIAS_GROUP = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class AliasWindow(BaseModel):
    """An alias's own window budgets (``window:`` in ``model_info.memory``); a key left out takes
    the global ``window``.

    Attributes:
        max_chars / max_messages: override the global values.
    """

    model_config = _ALIAS_GROUP

    max_chars: int | None = Field(default=None, ge=200, le=2_000_000)
    max_messages: int | None = Field(default=None, ge=1, le=1000)


class AliasRecall(BaseModel):
    """An alias's own recall (``recall:`` in ``model_info.memory``); a key left out takes the
    global ``recall``.

    Attributes:
        mode / k / max_chars / max_k / min_share / scope / max_user_chats: override the global
            values (``recall: {scope: user}`` is the per-alias opt-in to recall across the user's
            conversations).
    """

    model_config = _ALIAS_GROUP

    mode: Literal["budget", "fixed"] | None = None
    k: int | None = Field(default=None, ge=0, le=20)
    max_chars: int | None = Field(default=None, ge=0, le=50_000)
    max_k: int | None = Field(default=None, ge=1, le=64)
    min_share: float | None = Field(default=None, ge=0.0, le=1.0)
    scope: Literal["conversation", "user"] | None = None
    max_user_chats: int | None = Field(default=None, ge=1, le=500)


class AliasMemoryConfig(BaseModel):
    """The ``model_info.memory`` block of one model alias.

    Attributes:
        enabled: memory is on for this alias.
        required: requests without a usable user id get HTTP 400 instead of a pass-through.
        namespace: aliases with the same namespace share memory (default: the alias name).
        system_prompt: the operator's rules, placed first in the system message.
        window: the alias's own window budgets (:class:`AliasWindow`), key by key over the
            global ``window``.
        recall: the alias's own recall (:class:`AliasRecall`), key by key over the global
            ``recall``.
        mode: ``read_only`` answers with memory but never stores (a shared demo alias).
        wording: the operator's own words for the preamble, section notes and the final
            reminder (:class:`litellm_memory_hook.core.prompt.PromptWording`); English defaults.
        memory_scope: ``user`` (default): memories belong to the user within the namespace and
            are shared by all their conversations; ``conversation``: each conversation has its
            own. The summary is always per conversation.
        extraction: run extraction jobs for this alias's conversations.
        extraction_model: the alias the extraction job calls (a cheaper model); default: this
            alias.
        extraction_wording: the operator's own words for the extraction prompt
            (:class:`litellm_memory_hook.extraction.prompt.ExtractionWording`).
        layout: ``cache`` (default): a prompt that keeps the provider's prompt cache: a stable
            head (rules, the client's system, persona, pinned memories, a snapshot of memories
            and summary taken once an epoch), the window trimmed in steps, then a small
            volatile tail (recalled lines, the date and time, the reminder) before the user's
            last message; ``seed``: one system message with everything, built afresh for
            every request (the first version's layout).
        window_low_water: in the cache layout, the share of the window's budgets a step cuts
            it back to when it is over them (0.6: the window's first message then stays the
            same until it has grown by 40% of the budget).
        tail_placement: where the cache layout's tail goes: ``system`` (a system message just
            before the user's last message; OpenAI and most OpenAI-compatible servers),
            ``user`` (a leading data part of that message; providers that move every system
            message to the top: Anthropic, Gemini, Bedrock), ``auto`` (default): by the
            provider of the alias's deployment.
        cache_marks: in the cache layout, mark the end of the head and of the window with
            ``cache_control`` for providers that cache only where told (at most 4 marks in all,
            the client's own counted first): ``on``, ``off``, or ``auto`` (default: on for
            Anthropic and Bedrock deployments).
        history: what becomes of a history the client sends with its request: ``window``
            trims it to the window's budgets (a chat app; the turns it drops are in Redis, read
            back by recall); ``keep`` sends all of it as sent (an agent with tools relies on
            every tool result it sent); ``auto`` (default): ``keep`` when the request declares
            or uses tools, else ``window``. A client that sends only its new message gets the
            window from Redis either way.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    enabled: bool = True
    required: bool = False
    namespace: str | None = Field(default=None, pattern=_KEY_PREFIX_PATTERN)
    system_prompt: str = ""
    window: AliasWindow = Field(default_factory=AliasWindow)
    recall: AliasRecall = Field(default_factory=AliasRecall)
    mode: Literal["read_write", "read_only"] = "read_write"
    wording: PromptWording | None = None
    memory_scope: Literal["user", "conversation"] = "user"
    extraction: bool = True
    extraction_model: str | None = None
    extraction_wording: ExtractionWording | None = None
    layout: Literal["cache", "seed"] = "cache"
    window_low_water: float = Field(default=0.6, gt=0.0, le=1.0)
    tail_placement: Literal["auto", "system", "user"] = "auto"
    cache_marks: Literal["auto", "on", "off"] = "auto"
    history: Literal["auto", "keep", "window"] = "auto"

    @model_validator(mode="before")
    @classmethod
    def _flat_keys(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        return grouped(data, ALIAS_FLAT_KEYS, where="model_info.memory.", fold=False)


def _alias_source(raw: Mapping[str, Any]) -> Callable[[tuple[str | int, ...]], str]:
    """Where an alias setting came from: its path in the block, or the flat key it was set by
    (``model_info.memory.recall_k``)."""

    def name(loc: tuple[str | int, ...]) -> str:
        path = ".".join(str(p) for p in loc[:2])
        block = raw.get(str(loc[0])) if loc else None
        if not (isinstance(block, Mapping) and len(loc) >= 2 and loc[1] in block):
            old = next((o for o, new in ALIAS_FLAT_KEYS.items() if new == path and o in raw), None)
            if old is not None:
                return _dotted(("model_info", "memory", old, *loc[2:]))
        return _dotted(("model_info", "memory", *loc))

    return name


def parse_alias_config(model_info: dict[str, Any] | None) -> AliasMemoryConfig | None:
    """Read an alias's ``model_info.memory``; ``None`` when memory is off for it.

    ``memory: true`` is short for ``{enabled: true}``.

    Raises:
        ConfigError: the block has unknown keys or invalid values.
    """
    raw = (model_info or {}).get("memory")
    if raw is None or raw is False:
        return None
    if raw is True:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError("model_info.memory must be true or a mapping")
    token = _LOG_DEPRECATIONS.set(True)
    try:
        config = AliasMemoryConfig(**raw)
    except ValidationError as exc:
        raise ConfigError(describe_invalid(exc, _alias_source(raw), frozenset())) from exc
    finally:
        _LOG_DEPRECATIONS.reset(token)
    return config if config.enabled else None
