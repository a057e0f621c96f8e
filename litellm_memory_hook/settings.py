"""Configuration: one global settings model and the per-alias block.

Global settings come from the ``callback_settings: memory:`` section of the proxy's config.yaml and
from environment variables prefixed ``LITELLM_MEMORY_`` (``REDIS_URL`` is read too); values in
config.yaml win over the environment. Unknown keys are rejected.

Per-alias settings live in ``model_info: memory:`` of a model alias in ``model_list``; an alias
without that block (or with ``enabled: false``) is passed through untouched. Budget fields there
override the global ones for that alias.

Example::

    model_list:
      - model_name: demo
        litellm_params: {model: openai/demo, api_base: "http://127.0.0.1:4010/v1"}
        model_info:
          memory: {enabled: true, system_prompt: "You are Mira.", recent_chars: 6000}
    callback_settings:
      memory: {key_prefix: mem, retention_days: 30}
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
)
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from litellm_memory_hook.core.prompt import PromptWording
from litellm_memory_hook.errors import ConfigError
from litellm_memory_hook.extraction.prompt import ExtractionWording

ENV_PREFIX = "LITELLM_MEMORY_"
#: the largest time setting (seconds): a day; infinite and NaN values are refused too (a time
#: becomes epoch milliseconds as an integer, and Redis takes no larger TTL than it can hold).
DAY_S = 86_400
_KEY_PREFIX_PATTERN = r"^[A-Za-z0-9_.-]{1,32}$"


class MemorySettings(BaseSettings):
    """Global settings of the memory hook.

    Attributes:
        redis_url: Redis URL (``redis://``, ``rediss://`` or ``unix://``). Env:
            ``LITELLM_MEMORY_REDIS_URL``, else ``REDIS_URL``. Default
            ``redis://127.0.0.1:6379/0``; ``serve`` points it at an embedded Redis when unset.
        redis_cluster: ``redis_url`` names a node of a Redis Cluster (any one; the others are
            discovered); a ``redis://`` or ``rediss://`` URL with database 0. Env:
            ``LITELLM_MEMORY_REDIS_CLUSTER``. See :mod:`litellm_memory_hook.store.client`.
        key_prefix: first part of every key (``mem`` gives ``mem:{t:u:c}:turns``).
        recent_chars: recent-window budget in characters (8000; docs/prompt.md#the-window).
        recent_messages: recent-window budget in messages (40; docs/prompt.md#the-window).
        retention_days: TTL of every per-conversation key, refreshed on each write (days).
        user_header: request header that carries the user id when the body has no ``user``
            (lower case, e.g. ``x-end-user-id``); ``None`` reads only the body.
        conversation_header: request header that carries the conversation id when the body's
            metadata has none (Open WebUI forwards ``x-openwebui-chat-id``); checked after
            ``x-litellm-session-id``.
        claude_code_user: how Claude Code's user id (Anthropic's ``metadata.user_id``, which
            names the device, the account and the session) maps to a user:
            ``account`` (default: its account uuid, else its device hash; the session is the
            conversation), ``device`` (its device hash; the session is the conversation) or
            ``whole`` (the value as sent: a new user every session).
            :func:`litellm_memory_hook.proxy.identity.claude_code_ids`.
        write_buffer_max: turns held in the proxy while Redis is down (the oldest is dropped
            past it, counted as ``writes_lost``).
        write_buffer_max_age_s: a turn waiting longer than this for Redis is dropped (seconds).
        side_request_patterns: regular expressions that mark a frontend's side request (title,
            tags, follow-ups...: no memory, not stored), matched on the last user message;
            ``None`` uses the defaults of :mod:`litellm_memory_hook.core.side_requests`,
            ``[]`` turns the check off.
        regenerate_window_s: for clients that send only the new message, the same user text sent
            again within this many seconds of its reply counts as a regenerate (seconds).
        extraction_every: messages since the last extraction that make a conversation due.
        extraction_quiet_s: seconds of quiet after which a conversation with new messages is due.
        redis_timeout_s: socket timeout of Redis calls (seconds); a slower Redis fails open.
        gc_freeze: at the first memory request, collect once and move every object the proxy
            made while it started into Python's permanent generation (:func:`gc.freeze`), so
            full collections stop walking LiteLLM's ~800,000 startup objects. Measured by
            ``bench proxy`` (32 clients, 4,500 requests): the proxy's longest collection fell
            from 297 ms to 18 ms and its collection time from 4.2 s to 1.6 s. The first request
            waits once for the collection (~0.3 s). It changes the whole proxy process, so it
            is off unless set (the shipped config.yaml sets it).
        redis_breaker_s: after a Redis failure, requests skip memory for this long (seconds)
            instead of each waiting for the timeout; writes go to the background retry.
        stored_text_chars: longest text stored for one message (characters); longer texts keep
            their end, as the window does.
        timezone: IANA name used to date recalled lines when the request gives none
            (``Asia/Kolkata``); an unknown name is a configuration error, as it is a 400 in a
            request's ``metadata.timezone``; empty means UTC.
        recall_mode: ``budget`` (default): recall old lines by relevance until ``recall_chars``
            or ``recall_k_max`` is reached, keeping a line only while it scores at least
            ``recall_min_share`` of the best; ``fixed``: the best ``recall_k`` lines (the seed's
            top 4).
        recall_k: old lines recalled per request in the fixed mode (4; docs/design.md#recall);
            0 turns recall off in both modes.
        recall_chars: budget of the recalled lines as shown in the prompt (date label, speaker
            and text; characters), budgeted mode; 0 turns recall off.
        recall_k_max: most lines recalled in the budgeted mode.
        recall_min_share: in the budgeted mode, a line must score at least this share of the
            best line's score (0 to 1).
        recall_scope: ``conversation`` (default): lines of this conversation only; ``user``:
            also the lines of the user's other conversations in the same alias namespace
            (a frontend that opens a new chat id per chat), labelled with their chat.
        recall_user_chats: with ``recall_scope: user``, the most other conversations read per
            request (the most recently updated); bounds the cost of a request.
        max_stored_messages: most turns kept per conversation; the oldest beyond it are deleted
            (with their recall-index entries) in batches of about 2%.
        pinned_chars / memory_chars / summary_chars: character budgets of the pinned-memory,
            memory and summary sections; pinned memories are never displaced by extracted ones.
        extraction_enabled: run extraction jobs at all (the due set is still written).
        worker_in_proxy: the proxy runs an extraction worker as a background task; set false
            when separate ``litellm-memory worker`` processes do the work.
        extraction_timeout_s: timeout of one extraction model call (seconds).
        extraction_lease_s: a job's lease (seconds): a worker killed mid-job loses it after
            this long and another worker runs the job again; at least twice
            ``extraction_timeout_s`` plus 30 s is used (the longest a job may take).
        extraction_poll_s: how often an idle worker looks at the due set (seconds).
        extraction_heartbeat_s: how often a running worker writes its heartbeat to Redis
            (seconds); it expires 3 heartbeats after the last, so a killed worker stops being
            reported alive after that long (:mod:`litellm_memory_hook.store.workers`).
        extraction_sweep_s: how often a worker re-schedules conversations whose cursor lags
            behind their last message (a lost schedule), by SCAN (seconds; 0 = never).
        extraction_lines_chars: most characters of new messages sent in one job; a longer
            backlog is extracted in several jobs, oldest first.
        extraction_memory_chars: most characters of stored memories shown to the model in one
            job (chosen by shared rare words with the new messages, then the newest); memories
            not shown are kept as they are.
        max_memories: most extracted memories kept per memory set (a few hundred: more are
            stored than fit in a prompt; the prompt picks by relevance).
        memory_item_chars: longest extracted memory (characters; longer ones are cut).
        max_pinned: most pinned memories per memory set.
        pinned_item_chars: longest pinned memory a user may write (characters; longer is a 400).
        extraction_base_url: OpenAI-compatible base URL the standalone worker calls (default:
            the proxy itself, ``http://127.0.0.1:4000/v1``; left at that default, a worker given
            the data folder of a running ``serve`` calls that serve's proxy port instead).
        extraction_api_key: the key the standalone worker sends (default: the environment's
            ``LITELLM_MASTER_KEY``).
        extraction_max_attempts: tries of one extraction job whose model call fails or
            answers nothing usable (4); then it is given up (counted as ``jobs_given_up``, one
            warning line) until the conversation's next message.
        extraction_backoff_s: seconds before the second try (30); each further try waits twice
            as long, up to ``extraction_backoff_max_s``.
        extraction_auth_backoff_s: seconds before the second try when the model answered 401,
            403 or 404 (600: a key or a model name is fixed by a person, not by waiting).
        extraction_backoff_max_s: longest wait between two tries (seconds; 3600).
        redis_refusal_log_s: a Redis refusal (a missing ACL permission, the memory limit, a key
            of the wrong type) is logged once per this many seconds per cause, with how many
            more came since the last line (seconds).
        refused_write_retry_s: a write Redis refused is set aside in its conversation and tried
            again after this long (seconds); other conversations' writes go on meanwhile. It is
            dropped, counted and logged after ``write_buffer_max_age_s`` like any held write.
        extraction_max_removed_share: most extracted memories one extraction job may delete or
            replace (an updated fact counts as a replacement; so does an old memory made room
            for past ``max_memories``), as a share of the memory set it read, rounded down
            (0.2: a set of 24 loses at most 4 to one job); a job whose reply explicitly updates
            or deletes a fact may always remove at least 1. A memory the reply leaves out is
            never deleted. What is removed is kept in the set's history, restorable.
        memory_history_max: replaced and deleted memories kept per memory set, newest first
            (older entries are dropped), restorable through the memory API and
            ``litellm-memory memories restore``.
        summary_min_kept_share: a new summary is taken only if it keeps at least this share of
            the old summary's facts (its distinct content words, names counted twice; 0 to 1;
            0 turns the check off); else the old summary stays (counted as
            ``summaries_refused``). Checked only when the old summary holds 5 such words.
        temporary_conversation_patterns: regular expressions (searched, case-sensitive) on the
            request's conversation id that mark a temporary chat: memory is read, nothing is
            stored or extracted from it (Open WebUI's temporary chats have ids starting with
            ``local:``, the default); ``[]`` turns the check off.
        redis_sentinel_nodes: the Redis Sentinels to ask for the master (``host:port`` each;
            a list, a comma-separated string, or LiteLLM's ``[["host", port], ...]``); set, the
            client follows failovers and ``redis_url`` gives only the master's user, password,
            database and TLS (``rediss://``), not its address. Env:
            ``LITELLM_MEMORY_REDIS_SENTINEL_NODES``, else ``REDIS_SENTINEL_NODES`` (as LiteLLM's
            cache reads it).
        redis_service_name: the master's name as the Sentinels monitor it (``mymaster``);
            required with ``redis_sentinel_nodes``. Env: ``LITELLM_MEMORY_REDIS_SERVICE_NAME``,
            else ``REDIS_SERVICE_NAME``.
        redis_sentinel_password: the Sentinels' own password (``requirepass`` of the
            Sentinels; none by default). Env: ``LITELLM_MEMORY_REDIS_SENTINEL_PASSWORD``, else
            ``REDIS_SENTINEL_PASSWORD``.
    """

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, extra="forbid", populate_by_name=True, allow_inf_nan=False
    )

    redis_url: str = Field(
        default="redis://127.0.0.1:6379/0",
        # Case-insensitive env lookup: "redis_url" also reads REDIS_URL, after the specific name.
        validation_alias=AliasChoices("LITELLM_MEMORY_REDIS_URL", "redis_url"),
    )
    redis_cluster: bool = False
    key_prefix: str = Field(default="mem", pattern=_KEY_PREFIX_PATTERN)
    recent_chars: int = Field(default=8000, ge=200, le=2_000_000)
    recent_messages: int = Field(default=40, ge=1, le=1000)
    retention_days: float = Field(default=30.0, gt=0, le=3650)
    user_header: str | None = None
    conversation_header: str | None = None
    claude_code_user: Literal["account", "device", "whole"] = "account"
    write_buffer_max: int = Field(default=10_000, ge=1, le=1_000_000)
    write_buffer_max_age_s: float = Field(default=600.0, gt=0, le=DAY_S)
    side_request_patterns: list[str] | None = None
    regenerate_window_s: float = Field(default=300.0, ge=0, le=DAY_S)
    extraction_every: int = Field(default=12, ge=1)
    extraction_quiet_s: float = Field(default=20.0, ge=0, le=DAY_S)
    redis_timeout_s: float = Field(default=0.5, gt=0, le=60)
    gc_freeze: bool = False
    redis_breaker_s: float = Field(default=5.0, ge=0, le=3600)
    stored_text_chars: int = Field(default=32_000, ge=1000, le=2_000_000)
    timezone: str = "UTC"
    recall_mode: Literal["budget", "fixed"] = "budget"
    recall_k: int = Field(default=4, ge=0, le=20)
    recall_chars: int = Field(default=2500, ge=0, le=50_000)
    recall_k_max: int = Field(default=16, ge=1, le=64)
    recall_min_share: float = Field(default=0.1, ge=0.0, le=1.0)
    recall_scope: Literal["conversation", "user"] = "conversation"
    recall_user_chats: int = Field(default=20, ge=1, le=500)
    max_stored_messages: int = Field(default=50_000, ge=50, le=10_000_000)
    pinned_chars: int = Field(default=2000, ge=0, le=100_000)
    memory_chars: int = Field(default=3000, ge=0, le=100_000)
    summary_chars: int = Field(default=2000, ge=0, le=100_000)
    extraction_enabled: bool = True
    worker_in_proxy: bool = True
    extraction_timeout_s: float = Field(default=60.0, gt=0, le=600)
    extraction_lease_s: float = Field(default=120.0, gt=0, le=3600)
    extraction_poll_s: float = Field(default=1.0, gt=0, le=60)
    extraction_heartbeat_s: float = Field(default=5.0, gt=0, le=300)
    extraction_sweep_s: float = Field(default=600.0, ge=0, le=DAY_S)
    extraction_lines_chars: int = Field(default=24_000, ge=500, le=2_000_000)
    extraction_memory_chars: int = Field(default=6000, ge=0, le=1_000_000)
    max_memories: int = Field(default=500, ge=1, le=5000)
    memory_item_chars: int = Field(default=300, ge=20, le=5000)
    max_pinned: int = Field(default=100, ge=1, le=5000)
    pinned_item_chars: int = Field(default=500, ge=1, le=20_000)
    extraction_base_url: str = "http://127.0.0.1:4000/v1"
    extraction_api_key: str | None = None
    extraction_max_attempts: int = Field(default=4, ge=1, le=50)
    extraction_backoff_s: float = Field(default=30.0, ge=0, le=DAY_S)
    extraction_auth_backoff_s: float = Field(default=600.0, ge=0, le=DAY_S)
    extraction_backoff_max_s: float = Field(default=3600.0, ge=0, le=DAY_S)
    redis_refusal_log_s: float = Field(default=60.0, gt=0, le=DAY_S)
    refused_write_retry_s: float = Field(default=30.0, gt=0, le=DAY_S)
    extraction_max_removed_share: float = Field(default=0.2, ge=0.0, le=1.0)
    memory_history_max: int = Field(default=200, ge=1, le=10_000)
    summary_min_kept_share: float = Field(default=0.35, ge=0.0, le=1.0)
    temporary_conversation_patterns: list[str] = Field(default_factory=lambda: [r"\Alocal:"])
    # Case-insensitive env lookup: each second alias also reads LiteLLM's own variable name.
    redis_sentinel_nodes: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        validation_alias=AliasChoices(
            "LITELLM_MEMORY_REDIS_SENTINEL_NODES", "redis_sentinel_nodes"
        ),
    )
    redis_service_name: str | None = Field(
        default=None,
        validation_alias=AliasChoices("LITELLM_MEMORY_REDIS_SERVICE_NAME", "redis_service_name"),
    )
    redis_sentinel_password: str | None = Field(
        default=None,
        validation_alias=AliasChoices(
            "LITELLM_MEMORY_REDIS_SENTINEL_PASSWORD", "redis_sentinel_password"
        ),
    )

    @field_validator("redis_sentinel_nodes", mode="before")
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
    def redis_sentinel(self) -> bool:
        """Sentinel is configured: the client asks the Sentinels for the master."""
        return bool(self.redis_sentinel_nodes)

    @field_validator("temporary_conversation_patterns")
    @classmethod
    def _valid_temporary_patterns(cls, value: list[str]) -> list[str]:
        import regex

        for pattern in value:
            try:
                regex.compile(pattern)
            except regex.error as exc:
                raise ValueError(f"bad pattern {pattern!r}: {exc}") from exc
        return value

    @field_validator("redis_url")
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

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        from litellm_memory_hook.core.dates import is_zone

        # empty (or blank) has always meant UTC; anything else must be a zone this system knows
        if value.strip() and not is_zone(value):
            raise ValueError("must be an IANA time zone name such as Asia/Kolkata or UTC")
        return value

    @field_validator("side_request_patterns")
    @classmethod
    def _valid_patterns(cls, value: list[str] | None) -> list[str] | None:
        import regex

        for pattern in value or ():
            try:
                regex.compile(pattern)
            except regex.error as exc:
                raise ValueError(f"bad pattern {pattern!r}: {exc}") from exc
        return value

    @property
    def side_patterns(self) -> tuple[str, ...]:
        """The side-request patterns in force (the defaults when not configured)."""
        from litellm_memory_hook.core.side_requests import DEFAULT_SIDE_REQUEST_PATTERNS

        if self.side_request_patterns is None:
            return DEFAULT_SIDE_REQUEST_PATTERNS
        return tuple(self.side_request_patterns)

    @field_validator("user_header", "conversation_header")
    @classmethod
    def _lower_header(cls, value: str | None) -> str | None:
        return value.lower() if value else None

    @property
    def retention_s(self) -> int:
        """The TTL in whole seconds."""
        return int(self.retention_days * 86400)


class AliasMemoryConfig(BaseModel):
    """The ``model_info.memory`` block of one model alias.

    Attributes:
        enabled: memory is on for this alias.
        required: requests without a usable user id get HTTP 400 instead of a pass-through.
        namespace: aliases with the same namespace share memory (default: the alias name).
        system_prompt: the operator's rules, placed first in the system message.
        recent_chars / recent_messages: override the global values.
        recall_mode / recall_k / recall_chars / recall_k_max / recall_min_share /
            recall_scope / recall_user_chats: override the global values (``recall_scope:
            user`` is the per-alias opt-in to recall across the user's conversations).
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
    recent_chars: int | None = Field(default=None, ge=200, le=2_000_000)
    recent_messages: int | None = Field(default=None, ge=1, le=1000)
    recall_mode: Literal["budget", "fixed"] | None = None
    recall_k: int | None = Field(default=None, ge=0, le=20)
    recall_chars: int | None = Field(default=None, ge=0, le=50_000)
    recall_k_max: int | None = Field(default=None, ge=1, le=64)
    recall_min_share: float | None = Field(default=None, ge=0.0, le=1.0)
    recall_scope: Literal["conversation", "user"] | None = None
    recall_user_chats: int | None = Field(default=None, ge=1, le=500)
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


def shadowed_env(callback_settings: dict[str, Any] | None) -> list[str]:
    """The ``LITELLM_MEMORY_<NAME>`` variables set in the environment for a key that
    ``callback_settings['memory']`` also sets: the file wins, so they do nothing."""
    section = (callback_settings or {}).get("memory") or {}
    if not isinstance(section, dict):
        return []
    present = {k.upper() for k in os.environ}
    names = (f"{ENV_PREFIX}{key}".upper() for key in section)
    return sorted(name for name in names if name in present)


#: settings whose value an error message does not repeat (a URL may hold a password).
_UNSHOWN_VALUES = frozenset(
    {"redis_url", "redis_sentinel_password", "extraction_api_key", "extraction_base_url"}
)


def _shown_value(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def describe_invalid(exc: ValidationError, name: Callable[[tuple[str | int, ...]], str]) -> str:
    """A validation error of the settings or of an alias block on one line, one clause per
    problem: ``invalid setting NAME ('abc'): Input should be a valid integer``, several joined
    by ``; `` after ``invalid settings:``. ``name`` turns an error's location into what the
    operator wrote (a config key or an environment variable). Values of :data:`_UNSHOWN_VALUES`
    are not repeated."""
    problems = []
    for error in exc.errors():
        loc = tuple(error["loc"])
        where = name(loc)
        if error["type"] == "extra_forbidden":
            problems.append(f"{where}: not a known setting")
            continue
        message = " ".join(str(error["msg"]).removeprefix("Value error, ").split())
        field = str(loc[0]).lower().removeprefix(ENV_PREFIX.lower()) if loc else ""
        hidden = field in _UNSHOWN_VALUES
        shown = "" if hidden or error["type"] == "missing" else f" ({_shown_value(error['input'])})"
        problems.append(f"{where}{shown}: {message}")
    if len(problems) == 1:
        return f"invalid setting {problems[0]}"
    return "invalid settings: " + "; ".join(problems)


def _suffix(loc: tuple[str | int, ...]) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc)


def _dotted(loc: tuple[str | int, ...]) -> str:
    return _suffix(loc).removeprefix(".")


def _env_value_set(name: str) -> bool:
    return any(key.upper() == name for key in os.environ)


def _settings_source(section: Mapping[str, Any]) -> Callable[[tuple[str | int, ...]], str]:
    """Where a global setting came from: ``callback_settings.memory.KEY`` when the file sets it,
    else its environment variable (``LITELLM_MEMORY_<NAME>``; ``REDIS_URL`` for a ``redis_url``
    that only it sets)."""

    def name(loc: tuple[str | int, ...]) -> str:
        if not loc:
            return "callback_settings.memory"
        key, rest = str(loc[0]), loc[1:]
        # the file key as spelt there (keys are case-insensitive; an error may name the field by
        # its environment alias)
        names = {key.lower(), key.lower().removeprefix(ENV_PREFIX.lower())}
        written = next((str(k) for k in section if str(k).lower() in names), None)
        if written is not None:  # as the file spells it (keys are case-insensitive)
            return "callback_settings.memory." + written + _suffix(rest)
        if key.upper().startswith(ENV_PREFIX):  # an alias that names the variable itself
            return key.upper() + _suffix(rest)
        if key.lower() not in MemorySettings.model_fields:
            return "callback_settings.memory." + _dotted(loc)
        variable = f"{ENV_PREFIX}{key}".upper()
        if key.lower() == "redis_url" and not _env_value_set(variable):
            variable = "REDIS_URL"
        return variable + _suffix(rest)

    return name


def load_settings(callback_settings: dict[str, Any] | None = None) -> MemorySettings:
    """Build the global settings from ``callback_settings['memory']`` and the environment.

    A key set in the file wins over its ``LITELLM_MEMORY_<NAME>`` variable
    (:func:`shadowed_env` lists such variables; ``doctor`` warns about them); the environment
    fills the keys the file leaves out.

    Raises:
        ConfigError: unknown keys (in the section or as ``LITELLM_MEMORY_*`` environment
            variables) or invalid values: one line naming each bad setting as the operator set
            it (``callback_settings.memory.KEY`` or the environment variable), its value and
            what is expected (:func:`describe_invalid`).
    """
    section = (callback_settings or {}).get("memory") or {}
    if not isinstance(section, dict):
        raise ConfigError("callback_settings.memory must be a mapping")
    known = {f"{ENV_PREFIX}{name}".upper() for name in MemorySettings.model_fields}
    unknown = sorted(
        k for k in os.environ if k.upper().startswith(ENV_PREFIX) and k.upper() not in known
    )
    if unknown:
        raise ConfigError(f"unknown environment variable(s): {', '.join(unknown)}")
    try:
        return MemorySettings(**section)
    except ValidationError as exc:
        raise ConfigError(describe_invalid(exc, _settings_source(section))) from exc


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
    try:
        config = AliasMemoryConfig(**raw)
    except ValidationError as exc:
        raise ConfigError(
            describe_invalid(exc, lambda loc: _dotted(("model_info", "memory", *loc)))
        ) from exc
    return config if config.enabled else None
