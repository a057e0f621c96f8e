"""The flat keys of earlier versions (``recall_k``, ``LITELLM_MEMORY_RECALL_K``, an alias's
``recall_k``), each moved to its place in a group with one deprecation warning naming the new key.

:data:`FLAT_KEYS` maps each old key to its new one; :func:`grouped` moves them in a mapping (the
file's section, an alias block, keyword arguments); :class:`_GroupedInit` and :class:`_FlatEnv`
are the sources of :class:`~litellm_memory_hook.settings.global_settings.MemorySettings` that do
it for the file and the environment. The new key wins where both are set.
"""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Mapping
from contextvars import ContextVar
from typing import Any

from pydantic import BaseModel
from pydantic_settings import BaseSettings, EnvSettingsSource, PydanticBaseSettingsSource

from litellm_memory_hook.settings.env import ENV_PREFIX, GENERIC_ENV, env_name

logger = logging.getLogger("litellm_memory_hook")


#: every flat key of earlier versions and its place now (``group.key``): in the file, as
#: ``LITELLM_MEMORY_<KEY>`` and as a keyword of :class:`MemorySettings`, each still works, with
#: one :class:`DeprecationWarning` naming the new key (and a log line when the proxy or the CLI
#: reads it); the new key wins where both are set. A key of the same source only: the file's old
#: key still wins over the new key's environment variable, as the file wins over the environment.
FLAT_KEYS: Mapping[str, str] = {
    "redis_url": "redis.url",
    "redis_cluster": "redis.cluster",
    "redis_timeout_s": "redis.timeout_s",
    "redis_breaker_s": "redis.breaker_s",
    "redis_refusal_log_s": "redis.refusal_log_s",
    "redis_sentinel_nodes": "redis.sentinel_nodes",
    "redis_service_name": "redis.service_name",
    "redis_sentinel_password": "redis.sentinel_password",
    "key_prefix": "storage.key_prefix",
    "retention_days": "storage.retention_days",
    "max_stored_messages": "storage.max_messages",
    "stored_text_chars": "storage.max_message_chars",
    "recent_chars": "window.max_chars",
    "recent_messages": "window.max_messages",
    "recall_mode": "recall.mode",
    "recall_k": "recall.k",
    "recall_chars": "recall.max_chars",
    "recall_k_max": "recall.max_k",
    "recall_min_share": "recall.min_share",
    "recall_scope": "recall.scope",
    "recall_user_chats": "recall.max_user_chats",
    "memory_chars": "memories.max_chars",
    "pinned_chars": "memories.max_pinned_chars",
    "max_memories": "memories.max_items",
    "memory_item_chars": "memories.max_item_chars",
    "max_pinned": "memories.max_pinned_items",
    "pinned_item_chars": "memories.max_pinned_item_chars",
    "memory_history_max": "memories.max_history_items",
    "summary_chars": "summary.max_chars",
    "summary_min_kept_share": "summary.min_kept_share",
    "extraction_enabled": "extraction.enabled",
    "worker_in_proxy": "extraction.worker_in_proxy",
    "extraction_every": "extraction.every_messages",
    "extraction_quiet_s": "extraction.quiet_s",
    "extraction_timeout_s": "extraction.timeout_s",
    "extraction_lease_s": "extraction.lease_s",
    "extraction_poll_s": "extraction.poll_s",
    "extraction_heartbeat_s": "extraction.heartbeat_s",
    "extraction_sweep_s": "extraction.sweep_s",
    "extraction_lines_chars": "extraction.max_messages_chars",
    "extraction_memory_chars": "extraction.max_memories_chars",
    "extraction_max_removed_share": "extraction.max_removed_share",
    "extraction_base_url": "extraction.base_url",
    "extraction_api_key": "extraction.api_key",
    "extraction_max_attempts": "extraction.max_attempts",
    "extraction_backoff_s": "extraction.backoff_s",
    "extraction_auth_backoff_s": "extraction.auth_backoff_s",
    "extraction_backoff_max_s": "extraction.max_backoff_s",
    "write_buffer_max": "write_buffer.max_turns",
    "write_buffer_max_age_s": "write_buffer.max_age_s",
    "refused_write_retry_s": "write_buffer.refused_retry_s",
    "user_header": "identity.user_header",
    "conversation_header": "identity.conversation_header",
    "claude_code_user": "identity.claude_code_user",
    "side_request_patterns": "requests.side_request_patterns",
    "temporary_conversation_patterns": "requests.temporary_conversation_patterns",
    "regenerate_window_s": "requests.regenerate_window_s",
}

#: the flat keys of an alias's ``model_info.memory`` block and their place now.
ALIAS_FLAT_KEYS: Mapping[str, str] = {
    old: new for old, new in FLAT_KEYS.items() if new.partition(".")[0] in ("window", "recall")
}

#: log the deprecation warnings too (set while the proxy or the CLI reads the operator's
#: settings, so that the operator sees them; a :class:`DeprecationWarning` alone is hidden).
_LOG_DEPRECATIONS: ContextVar[bool] = ContextVar("log_deprecations", default=False)
_LOGGED: set[str] = set()


def _deprecated(old: str, new: str, *, ignored: bool) -> None:
    """One warning for one old key: ``recall_k is deprecated: use recall.k``; logged once per
    process as well while :data:`_LOG_DEPRECATIONS` is set."""
    if ignored:
        message = f"{old} is deprecated and ignored: {new} is set too and wins"
    else:
        message = f"{old} is deprecated: use {new}"
    warnings.warn(message, DeprecationWarning, stacklevel=3)
    if _LOG_DEPRECATIONS.get() and message not in _LOGGED:
        _LOGGED.add(message)
        logger.warning("memory hook: %s", message)


def _key_in(data: Mapping[Any, Any], name: str, *, fold: bool = True) -> Any:
    """The key of ``data`` that is ``name`` (any case with ``fold``), as ``data`` spells it."""
    if fold:
        return next((k for k in data if isinstance(k, str) and k.lower() == name), None)
    return name if name in data else None


def grouped(
    data: Mapping[Any, Any],
    table: Mapping[str, str] = FLAT_KEYS,
    *,
    where: str = "",
    fold: bool = True,
) -> dict[Any, Any]:
    """``data`` with each flat key of ``table`` (any case with ``fold``) moved into its group,
    with one warning per key (``{where}recall_k is deprecated: use recall.k``). Where the group
    sets the new key too, the new key wins and the warning says so."""
    out = dict(data)
    for key in [k for k in data if isinstance(k, str) and (k.lower() if fold else k) in table]:
        new = table[key.lower() if fold else key]
        group, _, name = new.partition(".")
        value = out.pop(key)
        group_key = _key_in(out, group, fold=fold) or group
        block = out.get(group_key, {})
        if isinstance(block, BaseModel):
            block = {n: getattr(block, n) for n in block.model_fields_set}
        ignored = not isinstance(block, Mapping) or name in block
        if not ignored:
            out[group_key] = {**block, name: value}
        _deprecated(f"{where}{key}", new, ignored=ignored)
    return out


class _GroupedInit(PydanticBaseSettingsSource):
    """The keyword arguments (the file's section) with their flat keys moved into their groups,
    before they are merged with the environment: a file's old key still wins over the
    environment."""

    def __init__(self, settings_cls: type[BaseSettings], inner: PydanticBaseSettingsSource):
        super().__init__(settings_cls)
        self._inner = inner

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, "", False

    def __call__(self) -> dict[str, Any]:
        return grouped(self._inner())


class _FlatEnv(EnvSettingsSource):
    """The flat ``LITELLM_MEMORY_<KEY>`` variables of earlier versions, read as their group's
    ``LITELLM_MEMORY_<GROUP>__<KEY>`` (one warning each; the group's own variable wins), and
    :data:`GENERIC_ENV` (``REDIS_URL``...) after them. Below the environment source proper."""

    def _load_env_vars(self) -> Mapping[str, str | None]:
        present = {name.upper(): value for name, value in os.environ.items()}
        out: dict[str, str | None] = {}
        for name, path in GENERIC_ENV.items():
            if name in present:
                out[env_name(path).lower()] = present[name]
        for old, path in FLAT_KEYS.items():
            variable = f"{ENV_PREFIX}{old}".upper()
            if variable not in present:
                continue
            new = env_name(path)
            _deprecated(variable, new, ignored=new in present)
            out[new.lower()] = present[variable]
        return out
