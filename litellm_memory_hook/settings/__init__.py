"""Configuration: one global settings model in groups, and the per-alias block.

Global settings come from the ``callback_settings: memory:`` section of the proxy's config.yaml and
from environment variables prefixed ``LITELLM_MEMORY_``, a group and its key joined by ``__``
(``LITELLM_MEMORY_RECALL__K``; ``REDIS_URL`` is read too); values in config.yaml win over the
environment. Unknown keys are rejected.

The settings are grouped (``redis``, ``storage``, ``window``, ``recall``, ``memories``,
``summary``, ``extraction``, ``write_buffer``, ``identity``, ``requests``); ``timezone`` and
``gc_freeze`` stand alone. Every size limit starts with ``max_`` and every unit is a suffix
(``_chars``, ``_messages``, ``_items``, ``_s``, ``_days``). The flat keys of earlier versions
(:data:`FLAT_KEYS`: ``recall_k``, ``LITELLM_MEMORY_RECALL_K``, ...) still work: each is moved to its
place in a group, with one warning naming the new key; the new key wins where both are set.

Per-alias settings live in ``model_info: memory:`` of a model alias in ``model_list``; an alias
without that block (or with ``enabled: false``) is passed through untouched. Its ``window`` and
``recall`` groups override the global ones for that alias, key by key.

Example::

    model_list:
      - model_name: demo
        litellm_params: {model: openai/demo, api_base: "http://127.0.0.1:4010/v1"}
        model_info:
          memory: {enabled: true, system_prompt: "You are Mira.", window: {max_chars: 6000}}
    callback_settings:
      memory: {storage: {key_prefix: mem, retention_days: 30}}
"""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from litellm_memory_hook.core.prompt import PromptWording
from litellm_memory_hook.errors import ConfigError
from litellm_memory_hook.extraction.prompt import ExtractionWording

ENV_PREFIX = "LITELLM_MEMORY_"
#: joins a group and its key in an environment variable: ``LITELLM_MEMORY_RECALL__K``.
ENV_DELIMITER = "__"
#: the largest time setting (seconds): a day; infinite and NaN values are refused too (a time
#: becomes epoch milliseconds as an integer, and Redis takes no larger TTL than it can hold).
DAY_S = 86_400
_KEY_PREFIX_PATTERN = r"^[A-Za-z0-9_.-]{1,32}$"

logger = logging.getLogger("litellm_memory_hook")

_GROUP = ConfigDict(extra="forbid", allow_inf_nan=False)


def _valid_patterns(value: list[str] | None) -> list[str] | None:
    import regex

    for pattern in value or ():
        try:
            regex.compile(pattern)
        except regex.error as exc:
            raise ValueError(f"bad pattern {pattern!r}: {exc}") from exc
    return value


class RedisSettings(BaseModel):
    """The Redis server and how its failures are met (``redis:``).

    Attributes:
        url: Redis URL (``redis://``, ``rediss://`` or ``unix://``). Env:
            ``LITELLM_MEMORY_REDIS__URL``, else ``REDIS_URL``. Default
            ``redis://127.0.0.1:6379/0``; ``serve`` points it at an embedded Redis when unset.
        cluster: ``redis.url`` names a node of a Redis Cluster (any one; the others are
            discovered); a ``redis://`` or ``rediss://`` URL with database 0. See
            :mod:`litellm_memory_hook.store.client`.
        timeout_s: socket timeout of Redis calls (seconds); a slower Redis fails open.
        breaker_s: after a Redis failure, requests skip memory for this long (seconds) instead
            of each waiting for the timeout; writes go to the background retry.
        refusal_log_s: a Redis refusal (a missing ACL permission, the memory limit, a key of the
            wrong type) is logged once per this many seconds per cause, with how many more came
            since the last line (seconds).
        sentinel_nodes: the Redis Sentinels to ask for the master (``host:port`` each; a list, a
            comma-separated string, or LiteLLM's ``[["host", port], ...]``); set, the client
            follows failovers and ``redis.url`` gives only the master's user, password, database
            and TLS (``rediss://``), not its address. Env:
            ``LITELLM_MEMORY_REDIS__SENTINEL_NODES``, else ``REDIS_SENTINEL_NODES`` (as LiteLLM's
            cache reads it).
        service_name: the master's name as the Sentinels monitor it (``mymaster``); required
            with ``redis.sentinel_nodes``. Env: ``LITELLM_MEMORY_REDIS__SERVICE_NAME``, else
            ``REDIS_SERVICE_NAME``.
        sentinel_password: the Sentinels' own password (``requirepass`` of the Sentinels; none by
            default). Env: ``LITELLM_MEMORY_REDIS__SENTINEL_PASSWORD``, else
            ``REDIS_SENTINEL_PASSWORD``.
    """

    model_config = _GROUP

    url: str = "redis://127.0.0.1:6379/0"
    cluster: bool = False
    timeout_s: float = Field(default=0.5, gt=0, le=60)
    breaker_s: float = Field(default=5.0, ge=0, le=3600)
    refusal_log_s: float = Field(default=60.0, gt=0, le=DAY_S)
    sentinel_nodes: Annotated[list[str], NoDecode] = Field(default_factory=list)
    service_name: str | None = None
    sentinel_password: str | None = None

    @field_validator("url")
    @classmethod
    def _redis_scheme(cls, value: str) -> str:
        # redis-py's own error for this comes at the first connection; the value is not echoed
        # (a URL may hold a password)
        if not value.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError(
                "must start with redis://, rediss:// or unix:// (e.g. redis://127.0.0.1:6379/0)"
            )
        if not value.startswith("unix://"):
            from urllib.parse import urlsplit

            try:
                port = urlsplit(value).port  # ValueError: not a number, or out of 0-65535
            except ValueError:
                raise ValueError("has a port that is not a number from 1 to 65535") from None
            if port == 0:
                raise ValueError("has port 0: name the port Redis listens on (e.g. 6379)")
        return value

    @field_validator("sentinel_nodes", mode="before")
    @classmethod
    def _sentinel_nodes(cls, value: object) -> list[str]:
        import json

        if value is None or value == "":
            return []
        if isinstance(value, str):
            text = value.strip()
            value = json.loads(text) if text.startswith("[") else text.split(",")
        if not isinstance(value, list | tuple):
            raise ValueError('must be a list of host:port (or LiteLLM\'s [["host", port]])')
        nodes = []
        for node in value:
            if isinstance(node, list | tuple) and len(node) == 2:
                node = f"{node[0]}:{node[1]}"
            host, _, port = str(node).strip().rpartition(":")
            if not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ValueError(f"{node!r} is not host:port (e.g. 10.0.0.5:26379)")
            nodes.append(f"{host}:{int(port)}")
        return nodes

    @property
    def sentinel(self) -> bool:
        """Sentinel is configured: the client asks the Sentinels for the master."""
        return bool(self.sentinel_nodes)


class StorageSettings(BaseModel):
    """What is kept in Redis, and for how long (``storage:``).

    Attributes:
        key_prefix: first part of every key (``mem`` gives ``mem:{t:u:c}:turns``).
        retention_days: TTL of every per-conversation key, refreshed on each write (days).
        max_messages: most messages kept per conversation; the oldest beyond it are deleted
            (with their recall-index entries) in batches of about 2%.
        max_message_chars: longest text stored for one message (characters); longer texts keep
            their end, as the window does.
    """

    model_config = _GROUP

    key_prefix: str = Field(default="mem", pattern=_KEY_PREFIX_PATTERN)
    retention_days: float = Field(default=30.0, gt=0, le=3650)
    max_messages: int = Field(default=50_000, ge=50, le=10_000_000)
    max_message_chars: int = Field(default=32_000, ge=1000, le=2_000_000)

    @property
    def retention_s(self) -> int:
        """The TTL in whole seconds."""
        return int(self.retention_days * 86400)


class WindowSettings(BaseModel):
    """The recent window: the conversation's last messages, as they were said (``window:``;
    docs/prompt.md#the-window).

    Attributes:
        max_chars: the window's budget in characters (8000).
        max_messages: the window's budget in messages (40).
    """

    model_config = _GROUP

    max_chars: int = Field(default=8000, ge=200, le=2_000_000)
    max_messages: int = Field(default=40, ge=1, le=1000)


class RecallSettings(BaseModel):
    """Old lines of the conversation brought back by relevance (``recall:``;
    docs/design.md#recall).

    Attributes:
        mode: ``budget`` (default): recall old lines by relevance until ``recall.max_chars`` or
            ``recall.max_k`` is reached, keeping a line only while it scores at least
            ``recall.min_share`` of the best; ``fixed``: the best ``recall.k`` lines (the seed's
            top 4).
        k: old lines recalled per request in the fixed mode (4); 0 turns recall off in both
            modes.
        max_chars: budget of the recalled lines as shown in the prompt (date label, speaker and
            text; characters), budgeted mode; 0 turns recall off.
        max_k: most lines recalled in the budgeted mode.
        min_share: in the budgeted mode, a line must score at least this share of the best
            line's score (0 to 1).
        scope: ``conversation`` (default): lines of this conversation only; ``user``: also the
            lines of the user's other conversations in the same alias namespace (a frontend that
            opens a new chat id per chat), labelled with their chat.
        max_user_chats: with ``recall.scope: user``, the most other conversations read per
            request (the most recently updated); bounds the cost of a request.
    """

    model_config = _GROUP

    mode: Literal["budget", "fixed"] = "budget"
    k: int = Field(default=4, ge=0, le=20)
    max_chars: int = Field(default=2500, ge=0, le=50_000)
    max_k: int = Field(default=16, ge=1, le=64)
    min_share: float = Field(default=0.1, ge=0.0, le=1.0)
    scope: Literal["conversation", "user"] = "conversation"
    max_user_chats: int = Field(default=20, ge=1, le=500)


class MemoriesSettings(BaseModel):
    """The memory set: extracted and pinned memories, kept per user (or conversation) and shown
    in the prompt (``memories:``; docs/memories.md).

    Attributes:
        max_chars: budget of the memories section of the prompt (characters).
        max_pinned_chars: budget of the pinned-memories section of the prompt (characters);
            pinned memories are never displaced by extracted ones.
        max_items: most extracted memories kept per memory set (a few hundred: more are stored
            than fit in a prompt; the prompt picks by relevance).
        max_item_chars: longest extracted memory (characters; longer ones are cut).
        max_pinned_items: most pinned memories per memory set.
        max_pinned_item_chars: longest pinned memory a user may write (characters; longer is a
            400).
        max_history_items: replaced and deleted memories kept per memory set, newest first
            (older entries are dropped), restorable through the memory API and
            ``litellm-memory memories restore``.
    """

    model_config = _GROUP

    max_chars: int = Field(default=3000, ge=0, le=100_000)
    max_pinned_chars: int = Field(default=2000, ge=0, le=100_000)
    max_items: int = Field(default=500, ge=1, le=5000)
    max_item_chars: int = Field(default=300, ge=20, le=5000)
    max_pinned_items: int = Field(default=100, ge=1, le=5000)
    max_pinned_item_chars: int = Field(default=500, ge=1, le=20_000)
    max_history_items: int = Field(default=200, ge=1, le=10_000)


class SummarySettings(BaseModel):
    """The conversation's running summary, written by extraction (``summary:``).

    Attributes:
        max_chars: budget of the summary section of the prompt, and the longest summary an
            extraction job keeps (characters; a longer summary keeps its start).
        min_kept_share: a new summary is taken only if it keeps at least this share of the old
            summary's facts (its distinct content words, names counted twice; 0 to 1; 0 turns the
            check off); else the old summary stays (counted as ``summaries_refused``). Checked
            only when the old summary holds 5 such words.
    """

    model_config = _GROUP

    max_chars: int = Field(default=2000, ge=0, le=100_000)
    min_kept_share: float = Field(default=0.35, ge=0.0, le=1.0)


class ExtractionSettings(BaseModel):
    """Extraction jobs: a model reads new messages and updates the memory set and the summary
    (``extraction:``).

    Attributes:
        enabled: run extraction jobs at all (the due set is still written).
        worker_in_proxy: the proxy runs an extraction worker as a background task; set false
            when separate ``litellm-memory worker`` processes do the work.
        every_messages: messages since the last extraction that make a conversation due.
        quiet_s: seconds of quiet after which a conversation with new messages is due.
        timeout_s: timeout of one extraction model call (seconds).
        lease_s: a job's lease (seconds): a worker killed mid-job loses it after this long and
            another worker runs the job again; at least twice ``extraction.timeout_s`` plus 30 s
            is used (the longest a job may take).
        poll_s: how often an idle worker looks at the due set (seconds).
        heartbeat_s: how often a running worker writes its heartbeat to Redis (seconds); it
            expires 3 heartbeats after the last, so a killed worker stops being reported alive
            after that long (:mod:`litellm_memory_hook.store.workers`).
        sweep_s: how often a worker re-schedules conversations whose cursor lags behind their
            last message (a lost schedule), by SCAN (seconds; 0 = never).
        max_messages_chars: most characters of new messages sent in one job; a longer backlog is
            extracted in several jobs, oldest first.
        max_memories_chars: most characters of stored memories shown to the model in one job
            (chosen by shared rare words with the new messages, then the newest); memories not
            shown are kept as they are.
        max_removed_share: most extracted memories one extraction job may delete or replace (an
            updated fact counts as a replacement; so does an old memory made room for past
            ``memories.max_items``), as a share of the memory set it read, rounded down (0.2: a
            set of 24 loses at most 4 to one job); a job whose reply explicitly updates or
            deletes a fact may always remove at least 1. A memory the reply leaves out is never
            deleted. What is removed is kept in the set's history, restorable.
        base_url: OpenAI-compatible base URL the standalone worker calls (default: the proxy
            itself, ``http://127.0.0.1:4000/v1``; left at that default, a worker given the data
            folder of a running ``serve`` calls that serve's proxy port instead).
        api_key: the key the standalone worker sends (default: the environment's
            ``LITELLM_MASTER_KEY``).
        max_attempts: tries of one extraction job whose model call fails or answers nothing
            usable (4); then it is given up (counted as ``jobs_given_up``, one warning line) until
            the conversation's next message.
        backoff_s: seconds before the second try (30); each further try waits twice as long, up
            to ``extraction.max_backoff_s``.
        auth_backoff_s: seconds before the second try when the model answered 401, 403 or 404
            (600: a key or a model name is fixed by a person, not by waiting).
        max_backoff_s: longest wait between two tries (seconds; 3600).
    """

    model_config = _GROUP

    enabled: bool = True
    worker_in_proxy: bool = True
    every_messages: int = Field(default=12, ge=1)
    quiet_s: float = Field(default=20.0, ge=0, le=DAY_S)
    timeout_s: float = Field(default=60.0, gt=0, le=600)
    lease_s: float = Field(default=120.0, gt=0, le=3600)
    poll_s: float = Field(default=1.0, gt=0, le=60)
    heartbeat_s: float = Field(default=5.0, gt=0, le=300)
    sweep_s: float = Field(default=600.0, ge=0, le=DAY_S)
    max_messages_chars: int = Field(default=24_000, ge=500, le=2_000_000)
    max_memories_chars: int = Field(default=6000, ge=0, le=1_000_000)
    max_removed_share: float = Field(default=0.2, ge=0.0, le=1.0)
    base_url: str = "http://127.0.0.1:4000/v1"
    api_key: str | None = None
    max_attempts: int = Field(default=4, ge=1, le=50)
    backoff_s: float = Field(default=30.0, ge=0, le=DAY_S)
    auth_backoff_s: float = Field(default=600.0, ge=0, le=DAY_S)
    max_backoff_s: float = Field(default=3600.0, ge=0, le=DAY_S)


class WriteBufferSettings(BaseModel):
    """Turns the proxy holds while Redis does not take them (``write_buffer:``;
    docs/operations.md#restarts-and-outages).

    Attributes:
        max_turns: turns held in the proxy while Redis is down (the oldest is dropped past it,
            counted as ``writes_lost``).
        max_age_s: a turn waiting longer than this for Redis is dropped (seconds).
        refused_retry_s: a write Redis refused is set aside in its conversation and tried again
            after this long (seconds); other conversations' writes go on meanwhile. It is
            dropped, counted and logged after ``write_buffer.max_age_s`` like any held write.
    """

    model_config = _GROUP

    max_turns: int = Field(default=10_000, ge=1, le=1_000_000)
    max_age_s: float = Field(default=600.0, gt=0, le=DAY_S)
    refused_retry_s: float = Field(default=30.0, gt=0, le=DAY_S)


class IdentitySettings(BaseModel):
    """Who a request is from and which conversation it belongs to (``identity:``;
    docs/clients.md).

    Attributes:
        user_header: request header that carries the user id when the body has no ``user``
            (lower case, e.g. ``x-end-user-id``); ``None`` reads only the body.
        conversation_header: request header that carries the conversation id when the body's
            metadata has none (Open WebUI forwards ``x-openwebui-chat-id``); checked after
            ``x-litellm-session-id``.
        claude_code_user: how Claude Code's user id (Anthropic's ``metadata.user_id``, which
            names the device, the account and the session) maps to a user: ``account`` (default:
            its account uuid, else its device hash; the session is the conversation), ``device``
            (its device hash; the session is the conversation) or ``whole`` (the value as sent: a
            new user every session). :func:`litellm_memory_hook.proxy.identity.claude_code_ids`.
    """

    model_config = _GROUP

    user_header: str | None = None
    conversation_header: str | None = None
    claude_code_user: Literal["account", "device", "whole"] = "account"

    @field_validator("user_header", "conversation_header")
    @classmethod
    def _lower_header(cls, value: str | None) -> str | None:
        return value.lower() if value else None


class RequestsSettings(BaseModel):
    """Requests that get memory but are not stored, and regenerates (``requests:``).

    Attributes:
        side_request_patterns: regular expressions that mark a frontend's side request (title,
            tags, follow-ups...: no memory, not stored), matched on the last user message;
            ``None`` uses the defaults of :mod:`litellm_memory_hook.core.side_requests`, ``[]``
            turns the check off.
        temporary_conversation_patterns: regular expressions (searched, case-sensitive) on the
            request's conversation id that mark a temporary chat: memory is read, nothing is
            stored or extracted from it (Open WebUI's temporary chats have ids starting with
            ``local:``, the default); ``[]`` turns the check off.
        regenerate_window_s: for clients that send only the new message, the same user text sent
            again within this many seconds of its reply counts as a regenerate (seconds).
    """

    model_config = _GROUP

    side_request_patterns: list[str] | None = None
    temporary_conversation_patterns: list[str] = Field(default_factory=lambda: [r"\Alocal:"])
    regenerate_window_s: float = Field(default=300.0, ge=0, le=DAY_S)

    @field_validator("side_request_patterns", "temporary_conversation_patterns")
    @classmethod
    def _valid(cls, value: list[str] | None) -> list[str] | None:
        return _valid_patterns(value)

    @property
    def side_patterns(self) -> tuple[str, ...]:
        """The side-request patterns in force (the defaults when not configured)."""
        from litellm_memory_hook.core.side_requests import DEFAULT_SIDE_REQUEST_PATTERNS

        if self.side_request_patterns is None:
            return DEFAULT_SIDE_REQUEST_PATTERNS
        return tuple(self.side_request_patterns)


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

#: variables without the ``LITELLM_MEMORY_`` prefix that are read too (LiteLLM reads them as
#: well), after the prefixed ones; they are not deprecated.
GENERIC_ENV: Mapping[str, str] = {
    "REDIS_URL": "redis.url",
    "REDIS_SENTINEL_NODES": "redis.sentinel_nodes",
    "REDIS_SERVICE_NAME": "redis.service_name",
    "REDIS_SENTINEL_PASSWORD": "redis.sentinel_password",
}

#: log the deprecation warnings too (set while the proxy or the CLI reads the operator's
#: settings, so that the operator sees them; a :class:`DeprecationWarning` alone is hidden).
_LOG_DEPRECATIONS: ContextVar[bool] = ContextVar("log_deprecations", default=False)
_LOGGED: set[str] = set()


def env_name(path: str) -> str:
    """The environment variable of a setting: ``recall.k`` -> ``LITELLM_MEMORY_RECALL__K``,
    ``timezone`` -> ``LITELLM_MEMORY_TIMEZONE``."""
    return ENV_PREFIX + path.upper().replace(".", ENV_DELIMITER)


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


class MemorySettings(BaseSettings):
    """Global settings of the memory hook, in groups; each group's keys are in its own table.

    Attributes:
        redis: the Redis server and how its failures are met (:class:`RedisSettings`).
        storage: what is kept in Redis, and for how long (:class:`StorageSettings`).
        window: the recent window's budgets (:class:`WindowSettings`).
        recall: old lines brought back by relevance (:class:`RecallSettings`).
        memories: the memory set: its limits and its budgets in the prompt
            (:class:`MemoriesSettings`).
        summary: the conversation's running summary (:class:`SummarySettings`).
        extraction: extraction jobs and their workers (:class:`ExtractionSettings`).
        write_buffer: turns held while Redis does not take them (:class:`WriteBufferSettings`).
        identity: who a request is from, which conversation it is (:class:`IdentitySettings`).
        requests: side requests, temporary chats and regenerates (:class:`RequestsSettings`).
        timezone: IANA name used to date recalled lines when the request gives none
            (``Asia/Kolkata``); an unknown name is a configuration error, as it is a 400 in a
            request's ``metadata.timezone``; empty means UTC.
        gc_freeze: at the first memory request, collect once and move every object the proxy
            made while it started into Python's permanent generation (:func:`gc.freeze`), so
            full collections stop walking LiteLLM's ~800,000 startup objects. Measured by
            ``bench proxy`` (32 clients, 4,500 requests): the proxy's longest collection fell
            from 297 ms to 18 ms and its collection time from 4.2 s to 1.6 s. The first request
            waits once for the collection (~0.3 s). It changes the whole proxy process, so it
            is off unless set (the shipped config.yaml sets it).
    """

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter=ENV_DELIMITER,
        extra="forbid",
        allow_inf_nan=False,
    )

    redis: RedisSettings = Field(default_factory=RedisSettings)
    storage: StorageSettings = Field(default_factory=StorageSettings)
    window: WindowSettings = Field(default_factory=WindowSettings)
    recall: RecallSettings = Field(default_factory=RecallSettings)
    memories: MemoriesSettings = Field(default_factory=MemoriesSettings)
    summary: SummarySettings = Field(default_factory=SummarySettings)
    extraction: ExtractionSettings = Field(default_factory=ExtractionSettings)
    write_buffer: WriteBufferSettings = Field(default_factory=WriteBufferSettings)
    identity: IdentitySettings = Field(default_factory=IdentitySettings)
    requests: RequestsSettings = Field(default_factory=RequestsSettings)
    timezone: str = "UTC"
    gc_freeze: bool = False

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """The file (keyword arguments), then ``LITELLM_MEMORY_<GROUP>__<KEY>``, then the flat
        variables of earlier versions and ``REDIS_URL``..., each with its flat keys grouped."""
        return (
            _GroupedInit(settings_cls, init_settings),
            env_settings,
            _FlatEnv(settings_cls),
            dotenv_settings,
            file_secret_settings,
        )

    @model_validator(mode="before")
    @classmethod
    def _flat_keys(cls, data: Any) -> Any:
        # model_validate() and the like come here without the sources above
        return grouped(data) if isinstance(data, Mapping) else data

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        from litellm_memory_hook.core.dates import is_zone

        # empty (or blank) has always meant UTC; anything else must be a zone this system knows
        if value.strip() and not is_zone(value):
            raise ValueError("must be an IANA time zone name such as Asia/Kolkata or UTC")
        return value


#: the groups of :class:`MemorySettings` by name.
GROUPS: Mapping[str, type[BaseModel]] = {
    name: info.annotation
    for name, info in MemorySettings.model_fields.items()
    if isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel)
}

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


def _env_path(variable: str) -> str | None:
    """The setting a ``LITELLM_MEMORY_*`` variable sets (``recall.k``), else ``None``."""
    if not variable.upper().startswith(ENV_PREFIX):
        return None
    rest = variable[len(ENV_PREFIX) :].lower()
    if ENV_DELIMITER in rest:
        return rest.replace(ENV_DELIMITER, ".", 1)
    return FLAT_KEYS.get(rest, rest)


def _file_paths(section: Mapping[Any, Any]) -> set[str]:
    """The settings a ``callback_settings.memory`` section sets (``recall.k``, ``timezone``)."""
    found = set()
    for key, value in section.items():
        name = str(key).lower()
        if name in FLAT_KEYS:
            found.add(FLAT_KEYS[name])
        elif name in GROUPS and isinstance(value, Mapping):
            found.update(f"{name}.{k}" for k in value)
        else:
            found.add(name)
    return found


def shadowed_env(callback_settings: dict[str, Any] | None) -> list[str]:
    """The ``LITELLM_MEMORY_*`` variables set in the environment for a setting that
    ``callback_settings['memory']`` also sets (either spelling, new or flat): the file wins, so
    they do nothing."""
    section = (callback_settings or {}).get("memory") or {}
    if not isinstance(section, dict):
        return []
    in_file = _file_paths(section)
    return sorted({k.upper() for k in os.environ if _env_path(k) in in_file})


def known_env() -> set[str]:
    """Every ``LITELLM_MEMORY_*`` variable a setting reads: ``<GROUP>__<KEY>``, a whole group
    as JSON (``<GROUP>``), a key outside the groups and the flat keys of :data:`FLAT_KEYS`."""
    names = {env_name(name) for name in MemorySettings.model_fields}
    names.update(env_name(f"{g}.{k}") for g, model in GROUPS.items() for k in model.model_fields)
    names.update(f"{ENV_PREFIX}{old}".upper() for old in FLAT_KEYS)
    return names


def setting_origin(section: Mapping[Any, Any] | None, path: str) -> str | None:
    """Where the setting ``path`` (``recall.k``; ``timezone``; a whole group: ``recall``) is set,
    named as it was set: ``callback_settings.memory.<key>`` as the file spells it (the group's
    key first, then the flat key), else its environment variable (``LITELLM_MEMORY_RECALL__K``,
    then the flat ``LITELLM_MEMORY_RECALL_K``, then :data:`GENERIC_ENV`: ``REDIS_URL``);
    ``None`` when nothing sets it."""
    section = section or {}
    group, _, name = path.partition(".")
    olds = [old for old, new in FLAT_KEYS.items() if new == path]
    written = _key_in(section, group)
    if written is not None and not name:
        return f"callback_settings.memory.{written}"
    if written is not None and isinstance(section[written], Mapping) and name in section[written]:
        return f"callback_settings.memory.{written}.{name}"
    for old in olds:
        if (written := _key_in(section, old)) is not None:
            return f"callback_settings.memory.{written}"
    present = {k.upper() for k in os.environ}
    candidates = [env_name(path), *(f"{ENV_PREFIX}{old}".upper() for old in olds)]
    candidates += [generic for generic, new in GENERIC_ENV.items() if new == path]
    return next((c for c in candidates if c in present), None)


#: settings whose value an error message does not repeat (a URL may hold a password).
_UNSHOWN_VALUES = frozenset(
    {"redis.url", "redis.sentinel_password", "extraction.api_key", "extraction.base_url"}
)


def _shown_value(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def describe_invalid(
    exc: ValidationError,
    name: Callable[[tuple[str | int, ...]], str],
    unshown: frozenset[str] = _UNSHOWN_VALUES,
) -> str:
    """A validation error of the settings or of an alias block on one line, one clause per
    problem: ``invalid setting NAME ('abc'): Input should be a valid integer``, several joined
    by ``; `` after ``invalid settings:``. ``name`` turns an error's location into what the
    operator wrote (a config key or an environment variable). Values of ``unshown`` settings
    (``group.key``; :data:`_UNSHOWN_VALUES`), and of a group that holds one, are not
    repeated."""
    problems = []
    for error in exc.errors():
        loc = tuple(error["loc"])
        where = name(loc)
        if error["type"] == "extra_forbidden":
            problems.append(f"{where}: not a known setting")
            continue
        message = " ".join(str(error["msg"]).removeprefix("Value error, ").split())
        path = ".".join(str(p).lower() for p in loc[:2])
        hidden = bool(path) and any(u == path or u.startswith(f"{path}.") for u in unshown)
        shown = "" if hidden or error["type"] == "missing" else f" ({_shown_value(error['input'])})"
        problems.append(f"{where}{shown}: {message}")
    if len(problems) == 1:
        return f"invalid setting {problems[0]}"
    return "invalid settings: " + "; ".join(problems)


def _suffix(loc: tuple[str | int, ...]) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc)


def _dotted(loc: tuple[str | int, ...]) -> str:
    return _suffix(loc).removeprefix(".")


def _settings_source(section: Mapping[str, Any]) -> Callable[[tuple[str | int, ...]], str]:
    """Where a global setting came from, as :func:`setting_origin` names it: the file's key as
    the file spells it, else its environment variable."""

    def name(loc: tuple[str | int, ...]) -> str:
        if not loc:
            return "callback_settings.memory"
        if len(loc) >= 2 and isinstance(loc[1], str):
            where = setting_origin(section, f"{loc[0]}.{loc[1]}")
            if where is not None:
                return where + _suffix(loc[2:])
        where = setting_origin(section, str(loc[0]))
        if where is not None:
            return where + _suffix(loc[1:])
        return "callback_settings.memory." + _dotted(loc)

    return name


def load_settings(callback_settings: dict[str, Any] | None = None) -> MemorySettings:
    """Build the global settings from ``callback_settings['memory']`` and the environment.

    A key set in the file wins over its ``LITELLM_MEMORY_*`` variable (:func:`shadowed_env`
    lists such variables; ``doctor`` warns about them); the environment fills the keys the file
    leaves out. A flat key of earlier versions (:data:`FLAT_KEYS`) is logged once, naming its
    new key.

    Raises:
        ConfigError: unknown keys (in the section or as ``LITELLM_MEMORY_*`` environment
            variables) or invalid values: one line naming each bad setting as the operator set
            it (``callback_settings.memory.KEY`` or the environment variable), its value and
            what is expected (:func:`describe_invalid`).
    """
    section = (callback_settings or {}).get("memory") or {}
    if not isinstance(section, dict):
        raise ConfigError("callback_settings.memory must be a mapping")
    known = known_env()
    unknown = sorted(
        k for k in os.environ if k.upper().startswith(ENV_PREFIX) and k.upper() not in known
    )
    if unknown:
        raise ConfigError(f"unknown environment variable(s): {', '.join(unknown)}")
    token = _LOG_DEPRECATIONS.set(True)
    try:
        return MemorySettings(**grouped(section, where="callback_settings.memory."))
    except ValidationError as exc:
        raise ConfigError(describe_invalid(exc, _settings_source(section))) from exc
    finally:
        _LOG_DEPRECATIONS.reset(token)


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
