"""Whether a request to a memory-enabled alias gets memory, and the turn the engine rebuilds
for it (:func:`admit`), decided before Redis is read. A request the hook cannot read, or an
extraction job's own call, is not read at all (:func:`unread`).

A request gets no memory when it asks for none (``metadata.memory_mode: off``), is a
frontend's side request (a title, tags), or has no tenant or no usable user id; its messages
then get the alias's rules only. Otherwise the request's controls (docs/clients.md: mode,
persona, custom instructions, timezone, regenerate, flush), its identity
(:mod:`.identity`) and the alias's settings and provider (:mod:`.aliases`) make a
:class:`~litellm_memory_hook.engine.turn.TurnRequest`.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

from litellm_memory_hook.core.controls import effective_mode, read_controls
from litellm_memory_hook.core.messages import is_valid_request
from litellm_memory_hook.core.side_requests import side_request_pattern, temporary_pattern
from litellm_memory_hook.engine.options import ContextOptions
from litellm_memory_hook.engine.turn import TurnRequest
from litellm_memory_hook.errors import MemoryHookError
from litellm_memory_hook.extraction.prompt import is_extraction_call
from litellm_memory_hook.protocols import ProtocolAdapter, responses
from litellm_memory_hook.protocols.chat import CHAT
from litellm_memory_hook.proxy.aliases import AliasInfo
from litellm_memory_hook.proxy.identity import identify, tenant_from_auth
from litellm_memory_hook.proxy.request_data import USER_PART_TYPES, request_metadata
from litellm_memory_hook.settings import AliasMemoryConfig, MemorySettings

logger = logging.getLogger("litellm_memory_hook")


class MemoryRequiredError(MemoryHookError):
    """An alias that requires memory got a request without a usable user id."""


def unread(view: dict[str, Any] | None, counters: Counter[str]) -> str | None:
    """The outcome of a request the hook does not read (counted), ``None`` for one it reads:
    a shape it cannot read (``invalid_request``: the proxy judges it as the client sent it), an
    extraction job's own call (``extraction``)."""
    if view is not None and is_extraction_call(view.get("messages")):
        counters["extraction_calls_passed"] += 1
        return "extraction"
    if view is None or not is_valid_request(view.get("messages"), USER_PART_TYPES):
        counters["invalid_passthrough"] += 1
        return "invalid_request"
    return None


def admit(
    view: dict[str, Any],
    auth: Any,
    alias: AliasMemoryConfig,
    adapter: ProtocolAdapter,
    *,
    settings: MemorySettings,
    aliases: AliasInfo,
    counters: Counter[str],
    started: float,
) -> TurnRequest | str:
    """The turn of the chat-completions ``view`` of a request, or the outcome of a request that
    gets no memory (``off``, ``side_request``, ``no_tenant``, ``no_user``; counted here).

    Raises:
        MemoryRequiredError: the alias requires memory and the request has no user id.
        ControlError: a per-request control is invalid.
    """
    metadata = request_metadata(view)
    controls = read_controls(metadata)
    mode = effective_mode(controls.mode, alias.mode)
    if mode == "off":
        counters["mode_off"] += 1
        return "off"
    side = side_request_pattern(view.get("messages"), settings.requests.side_patterns)
    if side is not None:
        counters["side_requests"] += 1
        logger.info("memory hook: side request (%s); no memory, not stored", side)
        return "side_request"
    if tenant_from_auth(auth) is None:  # no team, user or key: no tenant, no memory
        counters["no_tenant_passthrough"] += 1
        logger.info("memory hook: the caller has no team, user or key id; no memory")
        return "no_tenant"
    model = view.get("model")
    namespace = alias.namespace or str(model)
    who = identify(
        view,
        auth,
        prefix=settings.storage.key_prefix,
        namespace=namespace,
        user_header=settings.identity.user_header,
        memory_scope=alias.memory_scope,
        alias=str(model),
        conversation_header=settings.identity.conversation_header,
        # each protocol's default conversation is its own (a whole-history client of one
        # must not read another's turns as messages it deleted); memories are shared
        default_conversation=None if adapter is CHAT else f"{namespace}.{adapter.name}",
        claude_code_user=settings.identity.claude_code_user,
    )
    if who is None:
        if alias.required:
            raise MemoryRequiredError(
                f"model {model!r} needs a user id for memory: send the OpenAI 'user' field"
                + (
                    f" or the {settings.identity.user_header!r} header"
                    if settings.identity.user_header
                    else ""
                )
            )
        counters["no_user_passthrough"] += 1
        logger.info("memory hook: no usable user id for %r; passing through", model)
        return "no_user"
    temporary = temporary_pattern(
        who.conversation, settings.requests.temporary_conversation_patterns
    )
    if temporary is not None and mode == "read_write":  # a temporary chat: read-only
        counters["temporary_chats"] += 1
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
        # an API whose one system prompt is at the top (Anthropic Messages) takes the tail in
        # the user's message whatever the provider behind the alias
        tail_in_user=on_top or aliases.tail_in_user(alias, model),
        tail_after_tools=on_top,
        cache_marks=aliases.cache_marks(alias, model),
        history=adapter.history_mode(view) if alias.history == "auto" else alias.history,
    )
    return TurnRequest(
        model=str(model),
        messages=view.get("messages"),
        who=who,
        options=options,
        limit=aliases.limit(view),
        call_id=str(view.get("litellm_call_id") or ""),
        mode="read_only" if mode == "read_only" else "read_write",
        temporary=temporary is not None,
        flush=controls.flush,
        extract=alias.extraction,
        started=started,
        protocol=adapter.name,
        previous_reply=_previous_reply(view),
    )


def _previous_reply(view: dict[str, Any]) -> str | None:
    """The ``calls`` field of the stored reply a Responses API continuation names
    (``previous_response_id``), when this hook serves it: the alias's provider does not
    replay it itself (:mod:`litellm_memory_hook.protocols.responses`)."""
    continues = view.get(responses.CONTINUES)
    if not isinstance(continues, str) or responses.provider_replays(view.get("model")):
        return None
    return responses.RESPONSE_FIELD + continues
