"""The groups of the global settings, one model each (``redis:``, ``storage:``, ``window:``,
``recall:``, ``memories:``, ``summary:``, ``extraction:``, ``write_buffer:``, ``identity:``,
``requests:``), with their keys, defaults and bounds.

:class:`~litellm_memory_hook.settings.global_settings.MemorySettings` holds one of each; every
key is described in its class docstring, which ``docs/configuration.md`` is generated from.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic_settings import NoDecode

#: the largest time setting (seconds): a day; infinite and NaN values are refused too (a time
#: becomes epoch milliseconds as an integer, and Redis takes no larger TTL than it can hold).
DAY_S = 86_400
_KEY_PREFIX_PATTERN = r"^[A-Za-z0-9_.-]{1,32}$"

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
