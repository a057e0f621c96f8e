"""LiteLLM proxy hook: long memory for chat completions and the other client protocols
(:mod:`litellm_memory_hook.protocols`: the Responses API), stored in Redis.

Configuration (the proxy's config.yaml)::

    litellm_settings:
      callbacks: litellm_memory_hook.proxy_callback.memory_hook
    callback_settings:
      memory: {key_prefix: mem, recent_chars: 8000}     # optional, see settings.MemorySettings
    model_list:
      - model_name: demo
        model_info: {memory: {enabled: true, system_prompt: "..."}}   # settings.AliasMemoryConfig

Keys: ``<prefix>:{<tenant>:<user>:<conversation>}:<kind>`` (see
:mod:`litellm_memory_hook.store.keys`).

Flow: ``async_pre_call_hook`` identifies the request, loads the conversation in one round trip and
replaces ``data["messages"]`` with one system message and the recent window; it records what to
store in ``data["metadata"]["litellm_memory"]``. ``async_post_call_success_hook`` (non-streaming)
and ``async_post_call_streaming_iterator_hook`` (streaming) append the new turn and the reply,
idempotently on ``litellm_call_id``, then mark the conversation due for extraction.

Failure policy (docs/design.md): every error in our code or in Redis is logged and counted,
and the request goes on with the client's own messages; the post-call hooks never raise and always
return ``None``. A write that fails is retried in the background (3 times, 0.5 s, 2 s, 8 s).

Per-request controls: ``metadata.memory_mode`` = ``read_write`` (default), ``read_only`` (the
turn is answered with memory but not stored) or ``off``, never more than the alias allows;
``metadata.memory_regenerate: true`` (the repeated last message replaces the last reply);
``metadata.persona`` and ``metadata.custom_instructions`` (user-editable text, inserted as data);
``metadata.timezone``
(IANA name for dating recalled lines). Request header ``x-memory-debug: 1`` adds the response
headers ``x-memory-hook-ms`` and ``x-memory-layers``.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import hashlib
import hmac
import json
import logging
import secrets
import sys
import time
from collections import Counter
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import asdict, dataclass, fields
from typing import Any

import litellm
import orjson
import redis.asyncio as aioredis
from litellm.integrations.custom_logger import CustomLogger
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError

from litellm_memory_hook.core import recall
from litellm_memory_hook.core.assemble import assemble, with_rules
from litellm_memory_hook.core.controls import ControlError, effective_mode, read_controls
from litellm_memory_hook.core.indexing import indexed, stored_terms
from litellm_memory_hook.core.messages import (
    is_valid_request,
    message_to_turn,
    without_surrogates,
)
from litellm_memory_hook.core.model_window import (
    BYTES_PER_TOKEN,
    ModelLimit,
    estimate_tokens,
    model_limit,
)
from litellm_memory_hook.core.models import ConversationState, IndexedTurn, Turn, copy_json
from litellm_memory_hook.core.plan import plan_with_buffered
from litellm_memory_hook.core.side_requests import side_request_pattern, temporary_pattern
from litellm_memory_hook.core.window import build_window
from litellm_memory_hook.errors import ConfigError, MemoryHookError, StoreError
from litellm_memory_hook.extraction.client import ExtractionModel, RouterModel
from litellm_memory_hook.extraction.prompt import is_extraction_call
from litellm_memory_hook.extraction.worker import ExtractionWorker
from litellm_memory_hook.protocols import ProtocolAdapter, adapter_for, adapter_named, responses
from litellm_memory_hook.protocols.base import metadata_dicts
from litellm_memory_hook.protocols.chat import CHAT
from litellm_memory_hook.proxy.breaker import NodeBreakers
from litellm_memory_hook.proxy.context import (
    ContextOptions,
    EpochUpdate,
    PreparedRequest,
    fitted_to,
    prepare,
    request_only_block,
)
from litellm_memory_hook.proxy.held_turns import HeldTurns
from litellm_memory_hook.proxy.identity import (
    Identity,
    identify,
    request_headers,
    tenant_from_auth,
)
from litellm_memory_hook.proxy.metrics import HookMetrics, MetricsPublisher, log_event
from litellm_memory_hook.proxy.outcomes import (
    OUTCOME_HEADER,
    OUTCOME_KEY,
    read_outcome,
    set_outcome,
)
from litellm_memory_hook.proxy.write_buffer import PendingWrite, WriteBuffer
from litellm_memory_hook.settings import (
    AliasMemoryConfig,
    MemorySettings,
    load_settings,
    parse_alias_config,
)
from litellm_memory_hook.slices import LONG_WRITE_TURNS, Slicer, map_sliced, pause
from litellm_memory_hook.store.client import client_for_settings, node_of, reconnect
from litellm_memory_hook.store.epochs import write_epoch
from litellm_memory_hook.store.errors import (
    RateLimitedLog,
    RedisFault,
    classify,
    explain,
    fault_key,
)
from litellm_memory_hook.store.keys import ConversationKeys
from litellm_memory_hook.store.queue import ExtractionQueue
from litellm_memory_hook.store.redis_store import AppendResult, MemoryStore, now_ms
from litellm_memory_hook.store.retention import should_check, trim_oldest
from litellm_memory_hook.store.workers import KIND_PROXY

logger = logging.getLogger("litellm_memory_hook")

METADATA_KEY = "litellm_memory"
DEBUG_HEADER = "x-memory-debug"
_ALIAS_CACHE_S = 30.0

#: estimated tokens of what frames the added layers (tags, notes, the reminder) besides their
#: budgets: kept free when sizing them to a model's window.
FRAMING_TOKENS = 200

#: while the breaker is open, one request tries Redis this often (seconds).
BREAKER_PROBE_S = 0.5

#: a pooled connection that Redis closed (a restart, an idle timeout: case D09) is replaced and
#: the command sent once more before anything counts as a failure; a real outage still fails
#: (and opens the breaker) after that one retry. Writes are idempotent on the call id, so a
#: retried script never stores a turn twice. A timeout is retried too (redis-py's default): a
#: connection a NAT or firewall dropped silently answers nothing rather than a reset, and only a
#: fresh one mends it; the price is that a frozen Redis holds a request 2 x redis_timeout_s.
RECONNECT_OPTIONS: dict[str, Any] = {
    "retry": Retry(NoBackoff(), 1),
    "retry_on_error": [RedisConnectionError],
}


class MemoryRequiredError(MemoryHookError):
    """An alias that requires memory got a request without a usable user id."""


def _user_part_types() -> frozenset[str] | None:
    """The content part types LiteLLM accepts in a user message: it answers 400 to any other,
    naming the message's index, so a request holding one is passed through as the client sent
    it (the index is then the client's). ``None`` (any type) for a LiteLLM without the list."""
    try:
        from litellm.types.llms.openai import ValidUserMessageContentTypes
    except ImportError:  # pragma: no cover - depends on the installed LiteLLM
        return None
    return frozenset(ValidUserMessageContentTypes)


#: :func:`_user_part_types`, read once.
USER_PART_TYPES = _user_part_types()


def _metadata(data: dict[str, Any]) -> dict[str, Any]:
    metadata = data.get("metadata")
    if not isinstance(metadata, dict):
        metadata = {}
        data["metadata"] = metadata
    return metadata


def _drop_client_record(data: dict[str, Any]) -> None:
    """Remove what only the hook writes (its record, outcome, echo) from a client's request
    metadata, LiteLLM's copy of the client's own included."""
    for metadata in metadata_dicts(data):
        requester = metadata.get("requester_metadata")
        for target in (metadata, requester) if isinstance(requester, dict) else (metadata,):
            for key in (METADATA_KEY, OUTCOME_KEY, responses.ECHO_KEY):
                target.pop(key, None)


_TURN_FIELDS = tuple(f.name for f in fields(Turn))


_frozen: list[bool] = []


def freeze_startup_objects() -> bool:
    """Collect once, then freeze every object tracked so far (:func:`gc.freeze`), once per
    process: the ``gc_freeze`` setting (its docstring has the measured effect). Later
    collections skip the frozen objects; garbage made after this is collected as before.

    Returns:
        True when this call froze them (False: done already).
    """
    if _frozen:
        return False
    _frozen.append(True)
    started = time.perf_counter()
    gc.collect()
    gc.freeze()
    logger.info(
        "memory hook: froze %d startup objects for the garbage collector (%.0f ms; gc_freeze)",
        gc.get_freeze_count(),
        (time.perf_counter() - started) * 1000,
    )
    return True


def _turn_dict(turn: Turn) -> dict[str, Any]:
    """``dataclasses.asdict(turn)`` (nested values deep-copied, tuples kept as tuples), without
    its generic recursion (~10x faster; it runs for every stored turn of every request)."""
    values = turn.__dict__
    out = {name: values[name] for name in _TURN_FIELDS}
    out["tool_calls"] = tuple(copy_json(c) for c in turn.tool_calls)
    out["msg"] = copy_json(turn.msg)
    return out


def _turn_from_dict(raw: dict[str, Any]) -> Turn:
    turn = Turn(
        **{
            **raw,
            "tool_calls": tuple(raw.get("tool_calls") or ()),
            "ctx": tuple(raw.get("ctx") or ()),
        }
    )
    if turn.role not in ("user", "assistant", "tool"):
        raise MemoryHookError(f"unexpected role in a memory record: {turn.role!r}")
    return turn


@dataclass(frozen=True)
class _Request:
    """What the pre-call hook decided for one request, before reading Redis: who it is, the
    options, and what its record will say.

    Attributes:
        metadata: the request's LiteLLM metadata (the record goes there).
        started: ``time.perf_counter()`` when the hook started (seconds).
        protocol: the client API's adapter name (:mod:`litellm_memory_hook.protocols`).
    """

    metadata: dict[str, Any]
    who: Identity
    options: ContextOptions
    call_id: str
    mode: str
    rules: str
    flush: bool
    extract: bool
    started: float
    protocol: str


class MemoryHook(CustomLogger):
    """The memory hook: one instance per proxy process, listed in ``litellm_settings.callbacks``.

    Args:
        settings: global settings; default: read from ``litellm.callback_settings`` and the
            environment at the first request.
        redis: an asyncio Redis client (``decode_responses=False``); default: from
            ``settings.redis_url``.
        alias_lookup: model alias -> its ``model_info`` dict; default: the proxy's router.
    """

    def __init__(
        self,
        settings: MemorySettings | None = None,
        redis: aioredis.Redis | None = None,
        alias_lookup: Callable[[str], dict[str, Any] | None] | None = None,
        model: ExtractionModel | None = None,
    ) -> None:
        super().__init__()
        recall.load_lemmas()  # ~0.5 s once per process: at startup, not on a request
        self._model = model
        self._buffer: WriteBuffer | None = None
        self._queue: ExtractionQueue | None = None
        self._worker: ExtractionWorker | None = None
        self._publisher: MetricsPublisher | None = None
        self._settings = settings
        self._redis = redis
        self._store: MemoryStore | None = None
        self._alias_lookup = alias_lookup
        self._alias_cache: dict[str, tuple[float, AliasMemoryConfig | None]] = {}
        self._provider_cache: dict[str, tuple[float, str | None]] = {}
        self._held = HeldTurns(on_drop=lambda: self.counters.update(("held_dropped",)))
        # the alias's model_info gives the declared window too (tests); default: the router
        self._limits_lookup = alias_lookup
        self._limit_cache: dict[str, tuple[float, dict[str, Any] | None]] = {}
        self._background: set[asyncio.Task[None]] = set()
        self.counters: Counter[str] = Counter()
        self.metrics = HookMetrics(self.counters)
        self._secret = secrets.token_bytes(32)
        self._redis_down_until = 0.0
        self._next_probe = 0.0

    # -- setup ---------------------------------------------------------------------------------

    @property
    def settings(self) -> MemorySettings:
        """The global settings (read once, lazily: config.yaml is parsed after import)."""
        if self._settings is None:
            import litellm

            self._settings = load_settings(getattr(litellm, "callback_settings", None))
        return self._settings

    @property
    def store(self) -> MemoryStore:
        """The Redis store (the client is created lazily, on the running event loop)."""
        if self._store is None:
            if self._redis is None:
                self._redis = client_for_settings(self.settings, **RECONNECT_OPTIONS)
            self._store = MemoryStore.for_settings(self._redis, self.settings)
        return self._store

    @property
    def queue(self) -> ExtractionQueue:
        """The extraction schedule (due set, leases, counters) on the same Redis."""
        if self._queue is None:
            self._queue = ExtractionQueue(self.store.redis, self.settings.key_prefix)
        return self._queue

    def ensure_worker(self) -> None:
        """Start the in-proxy extraction worker once, on the proxy's event loop.

        Off when ``worker_in_proxy`` or ``extraction_enabled`` is false. The task is kept
        referenced by the worker; its errors are logged; :meth:`shutdown` stops it.
        """
        settings = self.settings
        if self._worker is not None or not (
            settings.worker_in_proxy and settings.extraction_enabled
        ):
            return
        self._worker = ExtractionWorker(
            self.store.redis,
            settings,
            self._model or RouterModel(),
            alias_lookup=self.alias_config,
            queue=self.queue,
            kind=KIND_PROXY,
        )
        self._worker.start()

    @property
    def worker(self) -> ExtractionWorker | None:
        """The in-proxy worker, once started."""
        return self._worker

    def ensure_metrics_publisher(self) -> None:
        """Start publishing this process's metric snapshot to Redis once, on the proxy's event
        loop (every :data:`~litellm_memory_hook.proxy.metrics.METRICS_PUBLISH_S` seconds), so
        that a scrape answered by any process of the proxy renders every process's series.
        :meth:`shutdown` stops it with one last publish.

        Raises:
            ConfigError: the settings are invalid (there is no store to publish to).
        """
        if self._publisher is not None:
            return
        self._publisher = MetricsPublisher(self.metrics, self.store.redis, self.settings.key_prefix)
        self._publisher.start()

    @property
    def metrics_publisher(self) -> MetricsPublisher | None:
        """The metrics publisher, once started."""
        return self._publisher

    async def shutdown(self) -> None:
        """Stop the in-proxy worker, wait for background writes, then stop the metrics
        publisher with a last publish (proxy shutdown)."""
        if self._worker is not None:
            await self._worker.stop()
            self._worker = None
        await self.drain()
        if self._publisher is not None:
            await self._publisher.stop()
            self._publisher = None

    def alias_config(self, model: object) -> AliasMemoryConfig | None:
        """The memory config of a model alias, ``None`` when memory is off for it (cached 30 s).

        Raises:
            ConfigError: the alias's ``model_info.memory`` block is invalid.
        """
        if not isinstance(model, str) or not model:
            return None
        cached = self._alias_cache.get(model)
        if cached is not None and time.monotonic() - cached[0] < _ALIAS_CACHE_S:
            return cached[1]
        model_info = (self._alias_lookup or _router_model_info)(model)
        config = parse_alias_config(model_info)
        self._alias_cache[model] = (time.monotonic(), config)
        return config

    # -- pre-call ------------------------------------------------------------------------------

    async def async_pre_call_hook(
        self,
        user_api_key_dict: Any,
        cache: Any,
        data: dict[str, Any],
        call_type: Any,
    ) -> dict[str, Any] | None:
        """Rebuild ``data["messages"]`` from memory; return ``data`` (changed or not).

        Raises:
            fastapi.HTTPException: 400 when the alias requires memory and no user id was sent.
        """
        started = time.perf_counter()
        field = "metadata"  # where the outcome goes: the adapter's metadata field
        try:
            if not isinstance(data, dict):
                return data
            _drop_client_record(data)
            adapter = adapter_for(call_type)
            if adapter is None:
                return data
            field = adapter.metadata_field
            alias = self.alias_config(data.get("model"))
            if alias is None:
                return data
            view = adapter.view(data)
            if view is None:
                self.counters["invalid_passthrough"] += 1
                self._outcome(data, field, "invalid_request")
                return data  # the proxy judges it as the client sent it
            if is_extraction_call(view.get("messages")):
                self.counters["extraction_calls_passed"] += 1
                self._outcome(data, field, "extraction")
                return data
            if not is_valid_request(view.get("messages"), USER_PART_TYPES):
                self.counters["invalid_passthrough"] += 1
                self._outcome(data, field, "invalid_request")
                return data  # the proxy judges it as the client sent it
            self.ensure_worker()
            if self.settings.gc_freeze:
                freeze_startup_objects()
            await self._rebuild(view, user_api_key_dict, alias, started, adapter)
            adapter.apply(data, view)
        except MemoryRequiredError as exc:
            from fastapi import HTTPException

            self.counters["rejected_no_user"] += 1
            self._outcome(data, field, "no_user")
            raise HTTPException(status_code=400, detail=str(exc)) from exc
        except ControlError as exc:
            from fastapi import HTTPException

            self.counters["rejected_controls"] += 1
            self._outcome(data, field, "invalid_request")
            raise HTTPException(status_code=400, detail=str(exc)) from exc
        except ConfigError as exc:
            self.counters["config_errors"] += 1
            self._outcome(data, field, "config_error")
            logger.error("memory hook: bad configuration for %r: %s", data.get("model"), exc)
            log_event("fail_open", logging.WARNING, reason="config", model=str(data.get("model")))
        except Exception:
            self.counters["precall_errors"] += 1
            self._outcome(data, field, "error")
            logger.exception("memory hook: pre-call failed; passing the request through")
            log_event("fail_open", logging.WARNING, reason="error", model=str(data.get("model")))
        return data

    async def _rebuild(
        self,
        data: dict[str, Any],
        auth: Any,
        alias: AliasMemoryConfig,
        started: float,
        adapter: ProtocolAdapter = CHAT,
    ) -> None:
        """Rebuild the chat-completions view ``data`` of a request (its ``messages``; the
        adapter writes them back into the request's own fields)."""
        settings = self.settings
        metadata = _metadata(data)
        controls = read_controls(metadata)
        mode = effective_mode(controls.mode, alias.mode)
        rules = alias.system_prompt.strip()
        if mode == "off":
            self.counters["mode_off"] += 1
            self._outcome(data, "metadata", "off")
            data["messages"] = with_rules(data.get("messages"), rules)
            return
        side = side_request_pattern(data.get("messages"), settings.side_patterns)
        if side is not None:
            self.counters["side_requests"] += 1
            self._outcome(data, "metadata", "side_request")
            logger.info("memory hook: side request (%s); no memory, not stored", side)
            data["messages"] = with_rules(data.get("messages"), rules)
            return
        if tenant_from_auth(auth) is None:  # no team, user or key: no tenant, no memory
            self.counters["no_tenant_passthrough"] += 1
            self._outcome(data, "metadata", "no_tenant")
            logger.info("memory hook: the caller has no team, user or key id; no memory")
            data["messages"] = with_rules(data.get("messages"), rules)
            return
        namespace = alias.namespace or str(data.get("model"))
        who = identify(
            data,
            auth,
            prefix=settings.key_prefix,
            namespace=namespace,
            user_header=settings.user_header,
            memory_scope=alias.memory_scope,
            alias=str(data.get("model")),
            conversation_header=settings.conversation_header,
            # each protocol's default conversation is its own (a whole-history client of one
            # must not read another's turns as messages it deleted); memories are shared
            default_conversation=None if adapter is CHAT else f"{namespace}.{adapter.name}",
            claude_code_user=settings.claude_code_user,
        )
        if who is None:
            if alias.required:
                raise MemoryRequiredError(
                    f"model {data.get('model')!r} needs a user id for memory: send the "
                    "OpenAI 'user' field"
                    + (f" or the {settings.user_header!r} header" if settings.user_header else "")
                )
            self.counters["no_user_passthrough"] += 1
            self._outcome(data, "metadata", "no_user")
            logger.info("memory hook: no usable user id for %r; passing through", data.get("model"))
            data["messages"] = with_rules(data.get("messages"), rules)
            return
        temporary = temporary_pattern(who.conversation, settings.temporary_conversation_patterns)
        if temporary is not None and mode == "read_write":  # a temporary chat: read-only
            self.counters["temporary_chats"] += 1
            logger.info("memory hook: temporary chat (%s); memory read, nothing stored", temporary)
            mode = "read_only"
        on_top = bool(getattr(adapter, "system_on_top", False))
        options = ContextOptions.for_alias(
            settings,
            alias,
            timezone=controls.timezone,
            persona=controls.persona if controls.persona.strip() else "",
            custom_instructions=controls.custom_instructions
            if controls.custom_instructions.strip()
            else "",
            regenerate=controls.regenerate,
            # an API whose one system prompt is at the top (Anthropic Messages) takes the
            # tail in the user's message whatever the provider behind the alias
            tail_in_user=on_top or self._tail_in_user(alias, data.get("model")),
            tail_after_tools=on_top,
            cache_marks=self._cache_marks(alias, data.get("model")),
            history=adapter.history_mode(data) if alias.history == "auto" else alias.history,
        )
        limit = self._model_limit(data)
        sized = self._sized(data, options, rules, limit)
        if sized is None:  # the client's own messages and the reply fill the model's window
            data["messages"] = with_rules(data.get("messages"), rules)
            return
        options = sized
        call_id = str(data.get("litellm_call_id") or "")
        request = _Request(
            metadata=metadata,
            who=who,
            options=options,
            call_id=call_id,
            mode=mode,
            rules=rules,
            flush=controls.flush,
            extract=alias.extraction,
            started=started,
            protocol=adapter.name,
        )
        if self._breaker_open(who.keys):
            self.counters["breaker_passthrough"] += 1
            self._outcome(data, "metadata", "redis_down")
            log_event("fail_open", logging.INFO, reason="breaker", model=str(data.get("model")))
            self._offline(data, request)
            return
        await self._serve_continuation(data, who.keys)
        buffered, superseded = self.buffered_turns(who.keys)  # before the load: never in neither
        reading = prepare(
            self.store,
            who.keys,
            who.memory,
            data.get("messages"),
            options,
            call_id=call_id,
            buffered=buffered,
            superseded=superseded,
        )
        try:
            if self._probing(who.keys):  # a half-open breaker's probe waits one timeout
                prepared = await asyncio.wait_for(reading, timeout=settings.redis_timeout_s)
            else:
                prepared = await reading
        except (StoreError, TimeoutError) as exc:
            # said once per cause and period by the breaker (an outage, a refusal by its kind)
            self._trip_breaker(who.keys)
            self.counters["precall_errors"] += 1
            logger.debug("memory hook: Redis failed in pre-call (%s); the turn is buffered", exc)
            self._outcome(data, "metadata", "redis_down")
            self._offline(data, request)
            return
        except Exception:
            data["messages"] = with_rules(data.get("messages"), rules)
            raise
        self._redis_ok(who.keys)
        prepared = await self._refit(prepared, limit, request, data.get("messages"))
        if prepared is None:
            self.counters["no_new_turn"] += 1
            self._outcome(data, "metadata", "no_new_turn")
            data["messages"] = with_rules(data.get("messages"), rules)
            return
        data["messages"] = prepared.messages
        self._outcome(data, "metadata", _read_outcome(mode, temporary is not None))
        if prepared.epoch is not None and mode == "read_write":
            self._spawn(self._record_epoch(who.keys, prepared.epoch))
        elapsed_ms = (time.perf_counter() - started) * 1000
        self._record(request, prepared, elapsed_ms)
        self.metrics.observe_rebuild(
            who.keys.ref, prepared.layer_chars, elapsed_ms, recalled=len(prepared.recalled)
        )

    def _model_limit(self, data: dict[str, Any]) -> ModelLimit | None:
        """The declared window of the request's alias (``max_input_tokens`` of its deployment's
        ``model_info``, else LiteLLM's model map), with the reply the request asks for; ``None``
        when none is declared."""
        model = data.get("model")
        if not isinstance(model, str):
            return None
        cached = self._limit_cache.get(model)
        if cached is None or time.monotonic() - cached[0] >= _ALIAS_CACHE_S:
            cached = (time.monotonic(), (self._limits_lookup or _router_limits)(model))
            self._limit_cache[model] = cached
        return model_limit(cached[1], data)

    def _sized(
        self,
        data: dict[str, Any],
        options: ContextOptions,
        rules: str,
        limit: ModelLimit | None,
    ) -> ContextOptions | None:
        """``options`` with the layers' budgets sized to the model's declared window (case
        E06; :mod:`~litellm_memory_hook.core.model_window`); ``None`` when the client's own
        messages and the reply fill it (outcome ``too_large``)."""
        if limit is None:
            return options
        must = [{"content": rules}, *_must_send(data.get("messages"), options.history)]
        room = limit.prompt_tokens - estimate_tokens(must) - FRAMING_TOKENS
        if room > 0:
            return fitted_to(options, room * BYTES_PER_TOKEN)
        self.counters["too_large_passthrough"] += 1
        self._outcome(data, "metadata", "too_large")
        logger.info(
            "memory hook: %r's window (%d tokens, %d for the reply) holds no memory beside "
            "the request; passing it through",
            data.get("model"),
            limit.input_tokens,
            limit.reply_tokens,
        )
        return None

    async def _refit(
        self,
        prepared: PreparedRequest | None,
        limit: ModelLimit | None,
        request: _Request,
        raw: object,
    ) -> PreparedRequest | None:
        """A prompt still over the model's window (text of more tokens a character than the
        estimate's budgets assumed: CJK, Devanagari) is built once more with the budgets cut
        in the same proportion; what is then still over goes as it is (the next request's
        budgets start smaller by the same estimate)."""
        if prepared is None or limit is None:
            return prepared
        used = estimate_tokens(prepared.messages)
        if used <= limit.prompt_tokens:
            return prepared
        self.counters["refit_to_model"] += 1
        options = request.options
        added = max(used - estimate_tokens(_must_send(raw, options.history)), 1)
        room = added - (used - limit.prompt_tokens) - FRAMING_TOKENS
        tighter = fitted_to(options, max(room, 0) * BYTES_PER_TOKEN * room // added)
        return await prepare(
            self.store,
            request.who.keys,
            request.who.memory,
            raw,
            tighter,
            call_id=request.call_id,
            buffered=self.buffered_turns(request.who.keys)[0],
        )

    def _outcome(self, data: dict[str, Any], field: str, outcome: str) -> None:
        """Count ``outcome`` (:mod:`.outcomes`) and leave it in the request's metadata dict
        ``data[field]`` (made when missing) for the ``x-memory-outcome`` header."""
        self.counters[f"outcome_{outcome}"] += 1
        metadata = data.get(field)
        if not isinstance(metadata, dict):
            metadata = data[field] = {}
        set_outcome(metadata, outcome)

    async def _serve_continuation(self, view: dict[str, Any], keys: ConversationKeys) -> None:
        """Mark a ``previous_response_id`` continuation (:mod:`litellm_memory_hook.protocols.
        responses`) served from Redis when the alias's provider does not replay it itself and
        the previous response is one this hook stored in the conversation. A failure says no
        (LiteLLM then handles the continuation as without the hook)."""
        continues = view.get(responses.CONTINUES)
        if not isinstance(continues, str) or responses.provider_replays(view.get("model")):
            return
        try:
            found = await asyncio.wait_for(
                self.store.redis.hexists(keys.calls, responses.RESPONSE_FIELD + continues),
                timeout=self.settings.redis_timeout_s,
            )
        except Exception as exc:
            self.counters["continuation_lookup_errors"] += 1
            logger.debug("memory hook: looking up a previous response failed: %s", exc)
            return
        self.counters["continuations_served" if found else "continuations_unknown"] += 1
        view[responses.SERVED] = bool(found)

    async def _remember_reply(self, record: dict[str, Any], reply_id: object, call_id: str) -> None:
        """Note a stored reply's response id in its conversation's ``calls`` hash (only while
        the conversation is stored), so a continuation of it is served from Redis. Never
        raises."""
        if not isinstance(reply_id, str) or not reply_id or not record.get("write"):
            return
        try:
            keys = ConversationKeys.from_ref(str(record["prefix"]), str(record["ref"]))
            await self.store.redis.eval(
                _REMEMBER_REPLY, 1, keys.calls, responses.RESPONSE_FIELD + reply_id, call_id
            )
        except Exception as exc:
            self.counters["reply_id_write_errors"] += 1
            logger.debug("memory hook: noting a response id failed: %s", exc)

    def _provider(self, model: object) -> str | None:
        """The provider of an alias's deployment (cached like the alias's config)."""
        if not isinstance(model, str):
            return None
        cached = self._provider_cache.get(model)
        if cached is None or time.monotonic() - cached[0] >= _ALIAS_CACHE_S:
            cached = (time.monotonic(), _router_provider(model))
            self._provider_cache[model] = cached
        return cached[1]

    def _tail_in_user(self, alias: AliasMemoryConfig, model: object) -> bool:
        """Whether the cache layout's tail goes in the user's last message: the alias says so,
        or (``auto``) its deployment's provider moves every system message to the top."""
        if alias.tail_placement != "auto":
            return alias.tail_placement == "user"
        return self._provider(model) in SYSTEM_ON_TOP_PROVIDERS

    def _cache_marks(self, alias: AliasMemoryConfig, model: object) -> bool:
        """Whether the cache layout marks its stable parts with ``cache_control``: the alias
        says so, or (``auto``) its deployment's provider caches only where marked."""
        if alias.cache_marks != "auto":
            return alias.cache_marks == "on"
        return self._provider(model) in MARKED_CACHE_PROVIDERS

    async def _record_epoch(self, keys: ConversationKeys, update: EpochUpdate) -> None:
        """Record the cache layout's window start and head snapshot (a hint: a failure costs
        the next request a fresh snapshot)."""
        try:
            if await write_epoch(
                self.store.redis, keys, update.start, update.epoch, update.snapshot
            ):
                self.counters["epochs_recorded"] += 1
        except Exception as exc:  # the reply is not held for it, and nothing is lost
            self.counters["epoch_write_failures"] += 1
            logger.debug("memory hook: recording the epoch of %s failed: %s", keys.ref, exc)

    def _offline(self, data: dict[str, Any], request: _Request) -> None:
        """Redis is down: the request goes on with the client's messages and the alias's rules,
        and its turn is still recorded for the post-call hooks, which queue it in the outage
        buffer. Planned by :func:`~litellm_memory_hook.core.plan.plan_with_buffered` with an
        empty stored conversation and the turns this proxy holds for it in its outage buffer."""
        who, options, rules = request.who, request.options, request.rules
        raw = data.get("messages")
        data["messages"] = with_rules(raw, rules)  # first: the rules hold if planning fails
        plan = plan_with_buffered(
            raw,
            ConversationState(meta={}, tail=[]),
            self.buffered_turns(who.keys)[0],
            now_ms=now_ms(),
            call_id=request.call_id,
            regenerate_window_s=options.regenerate_window_s,
            max_stored_chars=options.max_stored_chars,
            regenerate=options.regenerate,
        )
        if plan is None:
            return
        # the buffered call, and the buffered turns before it, go before the results; a
        # verbatim plan (nothing buffered) keeps the client's messages as sent
        window = build_window(
            plan.history,
            plan.new,
            max_chars=options.budget.chars,
            max_messages=options.budget.messages,
            verbatim=plan.verbatim,
        )
        # what the request itself gives still applies: its persona, the reminder
        block = request_only_block(raw, window, options)
        data["messages"] = assemble(plan.lead, window, rules=rules, memory_block=block)
        elapsed_ms = (time.perf_counter() - request.started) * 1000  # the failed try's time too
        prepared = PreparedRequest(
            messages=list(data["messages"]),
            plan=plan,
            cursor=0,
            # no token read: the write is refused if a forget came after the request started
            forget_token=f"@{now_ms() - int(elapsed_ms)}",
        )
        self._record(request, prepared, elapsed_ms)

    @contextlib.asynccontextmanager
    async def forgetting(
        self, keys: ConversationKeys, *, whole_user: bool
    ) -> AsyncIterator[list[PendingWrite]]:
        """Around a forget of a conversation, or of every conversation of its user
        (``whole_user``): its writes waiting in this process's outage buffer are taken out
        first, so that they are not written after the forget, and one being sent is waited for
        (at most twice ``redis_timeout_s``), so that the forget deletes what it stored. When
        the forget fails (Redis down: nothing was forgotten) they go back into the buffer; when
        it succeeds they are counted as ``writes_forgotten``. Yields the writes taken.

        Writes whose request read a forget token are refused in Redis anyway
        (:mod:`litellm_memory_hook.store.forgets`); these are the ones made while Redis could
        not be read."""
        if self._buffer is None:
            yield []
            return

        def forgotten(item: PendingWrite) -> bool:
            prefix, ref = item.conversation
            if prefix != keys.prefix:
                return False
            other = ConversationKeys.from_ref(prefix, ref)
            return other.user_keys == keys.user_keys if whole_user else other == keys

        taken = self._buffer.take(forgotten)
        try:
            await self._buffer.cancelled_sent(2 * self.settings.redis_timeout_s)
            yield taken
        except BaseException:
            self._buffer.restore(taken)
            raise
        self.counters["writes_forgotten"] += len(taken)

    def buffered_turns(self, keys: ConversationKeys) -> tuple[list[Turn], set[int]]:
        """The turns this proxy holds for the conversation in its outage buffer, oldest first,
        and the seqs of stored turns those writes replace (one pass over at most
        ``write_buffer_max`` writes while it holds any; at once when it is empty). Take them
        before reading the conversation: a write that lands meanwhile is in one of the two."""
        if self._buffer is None or not self._buffer.active:
            return [], set()
        turns: list[Turn] = []
        superseded: set[int] = set()
        for item in self._buffer.matching(lambda i: i.conversation == (keys.prefix, keys.ref)):
            turns.extend(self._item_turns(item))
            if item.replace is not None:
                superseded.update(t.seq for t in item.replace)
            else:
                superseded.update(_int(t.get("seq")) for t in item.record.get("replace") or ())
        return turns, superseded

    def _record(self, request: _Request, prepared: PreparedRequest, elapsed_ms: float) -> None:
        """Leave the signed record of the turn (what to store after the reply) in the request's
        metadata, where the post-call hooks read it."""
        who = request.who
        self.counters["rebuilt"] += 1
        if not prepared.plan.store:
            self.counters["outage_not_stored"] += 1
            logger.info(
                "memory hook: %s replaces turns still in the outage buffer; not stored",
                who.keys.ref,
            )
        for layer, chars in prepared.layer_chars.items():
            self.counters[f"chars_{layer}"] += chars
        if prepared.plan.surrogates:
            # a client cut a string inside an emoji (JSON "\\ud83d"): its messages reach the
            # model as sent, and are stored with U+FFFD in its place (plan.storable_forms)
            self.counters["surrogate_requests"] += 1
        record: dict[str, Any] = {
            "v": 1,
            "proto": request.protocol,
            "prefix": who.keys.prefix,
            "ref": who.keys.ref,
            "meta": who.meta_fields(),
            "mscope": who.memory.scope,
            "flush": request.flush,
            "extract": request.extract,
            "write": request.mode == "read_write" and prepared.plan.store,
            # the turns stay in this process (proxy/held_turns.py); the record names them
            "held": self._held.hold(prepared.plan.pending, prepared.plan.replace),
            "previous": prepared.plan.previous_text,
            "seeded": prepared.plan.seeded,
            "prefill": prepared.plan.prefill,
            "prefill_name": prepared.plan.prefill_name,
            "cursor": prepared.cursor,
            "forgets": prepared.forget_token,
            "hook_ms": round(elapsed_ms, 3),
            "layers": prepared.layer_chars,
        }
        record["sig"] = self._sign(record)
        request.metadata[METADATA_KEY] = record

    # -- post-call -----------------------------------------------------------------------------

    async def async_post_call_success_hook(
        self, data: dict[str, Any], user_api_key_dict: Any, response: Any
    ) -> None:
        """Store the new turn and the reply of a non-streaming call. Never raises; returns None."""
        try:
            responses.restore_echo(data, response)  # before anything else can fail
            record = self._pending_record(data)
            if record is not None:
                adapter = adapter_named(record.get("proto"))
                reply = adapter.reply_message(response)
                call_id = str(data.get("litellm_call_id") or "")
                await self._commit(record, reply, call_id)
                reply_id = getattr(adapter, "reply_id", None)
                if reply_id is not None:
                    await self._remember_reply(record, reply_id(response), call_id)
        except Exception:
            self.counters["postcall_errors"] += 1
            logger.exception("memory hook: post-call failed")
        return None

    async def async_post_call_streaming_iterator_hook(
        self, user_api_key_dict: Any, response: Any, request_data: dict[str, Any]
    ) -> AsyncGenerator[Any, None]:
        """Pass the chunks through unchanged; store the turn with the full text at the end.

        A stream the client abandons is stored with the reply marked ``partial`` (never replayed).
        """
        record = None
        try:
            record = self._pending_record(request_data)
        except Exception:
            logger.exception("memory hook: reading the stream's record failed")
        accumulator = adapter_named(record.get("proto") if record else None).accumulator()
        completed = False
        call_id = str(request_data.get("litellm_call_id") or "") if record else ""
        try:
            async for chunk in response:
                with contextlib.suppress(Exception):
                    responses.restore_echo(request_data, chunk)
                if record is not None:
                    try:
                        accumulator.add(chunk)
                    except Exception:
                        logger.exception("memory hook: could not read a stream chunk")
                yield chunk
            completed = True
        finally:
            if record is not None:
                if completed:
                    try:
                        await self._commit(record, accumulator.message(), call_id)
                        reply_id = getattr(accumulator, "reply_id", None)
                        await self._remember_reply(record, reply_id, call_id)
                    except Exception:
                        self.counters["postcall_errors"] += 1
                        logger.exception("memory hook: storing a stream failed")
                else:
                    self.counters["streams_cut"] += 1
                    self._spawn(self._commit(record, accumulator.message(), call_id, partial=True))

    def _sign(self, record: dict[str, Any]) -> str:
        """HMAC-SHA256 of the record (without ``sig``) under this process's random key.

        The record is serialised with orjson (sorted keys; ~3x faster than :mod:`json`, and it
        runs for every request in pre-call and again in post-call); a record orjson refuses
        (a set, an integer over 64 bits) falls back to :mod:`json`. Sign and check go through
        the same path for the same record, so only this process's own checks compare them.
        """
        unsigned = {k: v for k, v in record.items() if k != "sig"}
        try:
            body = orjson.dumps(unsigned, option=orjson.OPT_SORT_KEYS)
        except TypeError:  # orjson.JSONEncodeError is a TypeError
            body = json.dumps(
                unsigned, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=list
            ).encode("utf-8")
        return hmac.new(self._secret, body, hashlib.sha256).hexdigest()

    def _pending_record(self, data: Any) -> dict[str, Any] | None:
        """The write instructions the pre-call hook left in ``metadata``, if genuine.

        The record travels in request metadata, which clients also write: a record that this
        process did not sign (a client sent one, or it was changed) is ignored and counted, so no
        request can write into another conversation or forge turns.
        """
        record = self._verified_record(data)
        return record if record is not None and record.get("write") else None

    def _verified_record(self, data: Any) -> dict[str, Any] | None:
        """The record in ``metadata`` when this process signed it, else ``None`` (counted)."""
        record = next(
            (m[METADATA_KEY] for m in metadata_dicts(data) if m.get(METADATA_KEY) is not None),
            None,
        )
        if not isinstance(record, dict):
            return None
        if not hmac.compare_digest(str(record.get("sig", "")), self._sign(record)):
            self.counters["forged_records"] += 1
            logger.warning("memory hook: ignoring a memory record this proxy did not write")
            return None
        return record

    async def _commit(
        self,
        record: dict[str, Any],
        reply: dict[str, Any] | None,
        call_id: str,
        *,
        partial: bool = False,
    ) -> None:
        """Append pending turns + reply, or queue them in the outage buffer
        (:mod:`.write_buffer`): at once while the breaker of the conversation's Redis node is
        open or earlier writes of the same conversation wait (order is kept per conversation,
        and no other conversation waits for it); after a failure, whatever raised it (the
        client's error, any other exception of the client, a bug of ours), by its kind
        (:mod:`litellm_memory_hook.store.errors`): unreachable trips that node's breaker;
        READONLY (a failover) drops the pooled connections and tries once more; a refusal
        (NOPERM, NOSCRIPT, OOM, WRONGTYPE, a script error) is counted and said in one line per
        period, and the write is set aside in its conversation. Never raises."""
        held = self._held.take(record.get("held")) if "held" in record else None
        if "held" in record and held is None:  # a bound dropped them (counted there)
            self.counters["held_lost"] += 1
            logger.warning(
                "memory hook: the turns of %s's call %s were no longer held; not stored",
                record.get("ref"),
                call_id,
            )
            return
        item = PendingWrite(
            record,
            reply,
            call_id,
            partial,
            pending=held.pending if held is not None else None,
            replace=held.replace if held is not None else None,
        )
        keys = ConversationKeys.from_ref(*item.conversation)
        if self._breaker_open(keys) or self.buffer.holds(item.conversation):
            self.buffer.add(item)  # keep order; never hold the response
            return
        try:
            await self._write_once(item, keys, probe=self._probing(keys))
        except Exception as exc:
            kind = classify(exc)
            if kind is RedisFault.READONLY:
                self.counters["redis_readonly_reconnects"] += 1
                await reconnect(self.store.redis)
                try:
                    await self._write(item)
                except Exception as again:
                    exc, kind = again, classify(again)
                else:
                    self._redis_ok(keys)
                    return
            self._write_failed(item, keys, kind, exc)
            return
        self._redis_ok(keys)

    async def _write_once(self, item: PendingWrite, keys: ConversationKeys, *, probe: bool) -> None:
        """:meth:`_write`; a probe (the node's breaker is half-open) gives up after one
        ``redis_timeout_s``, not after the reconnect retry's second one."""
        if not probe:
            await self._write(item)
            return
        await asyncio.wait_for(self._write(item), timeout=self.settings.redis_timeout_s)

    def _write_failed(
        self, item: PendingWrite, keys: ConversationKeys, kind: RedisFault, exc: BaseException
    ) -> None:
        """A write failed with ``kind``: count it, trip the node's breaker when Redis is
        unreachable, and keep the write in the buffer (which says it, rate-limited), set aside
        in its conversation for a refusal."""
        self.counters["write_failures"] += 1
        self.counters[f"write_failures_{kind.value}"] += 1
        if kind is RedisFault.ERROR:  # not the client's: a failure of our own post-call code
            self.counters["postcall_errors"] += 1
        if kind is RedisFault.UNREACHABLE:
            # Unreachable or slow: skip that node for a while. A refusal comes at once and
            # reads still work, so the requests go on reading the stored history.
            self._trip_breaker(keys, exc)
        self.buffer.add_failed(item, exc)  # counted by kind and said there, rate-limited

    @property
    def _refusals(self) -> RateLimitedLog:
        """The rate-limited log of Redis failures (one line per cause per
        ``redis_refusal_log_s``), shared with the outage buffer."""
        log = self.__dict__.get("_refusal_log")
        if log is None:
            log = RateLimitedLog(self.settings.redis_refusal_log_s)
            self.__dict__["_refusal_log"] = log
        assert isinstance(log, RateLimitedLog)
        return log

    @property
    def buffer(self) -> WriteBuffer:
        """The outage buffer of this process."""
        if self._buffer is None:
            self._buffer = WriteBuffer(
                self._write_pending,
                max_items=self.settings.write_buffer_max,
                max_age_s=self.settings.write_buffer_max_age_s,
                count=self._count,
                group=self._item_node,
                refused_retry_s=self.settings.refused_write_retry_s,
                log=self._refusals,
            )
        return self._buffer

    def _item_node(self, item: PendingWrite) -> str:
        """The Redis node a buffered write goes to (its group in the buffer): the
        conversation's, or for a schedule-only item the due set's."""
        if item.schedule_at is not None:
            return self._due_node
        return self._node(ConversationKeys.from_ref(*item.conversation))

    @property
    def _due_node(self) -> str:
        """The Redis node of the extraction due set (``""``: one server). One key for every
        user: on a Cluster it lives on one node, which may not be the conversation's."""
        return node_of(self.store.redis, self.queue.due)

    def _count(self, name: str, amount: int) -> None:
        self.counters[name] += amount

    async def _write_pending(self, item: PendingWrite) -> None:
        """A write of the outage buffer; READONLY drops the pooled connections first, so the
        next try reaches the node that is primary now."""
        keys = ConversationKeys.from_ref(*item.conversation)
        if item.schedule_at is not None:
            await self._retry_schedule(item, keys)
            return
        try:
            await self._write(item)
        except Exception as exc:
            if classify(exc) is RedisFault.READONLY:
                self.counters["redis_readonly_reconnects"] += 1
                await reconnect(self.store.redis)
            raise
        self._redis_ok(keys)

    def _item_turns(self, item: PendingWrite, pending: list[Turn] | None = None) -> list[Turn]:
        """The turns one write stores: the record's pending turns (``pending`` when the caller
        built them already), then the reply (said at ``item.answered_ms``; a cut stream's
        marked ``partial``).

        Raises:
            MemoryHookError: the record holds a turn of another role.
        """
        if pending is not None:
            turns = pending
        elif item.pending is not None:
            turns = list(item.pending)
        else:
            turns = [_turn_from_dict(t) for t in item.record.get("pending") or ()]
        reply = item.reply
        prefill = str(item.record.get("prefill") or "")
        prefill_name = str(item.record.get("prefill_name") or "")
        if reply is not None and (prefill or prefill_name):
            reply = _with_prefill(reply, prefill, prefill_name)
        if reply is not None:
            reply_turn = message_to_turn(
                reply,
                ts_ms=item.answered_ms,
                call_id=item.call_id,
                max_chars=self.settings.stored_text_chars,
            )
            if reply_turn is not None:
                if item.partial:
                    reply_turn = Turn(**{**asdict(reply_turn), "partial": True})
                turns.append(reply_turn)
        return turns

    async def _write(self, item: PendingWrite) -> None:
        record, call_id = item.record, item.call_id
        keys = ConversationKeys.from_ref(str(record["prefix"]), str(record["ref"]))
        at = now_ms()
        # a whole history's turns are built, indexed and bounded in slices (:mod:`..slices`):
        # other requests run between them
        raw = record.get("pending") or ()
        if max(len(raw), len(item.pending or ())) > LONG_WRITE_TURNS:
            await pause()  # the post-call's own work came first: a slice anew
        slicer = Slicer()
        if item.pending is not None:  # held in this process: Turns already
            pending = list(item.pending)
        else:
            pending = await map_sliced(_turn_from_dict, raw, slicer)
        turns = self._item_turns(item, pending)
        replace = (
            list(item.replace)
            if item.replace is not None
            else [_turn_from_dict(t) for t in record.get("replace") or ()]
        )
        if item.partial and item.reply is not None and not any(t.partial for t in turns):
            self.counters["partial_empty"] += 1  # a cut stream with nothing in it
        if not turns:
            return
        previous = str(record.get("previous") or "")
        memory = keys.user_keys.memory_set(str(record.get("mscope") or ""))
        chain: list[IndexedTurn] = []
        for turn in turns:  # indexed_chain, in slices: other requests run between them
            chain.append(indexed(turn, previous))
            previous = turn.text
            await slicer.step()
        if slicer.pauses:  # a long history: the append's own slices start afresh
            await pause()
        result = await self.store.append(
            keys,
            chain,
            call_id=call_id,
            meta_if_new={**record.get("meta", {}), "created_ms": str(item.answered_ms)},
            replace=[stored_terms(t) for t in replace],
            at_ms=at,
            seeded=int(record.get("seeded") or 0),
            memory=memory,  # the user's index is touched in the same script
            forget_token=str(record.get("forgets") or ""),
        )
        if result.forgotten:  # a forget came after this request read the conversation
            self.counters["writes_forgotten"] += 1
            logger.info("memory hook: %s was forgotten since its request; not stored", keys.ref)
            return
        if result.meta_restored:
            # the conversation's meta hash was gone beside its turns (an evicting
            # maxmemory-policy): the seq went on from the newest stored turn
            self.counters["meta_evicted"] += 1
            cursor = "its extraction cursor from its copy"
            if result.cursor_guessed:  # the copy went too: no job extracts it all again
                self.counters["meta_cursor_guessed"] += 1
                cursor = "its extraction cursor (no copy left) from the newest stored turn"
            self._refusals.emit(
                "meta_evicted",
                logging.ERROR,
                f"memory hook: the meta key of {keys.ref} was gone beside its stored turns "
                "(evicted: Redis's maxmemory-policy must be noeviction); numbering went on "
                f"from the newest stored turn, {cursor}; its summary is lost",
            )
        if result.written:
            self.counters["turns_stored"] += len(turns)
        try:
            await self._after_append(item, keys, result, at)
        except Exception as exc:
            kind = classify(exc)
            if kind.transient:
                raise  # retried: the append finds its call id stored and schedules again
            # The turns are stored; only the trim or the schedule was refused (an ACL without
            # the due set, say): the write is done, the refusal counted and said.
            self.counters[f"redis_refused_{kind.value}"] += 1
            self.counters["followup_refused"] += 1
            self._refusals.emit(
                f"followup:{fault_key(kind, exc)}",
                logging.ERROR,
                f"memory hook: turns stored, but scheduling their extraction failed "
                f"({explain(kind, exc, prefix=keys.prefix)})",
            )

    async def _after_append(
        self, item: PendingWrite, keys: ConversationKeys, result: AppendResult, at: int
    ) -> None:
        """What follows an append: the trim past ``max_stored_messages`` and the extraction
        schedule (a retried write whose turns were stored only schedules)."""
        settings = self.settings
        record = item.record
        quiet_ms = int(settings.extraction_quiet_s * 1000)
        if not result.written:
            self.counters["duplicate_writes_skipped"] += 1
            if record.get("extract", True):
                # A retry of a write that stored its turns and failed after (the schedule, with
                # Redis filling up): the conversation is made due, never later than it is.
                await self._schedule(item, keys, at + quiet_ms, earlier_only=True)
            return
        if should_check(result.first_seq, result.last_seq, settings.max_stored_messages):
            self.counters["turns_trimmed"] += await trim_oldest(
                self.store, keys, settings.max_stored_messages
            )
        if not record.get("extract", True):
            return
        now_due = bool(record.get("flush"))
        # The append script returns the cursor as it is now (a job may have committed since the
        # pre-call). After a batched write it does not: the cursor this request's pre-call read
        # bounds the new messages from above (it only moves forward), so the cursor is read
        # again only when even that count reaches extraction_every.
        if not now_due:
            cursor = result.cursor
            if cursor is None and (
                result.last_seq - _int(record.get("cursor")) >= settings.extraction_every
            ):
                cursor = await self.store.cursor(keys)
            now_due = cursor is not None and result.last_seq - cursor >= settings.extraction_every
        await self._schedule(item, keys, at if now_due else at + quiet_ms)
        if now_due and self._worker is not None:
            self._worker.wake()

    async def _schedule(
        self, item: PendingWrite, keys: ConversationKeys, due_ms: int, *, earlier_only: bool = False
    ) -> None:
        """Make the conversation due for extraction at ``due_ms`` (epoch ms). The due set is one
        key for every user: on a Cluster its node may be down while the conversation's is not.
        Then the turns stay stored, the conversation's next writes go on, and the schedule
        waits in the outage buffer by itself (grouped by the due set's node, whose breaker is
        the one tripped; never moved later than ``due_ms``). On one server a failure raises
        as before (the whole write is retried: the append finds its call id stored)."""
        due_node = self._due_node
        if due_node == "" or due_node == self._node(keys):
            await self.queue.schedule(keys, due_ms, earlier_only=earlier_only)
            return
        if not self._breakers.is_open(due_node):
            try:
                await self.queue.schedule(keys, due_ms, earlier_only=earlier_only)
            except Exception as exc:
                kind = classify(exc)
                if not kind.transient:
                    raise
                if kind is RedisFault.UNREACHABLE and self._breakers.trip(due_node):
                    self.counters["breaker_trips"] += 1
                    logger.warning(
                        "memory hook: Redis node %s (the extraction due set) failed; "
                        "extraction schedules wait for it for up to %.1f s",
                        due_node,
                        self.settings.redis_breaker_s,
                    )
                self.counters["schedules_held"] += 1
                self.buffer.add_failed(self._schedule_item(item, due_ms), exc)
                return
            self._breakers.ok(due_node)
            return
        self.counters["schedules_held"] += 1
        self.buffer.add(self._schedule_item(item, due_ms))

    @staticmethod
    def _schedule_item(item: PendingWrite, due_ms: int) -> PendingWrite:
        """A schedule-only buffer item for ``item``'s conversation, due at ``due_ms``."""
        return PendingWrite(
            {"prefix": item.record.get("prefix"), "ref": item.record.get("ref")},
            None,
            item.call_id,
            schedule_at=due_ms,
        )

    async def _retry_schedule(self, item: PendingWrite, keys: ConversationKeys) -> None:
        """A schedule-only buffer item: make the conversation due, never later than it is. A
        transient failure raises (the buffer retries it); a refusal is counted and said."""
        assert item.schedule_at is not None
        try:
            await self.queue.schedule(keys, item.schedule_at, earlier_only=True)
        except Exception as exc:
            kind = classify(exc)
            if kind.transient:
                raise
            self.counters[f"redis_refused_{kind.value}"] += 1
            self.counters["followup_refused"] += 1
            self._refusals.emit(
                f"followup:{fault_key(kind, exc)}",
                logging.ERROR,
                "memory hook: turns stored, but scheduling their extraction failed "
                f"({explain(kind, exc, prefix=keys.prefix)})",
            )
            return
        due_node = self._due_node
        if due_node:
            self._breakers.ok(due_node)
        self.counters["schedules_retried_ok"] += 1

    def _node(self, keys: ConversationKeys) -> str:
        """The Redis node of a conversation (``""``: one server, every key on it)."""
        return node_of(self.store.redis, keys.turns)

    @property
    def _breakers(self) -> NodeBreakers:
        """The breakers of the Cluster's nodes (made at first use)."""
        breakers = self.__dict__.get("_node_breakers")
        if breakers is None:
            breakers = NodeBreakers(self.settings.redis_breaker_s, BREAKER_PROBE_S)
            self.__dict__["_node_breakers"] = breakers
        assert isinstance(breakers, NodeBreakers)
        return breakers

    def _breaker_open(self, keys: ConversationKeys | None = None) -> bool:
        """True while a request for ``keys`` should skip Redis: the whole client's breaker is
        open, or (on a Cluster) the breaker of the node holding ``keys``; ``None``: the whole
        client's only. Half-open: every ``BREAKER_PROBE_S`` one request tries Redis anyway, so
        memory is back within that long of Redis answering."""
        now = time.monotonic()
        if now < self._redis_down_until:
            if now >= self._next_probe:
                self._next_probe = now + BREAKER_PROBE_S
                return False
            return True
        if keys is None:
            return False
        node = self._node(keys)
        return node != "" and self._breakers.is_open(node)

    def _probing(self, keys: ConversationKeys) -> bool:
        """True when a call for ``keys`` is a probe (its breaker is tripped, half-open)."""
        if time.monotonic() < self._redis_down_until:
            return True
        node = self._node(keys)
        return node != "" and self._breakers.tripped(node)

    def _trip_breaker(
        self, keys: ConversationKeys | None = None, exc: BaseException | None = None
    ) -> None:
        """After a Redis failure (one that a reconnect did not mend), skip Redis for up to
        ``redis_breaker_s`` (a circuit breaker), probing every ``BREAKER_PROBE_S``: for the
        node holding ``keys`` on a Cluster (users on healthy nodes keep memory), for the whole
        client on one server or when ``keys`` is ``None``.

        Only an outage trips it. ``exc`` is the failure (default: the exception being handled,
        when called from an ``except`` block); a refusal (a missing permission, the memory
        limit, one user's key of another type, READONLY) comes at once and leaves other
        requests and users able to use Redis: it is counted by kind and said in one line per
        period instead, and nothing trips."""
        failure = exc if exc is not None else sys.exc_info()[1]
        if failure is not None:
            kind = classify(failure)
            if kind is not RedisFault.UNREACHABLE:
                if kind.said:
                    self.counters[f"redis_refused_{kind.value}"] += 1
                self._refusals.emit(
                    f"read:{fault_key(kind, failure)}",
                    logging.ERROR if kind.said else logging.WARNING,
                    f"memory hook: {explain(kind, failure, prefix=self.settings.key_prefix)}; "
                    "requests go on without memory where Redis refuses them",
                )
                return
        node = "" if keys is None else self._node(keys)
        if node:
            if self._breakers.trip(node):
                self.counters["breaker_trips"] += 1
                logger.warning(
                    "memory hook: Redis node %s failed; memory is off for its users for up to "
                    "%.1f s",
                    node,
                    self.settings.redis_breaker_s,
                )
            return
        now = time.monotonic()
        if now >= self._redis_down_until:
            self.counters["breaker_trips"] += 1
            logger.warning(
                "memory hook: Redis failed; memory is off for up to %.1f s",
                self.settings.redis_breaker_s,
            )
        self._redis_down_until = now + self.settings.redis_breaker_s
        self._next_probe = now + BREAKER_PROBE_S

    def _redis_ok(self, keys: ConversationKeys | None = None) -> None:
        """Redis answered (for ``keys``: its node): close the breaker."""
        node = "" if keys is None else self._node(keys)
        if node:
            self._breakers.ok(node)
        else:
            self._redis_down_until = 0.0

    def _spawn(self, coroutine: Any) -> None:
        """Run a post-call write in the background: kept referenced, its failure counted and
        logged (``postcall_errors``), never left as "Task exception was never retrieved"."""

        async def guarded() -> None:
            try:
                await coroutine
            except Exception:
                self.counters["postcall_errors"] += 1
                logger.exception("memory hook: a background write failed")

        task = asyncio.ensure_future(guarded())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def drain(self) -> None:
        """Wait for background writes and the outage buffer (tests and shutdown)."""
        if self._buffer is not None:
            await self._buffer.drain()
        while self._background:
            await asyncio.gather(*list(self._background), return_exceptions=True)

    # -- response headers ----------------------------------------------------------------------

    async def async_post_call_response_headers_hook(
        self,
        data: dict[str, Any],
        user_api_key_dict: Any,
        response: object,
        request_headers: dict[str, str] | None = None,
        litellm_call_info: dict[str, object] | None = None,
    ) -> dict[str, str] | None:
        """``x-memory-outcome`` on every response of a memory-enabled alias (:mod:`.outcomes`);
        ``x-memory-hook-ms`` and ``x-memory-layers`` too when ``x-memory-debug`` was sent."""
        try:
            outcome = read_outcome(data)
            out = {OUTCOME_HEADER: outcome} if outcome else {}
            headers = {k.lower(): v for k, v in (request_headers or {}).items()}
            if not headers.get(DEBUG_HEADER) and not _header_from_data(data):
                return out or None
            record = self._verified_record(data)
            if record is None:
                return {**out, "x-memory-layers": "{}"}
            return {
                **out,
                "x-memory-hook-ms": str(record.get("hook_ms", "")),
                "x-memory-layers": json.dumps(record.get("layers", {}), separators=(",", ":")),
            }
        except Exception:
            logger.exception("memory hook: response headers failed")
            return None


#: ``HSET`` of a response id into a conversation's ``calls`` hash, only while it exists (it
#: expires with the conversation; a write that did not reach Redis leaves no key without TTL)
_REMEMBER_REPLY = """
if redis.call('EXISTS', KEYS[1]) == 1 then return redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) end
return 0
"""


def _int(value: Any) -> int:
    """An integer field of a record (0 when missing or malformed)."""
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def _header_from_data(data: Any) -> bool:
    """True when the request carried the debug header (in either LiteLLM metadata field)."""
    return any(
        request_headers({"metadata": metadata}).get(DEBUG_HEADER)
        for metadata in metadata_dicts(data)
    )


def _with_prefill(reply: dict[str, Any], prefill: str, name: str = "") -> dict[str, Any]:
    """The reply a prefilled request stored: the prefill, then the model's continuation (a
    reply that already starts with the prefill is kept as it is), with the prefill's ``name``
    (the speaker a roleplay frontend wrote) unless the reply has its own."""
    if name and not reply.get("name"):
        reply = {**reply, "name": name}
    content = reply.get("content")
    text = content if isinstance(content, str) else ""
    # the recorded prefill is in its stored form (a lone surrogate as U+FFFD), and so is the
    # stored reply (message_to_turn): a reply that repeats the prefill as sent repeats it
    if without_surrogates(text).startswith(prefill):
        return reply
    return {**reply, "content": prefill + text}


#: providers (LiteLLM's names) that move every system message to the top of the prompt: the
#: cache layout's tail goes in the user's last message for them
SYSTEM_ON_TOP_PROVIDERS = frozenset(
    {"anthropic", "bedrock", "bedrock_converse", "gemini", "vertex_ai", "vertex_ai_beta"}
)


#: providers (LiteLLM's names) that cache a prompt's prefix only up to a ``cache_control`` mark
MARKED_CACHE_PROVIDERS = frozenset({"anthropic", "bedrock", "bedrock_converse"})


def _router_provider(model: str) -> str | None:
    """The provider (LiteLLM's name) of the first deployment of an alias in the running
    proxy's router; ``None`` when there is no router or it cannot be told."""
    from litellm.proxy import proxy_server

    router = getattr(proxy_server, "llm_router", None)
    if router is None:
        return None
    for deployment in router.get_model_list(model_name=model) or ():
        params = deployment.get("litellm_params") if isinstance(deployment, dict) else None
        if isinstance(params, dict) and isinstance(params.get("model"), str):
            try:
                _, provider, _, _ = litellm.get_llm_provider(
                    model=params["model"], custom_llm_provider=params.get("custom_llm_provider")
                )
            except Exception:  # an unknown provider: the tail stays a system message
                return None
            return str(provider)
    return None


def _router_limits(model: str) -> dict[str, Any] | None:
    """``max_input_tokens`` / ``max_output_tokens`` of an alias's first deployment in the
    running proxy's router: its ``model_info``, else LiteLLM's model map for its model."""
    info = dict(_router_model_info(model) or {})
    if info.get("max_input_tokens"):
        return info
    from litellm.proxy import proxy_server

    router = getattr(proxy_server, "llm_router", None)
    for deployment in (router.get_model_list(model_name=model) or ()) if router else ():
        params = deployment.get("litellm_params") if isinstance(deployment, dict) else None
        if isinstance(params, dict) and isinstance(params.get("model"), str):
            try:
                known = litellm.get_model_info(params["model"])
            except Exception:  # not in LiteLLM's map: no declared window
                return info or None
            return {**{k: known.get(k) for k in ("max_input_tokens", "max_output_tokens")}, **info}
    return info or None


def _must_send(messages: object, history: str) -> list[Any]:
    """The client's messages that go to the model whatever the budgets: its system messages
    and its new turn (from its last user message on), or all of them with ``history: keep``."""
    if not isinstance(messages, list):
        return []
    if history == "keep":
        return messages
    last_user = max((i for i, m in enumerate(messages) if _role(m) == "user"), default=0)
    return [
        m for i, m in enumerate(messages) if i >= last_user or _role(m) in ("system", "developer")
    ]


def _read_outcome(mode: str, temporary: bool) -> str:
    """The outcome of a request whose memory was read: ``used`` when its turn is stored."""
    if mode == "read_write":
        return "used"
    return "temporary" if temporary else "read_only"


def _role(message: object) -> object:
    return message.get("role") if isinstance(message, dict) else None


def _router_model_info(model: str) -> dict[str, Any] | None:
    """``model_info`` of the first deployment of an alias in the running proxy's router."""
    from litellm.proxy import proxy_server

    router = getattr(proxy_server, "llm_router", None)
    if router is None:
        return None
    for deployment in router.get_model_list(model_name=model) or ():
        info = deployment.get("model_info") if isinstance(deployment, dict) else None
        if isinstance(info, dict):
            return info
    return None


memory_hook = MemoryHook()
