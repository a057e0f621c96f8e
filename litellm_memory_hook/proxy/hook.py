"""The LiteLLM callback: long memory for chat completions, the Responses API and Anthropic
Messages, stored in Redis. One instance per proxy process (:data:`memory_hook`), named in
``litellm_settings.callbacks`` (through :mod:`litellm_memory_hook.proxy_callback`).

Each hook reads as a few steps over the memory engine (:mod:`litellm_memory_hook.engine`):

* pre-call: find the client API's adapter (:mod:`litellm_memory_hook.protocols`) and the
  alias's memory config; take the request's chat-completions view; decide the turn
  (:func:`.admission.admit`); let the engine rebuild it; write the messages back into the
  request (``adapter.apply``), the outcome (:mod:`.outcomes`) and the signed record
  (:mod:`.request_data`) into its metadata;
* post-call (a whole reply, or a stream's end): read the reply with the adapter, let the engine
  store the turn and schedule its extraction;
* response headers: ``x-memory-outcome``, and with ``x-memory-debug: 1`` the hook's time and
  the layers' sizes.

Failure policy (docs/design.md): every error in our code or in Redis is logged and counted, and
the request goes on with the client's own messages (and the alias's rules); the post-call hooks
never raise and always return ``None``. Configuration: docs/configuration.md; per-request
controls: docs/clients.md.
"""

from __future__ import annotations

import contextlib
import gc
import json
import logging
import time
from collections import Counter
from collections.abc import AsyncGenerator, Callable
from typing import Any

import redis.asyncio as aioredis
from litellm.integrations.custom_logger import CustomLogger

from litellm_memory_hook.core import recall
from litellm_memory_hook.core.assemble import with_rules
from litellm_memory_hook.core.controls import ControlError
from litellm_memory_hook.engine.memory_engine import RECONNECT_OPTIONS, MemoryEngine
from litellm_memory_hook.engine.record import TurnRecord
from litellm_memory_hook.engine.write_buffer import PendingWrite
from litellm_memory_hook.errors import ConfigError
from litellm_memory_hook.extraction.client import ExtractionModel, RouterModel
from litellm_memory_hook.extraction.worker import ExtractionWorker
from litellm_memory_hook.protocols import ProtocolAdapter, adapter_for, adapter_named, responses
from litellm_memory_hook.proxy.admission import MemoryRequiredError, admit, unread
from litellm_memory_hook.proxy.aliases import AliasInfo
from litellm_memory_hook.proxy.metrics import HookMetrics, MetricsPublisher, log_event
from litellm_memory_hook.proxy.outcomes import OUTCOME_HEADER, note_outcome, read_outcome
from litellm_memory_hook.proxy.request_data import (
    METADATA_KEY,
    debug_requested,
    drop_client_record,
    raw_record,
    request_metadata,
)
from litellm_memory_hook.settings import AliasMemoryConfig, MemorySettings, load_settings
from litellm_memory_hook.store.client import client_for_settings
from litellm_memory_hook.store.keys import ConversationKeys
from litellm_memory_hook.store.queue import ExtractionQueue
from litellm_memory_hook.store.redis_store import MemoryStore
from litellm_memory_hook.store.workers import KIND_PROXY

logger = logging.getLogger("litellm_memory_hook")


class MemoryHook(CustomLogger):
    """The memory hook: LiteLLM's methods over one :class:`MemoryEngine`.

    Args:
        settings: global settings; default: read from ``litellm.callback_settings`` and the
            environment at the first request.
        redis: an asyncio Redis client (``decode_responses=False``); default: from
            ``settings.redis.url``.
        alias_lookup: model alias -> its ``model_info`` dict; default: the proxy's router.
        model: the extraction model of the in-proxy worker; default: the proxy's router.
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
        self._settings = settings
        self._redis = redis
        self._model = model
        self._engine: MemoryEngine | None = None
        self._worker: ExtractionWorker | None = None
        self._publisher: MetricsPublisher | None = None
        self.aliases = AliasInfo(alias_lookup)
        #: every count of the hook and its engine: the one object the metrics read
        self.counters: Counter[str] = Counter()
        self.metrics = HookMetrics(self.counters)

    # -- what the hook runs on -----------------------------------------------------------------

    @property
    def settings(self) -> MemorySettings:
        """The global settings (read once, lazily: config.yaml is parsed after import)."""
        if self._settings is None:
            import litellm

            self._settings = load_settings(getattr(litellm, "callback_settings", None))
        return self._settings

    @property
    def engine(self) -> MemoryEngine:
        """The memory engine (made at first use, its Redis client on the running loop)."""
        if self._engine is None:
            redis = self._redis or client_for_settings(self.settings, **RECONNECT_OPTIONS)
            self._engine = MemoryEngine(self.settings, redis, self.counters, self._wake_worker)
        return self._engine

    @property
    def store(self) -> MemoryStore:
        """The Redis store."""
        return self.engine.store

    @property
    def queue(self) -> ExtractionQueue:
        """The extraction schedule (due set, leases, counters) on the same Redis."""
        return self.engine.queue

    def forgetting(
        self, keys: ConversationKeys, *, whole_user: bool
    ) -> contextlib.AbstractAsyncContextManager[list[PendingWrite]]:
        """Around a forget: the conversation's (or user's) writes waiting in the outage buffer
        are taken out (:meth:`~litellm_memory_hook.engine.commit.TurnWriter.forgetting`)."""
        return self.engine.forgetting(keys, whole_user=whole_user)

    def alias_config(self, model: object) -> AliasMemoryConfig | None:
        """The memory config of a model alias, ``None`` when memory is off for it (cached).

        Raises:
            ConfigError: the alias's ``model_info.memory`` block is invalid.
        """
        return self.aliases.config(model)

    def ensure_worker(self) -> None:
        """Start the in-proxy extraction worker once, on the proxy's event loop (off when
        ``extraction.worker_in_proxy`` or ``extraction.enabled`` is false); :meth:`shutdown`
        stops it."""
        settings = self.settings
        if self._worker is not None or not (
            settings.extraction.worker_in_proxy and settings.extraction.enabled
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

    def _wake_worker(self) -> None:
        if self._worker is not None:
            self._worker.wake()

    def ensure_metrics_publisher(self) -> None:
        """Start publishing this process's metrics to Redis once (a scrape answered by any
        process renders every process's series); :meth:`shutdown` stops it.

        Raises:
            ConfigError: the settings are invalid (there is no store to publish to).
        """
        if self._publisher is None:
            self._publisher = MetricsPublisher(
                self.metrics, self.store.redis, self.settings.storage.key_prefix
            )
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

    async def drain(self) -> None:
        """Wait for background writes and the outage buffer (tests and shutdown)."""
        if self._engine is not None:
            await self._engine.drain()

    # -- pre-call ------------------------------------------------------------------------------

    async def async_pre_call_hook(
        self, user_api_key_dict: Any, cache: Any, data: dict[str, Any], call_type: Any
    ) -> dict[str, Any] | None:
        """Rebuild the request's messages from memory; return ``data`` (changed or not).

        Raises:
            fastapi.HTTPException: 400 when the alias requires memory and no user id was sent,
                or a per-request control is invalid.
        """
        started = time.perf_counter()
        field = "metadata"  # where the outcome goes: the adapter's metadata field
        try:
            if not isinstance(data, dict):
                return data
            drop_client_record(data)
            adapter = adapter_for(call_type)
            if adapter is None:
                return data
            field = adapter.metadata_field
            alias = self.alias_config(data.get("model"))
            if alias is None:
                return data
            view = adapter.view(data)
            passed = unread(view, self.counters)
            if passed is not None:
                note_outcome(self.counters, data, field, passed)
                return data  # the proxy judges it as the client sent it
            assert view is not None
            self.ensure_worker()
            if self.settings.gc_freeze:
                freeze_startup_objects()
            await self._rebuild(view, user_api_key_dict, alias, started, adapter)
            adapter.apply(data, view)
        except (MemoryRequiredError, ControlError) as exc:
            from fastapi import HTTPException

            no_user = isinstance(exc, MemoryRequiredError)
            self.counters["rejected_no_user" if no_user else "rejected_controls"] += 1
            note_outcome(self.counters, data, field, "no_user" if no_user else "invalid_request")
            raise HTTPException(status_code=400, detail=str(exc)) from exc
        except ConfigError as exc:
            self.counters["config_errors"] += 1
            note_outcome(self.counters, data, field, "config_error")
            logger.error("memory hook: bad configuration for %r: %s", data.get("model"), exc)
            log_event("fail_open", logging.WARNING, reason="config", model=str(data.get("model")))
        except Exception:
            self.counters["precall_errors"] += 1
            note_outcome(self.counters, data, field, "error")
            logger.exception("memory hook: pre-call failed; passing the request through")
            log_event("fail_open", logging.WARNING, reason="error", model=str(data.get("model")))
        return data

    async def _rebuild(
        self,
        view: dict[str, Any],
        auth: Any,
        alias: AliasMemoryConfig,
        started: float,
        adapter: ProtocolAdapter,
    ) -> None:
        """Rebuild the chat-completions ``view`` of a request: its ``messages`` (the adapter
        writes them back into the request's own fields), its outcome and its record."""
        raw, rules = view.get("messages"), alias.system_prompt.strip()
        turn = admit(
            view,
            auth,
            alias,
            adapter,
            settings=self.settings,
            aliases=self.aliases,
            counters=self.counters,
            started=started,
        )
        if isinstance(turn, str):  # no memory for it: the alias's rules still apply
            note_outcome(self.counters, view, "metadata", turn)
            view["messages"] = with_rules(raw, rules)
            return
        try:
            rebuilt = await self.engine.rebuild(turn)
        except Exception:
            view["messages"] = with_rules(raw, rules)  # the alias's rules hold whatever failed
            raise
        view["messages"] = (
            rebuilt.messages if rebuilt.messages is not None else with_rules(raw, rules)
        )
        note_outcome(self.counters, view, "metadata", rebuilt.outcome)
        if rebuilt.skipped:
            log_event("fail_open", logging.INFO, reason="breaker", model=turn.model)
        if rebuilt.reply_known is not None:
            view[responses.SERVED] = rebuilt.reply_known
        if rebuilt.record is not None:
            request_metadata(view)[METADATA_KEY] = rebuilt.record
        if rebuilt.prepared is not None:
            self.metrics.observe_rebuild(
                turn.who.keys.ref,
                rebuilt.prepared.layer_chars,
                rebuilt.elapsed_ms,
                recalled=len(rebuilt.prepared.recalled),
            )

    # -- post-call -----------------------------------------------------------------------------

    async def async_post_call_success_hook(
        self, data: dict[str, Any], user_api_key_dict: Any, response: Any
    ) -> None:
        """Store the new turn and the reply of a non-streaming call. Never raises; returns None."""
        try:
            responses.restore_echo(data, response)  # before anything else can fail
            record = self._pending_record(data)
            if record is not None:
                adapter = adapter_named(record.protocol)
                call_id = str(data.get("litellm_call_id") or "")
                await self.engine.commit(record, adapter.reply_message(response), call_id)
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
        accumulator = adapter_named(record.protocol if record else None).accumulator()
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
                        await self.engine.commit(record, accumulator.message(), call_id)
                        reply_id = getattr(accumulator, "reply_id", None)
                        await self._remember_reply(record, reply_id, call_id)
                    except Exception:
                        self.counters["postcall_errors"] += 1
                        logger.exception("memory hook: storing a stream failed")
                else:
                    self.counters["streams_cut"] += 1
                    commit = self.engine.commit(
                        record, accumulator.message(), call_id, partial=True
                    )
                    self.engine.spawn(commit)

    async def _remember_reply(self, record: TurnRecord, reply_id: object, call_id: str) -> None:
        """Note a stored reply's response id, so a continuation of it is served from Redis."""
        if isinstance(reply_id, str) and reply_id:
            await self.engine.remember_reply(record, responses.RESPONSE_FIELD + reply_id, call_id)

    def _pending_record(self, data: Any) -> TurnRecord | None:
        """The record the pre-call hook left in the request's metadata, if genuine and it
        stores a turn. The record travels in request metadata, which clients also write: one
        this process did not sign (a client sent one, or it was changed) is ignored and
        counted, so no request can write into another conversation or forge turns."""
        record = self.engine.opened(raw_record(data))
        return record if record is not None and record.write else None

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
            if not debug_requested(data, request_headers):
                return out or None
            record = self.engine.opened(raw_record(data))
            if record is None:
                return {**out, "x-memory-layers": "{}"}
            return {
                **out,
                "x-memory-hook-ms": str(record.hook_ms),
                "x-memory-layers": json.dumps(dict(record.layers), separators=(",", ":")),
            }
        except Exception:
            logger.exception("memory hook: response headers failed")
            return None


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


memory_hook = MemoryHook()
