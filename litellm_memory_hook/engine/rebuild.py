"""Rebuilding a request's messages: read state, plan the turn, fit the window, build the
layers, assemble.

:func:`rebuild` is the one path of both rebuilds: :func:`prepare` reads the conversation first
(one round trip, with the recall postings of the new message's words), :func:`prepare_offline`
rebuilds while Redis is down, from an empty conversation and the turns this process holds in
its outage buffer. Planning is pure (:mod:`litellm_memory_hook.core.plan`), and so is the window
(:mod:`litellm_memory_hook.core.window`); the layers are :mod:`.layers`, the final messages
:func:`~litellm_memory_hook.core.assemble.assemble`. The flow: docs/design.md (request flow);
the prompt's bands: docs/prompt.md.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from litellm_memory_hook.core.assemble import assemble
from litellm_memory_hook.core.cache_marks import add_marks
from litellm_memory_hook.core.models import ConversationState, Turn
from litellm_memory_hook.core.plan import TurnPlan, plan_with_buffered
from litellm_memory_hook.core.window import Window, fit_window
from litellm_memory_hook.engine.layers import EpochUpdate, build_layers, last_user_words
from litellm_memory_hook.engine.options import ContextOptions
from litellm_memory_hook.engine.recall_step import Stored, recall_query
from litellm_memory_hook.slices import in_thread
from litellm_memory_hook.store.epochs import window_start
from litellm_memory_hook.store.keys import ConversationKeys, MemoryKeys
from litellm_memory_hook.store.redis_store import MemoryStore

Message = dict[str, Any]


@dataclass
class PreparedRequest:
    """The rebuilt request and what the post-call step needs.

    Attributes:
        messages: the messages to send upstream (one system message, then the window).
        plan: the turn plan (pending writes, regenerate).
        layer_chars: characters per system-message layer plus ``window`` (the recent messages);
            empty when Redis was not read.
        recalled: the recalled old turns, time order.
        cursor: the conversation's extraction cursor (seq extracted through).
        window_seqs: the seqs of the stored turns in the recent window, window order.
        forget_token: the forget tokens the read found (:attr:`ConversationState.
            forget_token`; ``""``: not read), which the write of the turn is checked against.
        epoch: what the cache layout records after the request (``None``: nothing).
    """

    messages: list[Message]
    plan: TurnPlan
    layer_chars: dict[str, int] = field(default_factory=dict)
    recalled: list[Turn] = field(default_factory=list)
    cursor: int = 0
    window_seqs: tuple[int, ...] = ()
    forget_token: str = ""
    epoch: EpochUpdate | None = None


#: a request with more messages than this is planned in a thread (:func:`rebuild`): planning
#: costs ~25 us a message (10,000 messages held the event loop ~250 ms)
PLAN_IN_THREAD_MESSAGES = 200


async def prepare(
    store: MemoryStore,
    keys: ConversationKeys,
    memory: MemoryKeys,
    raw_messages: object,
    options: ContextOptions,
    *,
    call_id: str = "",
    now_ms: int | None = None,
    buffered: Sequence[Turn] = (),
    superseded: Collection[int] = (),
) -> PreparedRequest | None:
    """Load the conversation and rebuild the request's messages.

    ``buffered``: the conversation's turns that wait in this process's outage buffer, taken
    before the load, and ``superseded`` the stored seqs they replace
    (:func:`~litellm_memory_hook.core.plan.plan_with_buffered`).

    Returns:
        ``None`` when the request has no new user turn (nothing to rebuild).

    Raises:
        StoreError: Redis failed (the hook then passes the request through unchanged).
    """
    now = now_ms if now_ms is not None else int(time.time() * 1000)
    # the words the user typed: an image's [image] placeholder is no word of theirs (a photo
    # recalled every earlier photo, and "image" in a question recalled them too)
    last_text = last_user_words(raw_messages)
    # With recall off, no postings are read at all.
    query = recall_query(last_text, options.recall, options.timezone, now)
    state, postings = await store.load(
        keys,
        memory,
        tail=options.budget.messages + 4,
        query_terms=query.terms,
        date_spans=query.spans,
        list_chats=query.user_scope,
    )
    stored = Stored(store, keys, memory, state, postings, query, last_text)
    return await rebuild(
        stored,
        raw_messages,
        options,
        call_id=call_id,
        now=now,
        buffered=buffered,
        superseded=superseded,
    )


async def prepare_offline(
    raw_messages: object,
    options: ContextOptions,
    *,
    call_id: str = "",
    buffered: Sequence[Turn] = (),
) -> PreparedRequest | None:
    """Rebuild the request's messages while Redis cannot be read: planned against an empty
    stored conversation and the turns this process holds for it in its outage buffer
    (``buffered``, oldest first); the layers are the request's own (:func:`~.layers.
    request_only_block`), and the window keeps its budgets whatever the history mode.

    Returns:
        ``None`` when the request has no new turn to store (it then goes as sent).
    """
    now = int(time.time() * 1000)
    return await rebuild(None, raw_messages, options, call_id=call_id, now=now, buffered=buffered)


async def rebuild(
    stored: Stored | None,
    raw_messages: object,
    options: ContextOptions,
    *,
    call_id: str,
    now: int,
    buffered: Sequence[Turn] = (),
    superseded: Collection[int] = (),
) -> PreparedRequest | None:
    """Plan the turn against the stored conversation (``None``: Redis down, an empty one), fit
    the window, build the layers and assemble the messages (``now``: epoch ms)."""
    state = stored.state if stored is not None else ConversationState(meta={}, tail=[])
    plan = await _plan(raw_messages, state, buffered, superseded, now, call_id, options)
    if plan is None:
        return None
    plan, fitted = await _window(stored, plan, options)
    window_seqs = [s for s in (plan.history_seqs[i] for i in fitted.history_indices) if s]
    layers = await build_layers(stored, plan, fitted, window_seqs, raw_messages, options, now)
    messages = assemble(
        plan.lead,
        fitted.messages,
        rules=options.operator_rules.strip(),
        memory_block=layers.head,
        tail=layers.tail,
        tail_in_user=options.tail_in_user,
        tail_after_tools=options.tail_after_tools,
    )
    if layers.marked:
        messages = add_marks(messages, _stable_ends(messages, options.tail_in_user))
    return PreparedRequest(
        messages=messages,
        epoch=layers.epoch,
        plan=plan,
        layer_chars=layers.layer_chars,
        recalled=layers.recalled,
        cursor=int(state.meta.get("cursor", "0") or 0),
        window_seqs=tuple(window_seqs),
        forget_token=state.forget_token,
    )


async def _plan(
    raw_messages: object,
    state: ConversationState,
    buffered: Sequence[Turn],
    superseded: Collection[int],
    now: int,
    call_id: str,
    options: ContextOptions,
) -> TurnPlan | None:
    """:func:`~litellm_memory_hook.core.plan.plan_with_buffered`; a long history in a
    thread."""
    planning = partial(
        plan_with_buffered,
        raw_messages,
        state,
        buffered,
        superseded=superseded,
        now_ms=now,
        call_id=call_id,
        regenerate_window_s=options.regenerate_window_s,
        max_stored_chars=options.max_stored_chars,
        regenerate=options.regenerate,
    )
    if isinstance(raw_messages, list) and len(raw_messages) > PLAN_IN_THREAD_MESSAGES:
        # a long history (a whole-history client's first request seeds all of it): planned in
        # a thread, so the event loop serves other requests meanwhile
        return await in_thread(planning)
    return planning()


async def _window(
    stored: Stored | None, plan: TurnPlan, options: ContextOptions
) -> tuple[TurnPlan, Window]:
    """The request's window (and its plan, with a question read back before its history when
    the window would start mid-exchange). Without the stored conversation (Redis down) the
    window keeps its budgets and does not step."""
    if stored is None:
        window = fit_window(
            plan.history,
            plan.new,
            max_chars=options.budget.chars,
            max_messages=options.budget.messages,
            verbatim=plan.verbatim,
        )
        return plan, window
    recorded = window_start(stored.state.meta) if options.layout == "cache" else 0
    fitted = _fit(plan, options, recorded)
    if _starts_mid_exchange(plan, fitted.history_indices):
        question = await stored.store.last_question(stored.keys, plan.history_seqs[0])
        if question is not None:
            plan = _asked_first(plan, question)
            fitted = _fit(plan, options, recorded)
    return plan, fitted


def _fit(plan: TurnPlan, options: ContextOptions, start: int) -> Window:
    """The request's window; in the cache layout trimmed in steps from ``start`` (the seqs of
    the plan's history name its messages). With ``history: keep``, a history the client sent
    is the window whole, as sent."""
    if options.history == "keep" and plan.verbatim:
        return fit_window(
            plan.history, plan.new, max_chars=sys.maxsize, max_messages=sys.maxsize, verbatim=True
        )
    cache = options.layout == "cache"
    return fit_window(
        plan.history,
        plan.new,
        max_chars=options.budget.chars,
        max_messages=options.budget.messages,
        verbatim=plan.verbatim,
        positions=plan.history_seqs if cache else (),
        start=start,
        low_water=options.low_water if cache else 1.0,
    )


def _starts_mid_exchange(plan: TurnPlan, history_indices: Sequence[int]) -> bool:
    """True when the stored tail read begins inside an exchange whose question is older (its
    first turns are replies or tool steps) and the window reached back to the tail's first
    question, or holds no stored turn when the tail has no question at all: the replies and
    steps before it went because their question was not there. An agent that sends only its
    new steps, many steps after its task; a follow-up, or a second one, after such a long
    episode. The window is then built again with that question read back before the stored
    history (one more read, in that case only; for a follow-up, the question and the
    episode's final reply take the place of its oldest steps)."""
    if plan.verbatim or not plan.history or plan.history[0].get("role") == "user":
        return False
    if plan.history_seqs[0] <= 1:  # the tail starts the conversation: nothing is older
        return False
    first_user = next(
        (i for i, m in enumerate(plan.history) if m.get("role") == "user"), len(plan.history)
    )
    return (history_indices[0] if history_indices else len(plan.history)) == first_user


def _asked_first(plan: TurnPlan, question: Turn) -> TurnPlan:
    """The plan with a question read back from the store put before its stored history."""
    return replace(
        plan,
        history=(question.to_message(), *plan.history),
        history_seqs=(question.seq, *plan.history_seqs),
    )


def _stable_ends(messages: Sequence[Message], tail_in_user: bool) -> list[int]:
    """Where the cache layout's stable parts end: the head (a first system message), then the
    window's last message before the tail, when the tail stands before a last user message."""
    ends = [0] if messages and messages[0].get("role") in ("system", "developer") else []
    if messages and messages[-1].get("role") == "user":
        ends.append(len(messages) - (2 if tail_in_user else 3))
    return ends
