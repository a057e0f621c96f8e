"""Rebuilding a request's messages from the stored conversation (the hook's I/O step).

:func:`prepare` does the I/O around the pure planning of :mod:`litellm_memory_hook.core.plan`:
one read of the conversation (with the recall postings of the new message's words), one read of
the recalled lines, then the system message (:mod:`litellm_memory_hook.core.prompt`) and the
recent window (:mod:`litellm_memory_hook.core.window`).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, Literal

from litellm_memory_hook.core.assemble import assemble
from litellm_memory_hook.core.budgets import Budget, cut_start, fit_items
from litellm_memory_hook.core.cache_marks import add_marks
from litellm_memory_hook.core.days import day_marks
from litellm_memory_hook.core.excerpt import ANALYSED_CHARS
from litellm_memory_hook.core.messages import (
    clean_messages,
    content_text,
    message_to_turn,
    typed_text,
    without_surrogates,
)
from litellm_memory_hook.core.model_window import shrink
from litellm_memory_hook.core.models import ConversationState, Turn
from litellm_memory_hook.core.plan import TurnPlan, passed_over, plan_with_buffered
from litellm_memory_hook.core.prompt import (
    HEAD_SECTIONS,
    TAIL_SECTIONS,
    PromptLayers,
    PromptWording,
    build_system_message,
    now_label,
)
from litellm_memory_hook.core.script import EARLIER_MESSAGES
from litellm_memory_hook.core.selection import related_items, select_items
from litellm_memory_hook.core.window import Window, fit_window
from litellm_memory_hook.protocols.base import HistoryMode
from litellm_memory_hook.proxy.recall_step import (
    RecallOptions,
    exclusion_start,
    recall_lines,
    recall_query,
)
from litellm_memory_hook.settings import AliasMemoryConfig, MemorySettings
from litellm_memory_hook.slices import in_thread
from litellm_memory_hook.store.epochs import HeadSnapshot, epoch_of, read_snapshot, window_start
from litellm_memory_hook.store.keys import ConversationKeys, MemoryKeys
from litellm_memory_hook.store.redis_store import MemoryStore

Message = dict[str, Any]


#: most lines recall ranks beyond its own number for window messages of unknown seq.
MAX_EXTRA_CANDIDATES = 16


@dataclass
class PreparedRequest:
    """The rebuilt request and what the post-call hooks need.

    Attributes:
        messages: the messages to send upstream (one system message, then the window).
        plan: the turn plan (pending writes, regenerate).
        layer_chars: characters per system-message layer plus ``window`` (the recent messages).
        recalled: the recalled old turns, time order.
        cursor: the conversation's extraction cursor (seq extracted through).
        window_seqs: the seqs of the stored turns in the recent window, window order.
        forget_token: the forget tokens the read found (:attr:`ConversationState.
            forget_token`; ``""``: not read), which the write of the turn is checked against.
    """

    messages: list[Message]
    plan: TurnPlan
    layer_chars: dict[str, int] = field(default_factory=dict)
    recalled: list[Turn] = field(default_factory=list)
    cursor: int = 0
    window_seqs: tuple[int, ...] = ()
    forget_token: str = ""
    epoch: EpochUpdate | None = None


@dataclass(frozen=True)
class EpochUpdate:
    """What the cache layout records after a request whose window stepped or whose epoch
    changed (:mod:`litellm_memory_hook.store.epochs`)."""

    start: int
    epoch: str
    snapshot: HeadSnapshot


@dataclass(frozen=True)
class ContextOptions:
    """Per-request knobs of :func:`prepare`."""

    budget: Budget = Budget()  # noqa: RUF009 (frozen, so one shared default is safe)
    operator_rules: str = ""
    recall: RecallOptions = RecallOptions()  # noqa: RUF009 (frozen, so one shared default is safe)
    regenerate_window_s: float = 300.0
    max_stored_chars: int = 32_000
    timezone: str | None = None
    wording: PromptWording | None = None
    persona: str = ""
    custom_instructions: str = ""
    regenerate: bool = False
    layout: Literal["cache", "seed"] = "seed"
    low_water: float = 0.6
    tail_in_user: bool = False
    tail_after_tools: bool = False
    cache_marks: bool = False
    history: HistoryMode = "window"

    @classmethod
    def for_alias(
        cls,
        settings: MemorySettings,
        alias: AliasMemoryConfig,
        *,
        timezone: str | None = None,
        persona: str = "",
        custom_instructions: str = "",
        regenerate: bool = False,
        tail_in_user: bool = False,
        tail_after_tools: bool = False,
        cache_marks: bool = False,
        history: HistoryMode = "window",
    ) -> ContextOptions:
        """The options of a request to ``alias``: its own values, else the global settings.
        ``tail_in_user``: the alias's provider moves system messages to the top (the cache
        layout's tail then goes in the user's last message; ``tail_after_tools``: after the
        tool results that end a request, too: :func:`~litellm_memory_hook.core.assemble.
        assemble`); ``cache_marks``: it caches only
        where ``cache_control`` marks say; ``history``: the request's history mode
        (:attr:`~litellm_memory_hook.settings.AliasMemoryConfig.history`)."""
        return cls(
            budget=Budget(
                chars=alias.recent_chars or settings.recent_chars,
                messages=alias.recent_messages or settings.recent_messages,
                pinned_chars=settings.pinned_chars,
                memory_chars=settings.memory_chars,
                summary_chars=settings.summary_chars,
            ),
            operator_rules=alias.system_prompt,
            recall=RecallOptions.for_alias(settings, alias),
            regenerate_window_s=settings.regenerate_window_s,
            max_stored_chars=settings.stored_text_chars,
            timezone=timezone or settings.timezone,
            wording=alias.wording,
            persona=persona,
            custom_instructions=custom_instructions,
            regenerate=regenerate,
            layout=alias.layout,
            low_water=alias.window_low_water,
            tail_in_user=tail_in_user,
            tail_after_tools=tail_after_tools,
            cache_marks=cache_marks,
            history=history,
        )


def fitted_to(options: ContextOptions, room_chars: int) -> ContextOptions:
    """``options`` with the layers' budgets cut so that what the hook adds takes at most
    ``room_chars`` characters (:func:`~litellm_memory_hook.core.model_window.shrink`'s order:
    recall, memories, summary, window, pinned); ``options`` itself when it fits already."""
    budget, recall = options.budget, options.recall
    recall_chars = recall.chars if recall.mode == "budget" else recall.k * RECALL_LINE_CHARS
    memory_factor = HEAD_MEMORY_FACTOR + TAIL_MEMORY_SHARE if options.layout == "cache" else 1
    costs = {
        "recall": recall_chars,
        "memories": int(budget.memory_chars * memory_factor),
        "summary": budget.summary_chars,
        "window": budget.chars,
        "pinned": budget.pinned_chars,
    }
    cut = shrink(costs, room_chars)
    if cut == costs:
        return options
    if cut["recall"] != recall_chars:
        recall = replace(recall, mode="budget", chars=cut["recall"], k=recall.k or 1)
    return replace(
        options,
        recall=recall,
        budget=replace(
            budget,
            memory_chars=int(cut["memories"] / memory_factor),
            summary_chars=cut["summary"],
            chars=max(cut["window"], 0),
            pinned_chars=cut["pinned"],
        ),
    )


#: characters a recalled line is counted at when recall takes a fixed number of lines.
RECALL_LINE_CHARS = 300


#: the cache layout's head shows up to this many times the memory budget: the head is billed at
#: the provider's cached rate (0.1x), and every memory it shows is one the volatile tail need not
#: repeat (the tail adds the memories the seed layout would choose for the message that the head
#: lacks)
HEAD_MEMORY_FACTOR = 2

#: share of the memory budget the tail gives to memories that share rare words with the user's
#: last message and are not in the head (highest score first). On LoCoMo dev (bench cost, 150
#: requests): without them the memories' cover fell from 0.631 to 0.131; with 0.2 the cover of
#: all layers is 0.812 (seed 0.795) at 0.50 of the seed layout's billed input (docs/cost.md)
TAIL_MEMORY_SHARE = 0.2

#: a request with more messages than this is planned in a thread (:func:`prepare`): planning
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

    ``buffered``: the conversation's turns that wait in this proxy's outage buffer, taken
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
    last_text = _last_user_words(raw_messages)
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
        plan = await in_thread(planning)
    else:
        plan = planning()
    if plan is None:
        return None
    cache = options.layout == "cache"
    recorded = window_start(state.meta) if cache else 0
    fitted = _fit(plan, options, recorded)
    if _starts_mid_exchange(plan, fitted.history_indices):
        question = await store.last_question(keys, plan.history_seqs[0])
        if question is not None:
            plan = _asked_first(plan, question)
            fitted = _fit(plan, options, recorded)
    window = fitted.messages
    window_seqs = [s for s in (plan.history_seqs[i] for i in fitted.history_indices) if s]
    # the client's messages the store may hold under a seq that was not matched (older than
    # the tail read): the window's first seq cannot exclude them from recall, their text does
    unmatched = [plan.history[i] for i in fitted.history_indices if not plan.history_seqs[i]]
    found = await recall_lines(
        store,
        keys,
        memory,
        state,
        postings,
        query,
        options.recall,
        exclude_from=_exclude_from(plan, window_seqs, state.last_seq),
        timezone=options.timezone,
        in_window=frozenset(
            (str(m.get("role")), without_surrogates(content_text(m.get("content"))).strip())
            for m in unmatched
        ),
        # such a message may still rank: rank that many more lines, so leaving it out does
        # not leave recall short
        extra_candidates=min(len(unmatched), MAX_EXTRA_CANDIDATES),
        unstored=_unstored(plan, fitted.history_indices, state, now, options.max_stored_chars),
        recallable=passed_over(state),
    )
    pinned = fit_items(state.pinned, options.budget.pinned_chars)
    head, update = _head(state, pinned, last_text, fitted.start, recorded, options)
    layers = replace(
        _request_layers(window, last_text, options),
        pinned=pinned,
        memories=head.memories,
        summary=head.summary,
        earlier_lines=found.lines,
        now=now_label(now, options.timezone) if cache else "",
        days=day_marks(_said(plan, fitted, state, now), now, options.timezone) if cache else (),
    )
    if cache:
        built = build_system_message(
            layers, options.wording, sections=HEAD_SECTIONS, reminder=False
        )
        related = related_items(
            state.memories,
            last_text,
            int(options.budget.memory_chars * TAIL_MEMORY_SHARE),
            shown=head.memories,
        )
        tail = build_system_message(
            replace(layers, memories=related),
            options.wording,
            sections=("memories", *TAIL_SECTIONS),
        )
        layer_chars = {k: built.layer_chars[k] + tail.layer_chars[k] for k in built.layer_chars}
    else:
        built, tail = build_system_message(layers, options.wording), None
        layer_chars = dict(built.layer_chars)
    layer_chars["rules"] = len(options.operator_rules.strip())
    layer_chars["window"] = sum(len(content_text(m.get("content"))) for m in window)
    messages = assemble(
        plan.lead,
        window,
        rules=options.operator_rules.strip(),
        memory_block=built.text,
        tail=tail.text if tail else "",
        tail_in_user=options.tail_in_user,
        tail_after_tools=options.tail_after_tools,
    )
    if cache and options.cache_marks:
        messages = add_marks(messages, _stable_ends(messages, options.tail_in_user))
    return PreparedRequest(
        messages=messages,
        epoch=update,
        plan=plan,
        layer_chars=layer_chars,
        recalled=list(found.turns),
        cursor=int(state.meta.get("cursor", "0") or 0),
        window_seqs=tuple(window_seqs),
        forget_token=state.forget_token,
    )


def _said(
    plan: TurnPlan, fitted: Window, state: ConversationState, now_ms: int
) -> list[tuple[int, str]]:
    """When each message of the window was said and its text, in window order (the stored
    turns' times; 0 for a client message the store does not hold), then the new turn, now."""
    when = {t.seq: t.ts_ms for t in state.tail}
    said = [
        (when.get(plan.history_seqs[i], 0), content_text(plan.history[i].get("content")))
        for i in fitted.history_indices
    ]
    said.extend(
        (now_ms, content_text(m.get("content"))) for m in plan.new if m.get("role") == "user"
    )
    return said


def _request_layers(
    window: Sequence[Mapping[str, Any]], last_text: str, options: ContextOptions
) -> PromptLayers:
    """The layers a request gives by itself, without Redis: the persona and custom instructions
    it sent (cut to their budget), and what the reminder reads. An agent that sends only its
    tool results has no user message in the request: the reminder names the script of the
    window's last one (its task); the user's earlier messages decide when the last one tells
    too little ("ok", "thanks")."""
    said = _user_words_newest_first(window, last_text)
    return PromptLayers(
        persona=cut_start(options.persona, options.budget.persona_chars),
        custom_instructions=cut_start(options.custom_instructions, options.budget.persona_chars),
        last_user_text=said[0] if said else "",
        earlier_user_texts=said[1:],
        timezone=options.timezone,
    )


def request_only_block(
    raw_messages: object, window: Sequence[Mapping[str, Any]], options: ContextOptions
) -> str:
    """The memory block of a request that cannot read Redis (an outage, the breaker open):
    the persona and custom instructions the request sent and the final reminder (the script of
    the user's last message, read with the window's earlier user messages, the turns said
    since Redis went down among them), without stored memories, summary or recalled lines.

    Args:
        raw_messages: the request's messages as the client sent them.
        window: the recent window the request is sent with.
        options: the alias's options (budgets, wording, the request's controls).
    """
    layers = _request_layers(window, _last_user_words(raw_messages), options)
    return build_system_message(layers, options.wording).text


#: most of a seeding request's own older messages ranked for recall (the newest of them):
#: indexing them here costs ~0.08 ms a message on the request path (measured on this project's
#: machine: +740 ms for a 10,000-message first request without a bound, 25-50 ms with it).
UNSTORED_RECALL_MAX = 200

#: most characters of those messages indexed on the request path (each message counted up to
#: :data:`~litellm_memory_hook.core.excerpt.ANALYSED_CHARS`, what its terms read): 200
#: messages of 5,000 characters held the event loop ~270 ms before this bound.
UNSTORED_RECALL_CHARS = 24_000


def _unstored(
    plan: TurnPlan,
    kept: Sequence[int],
    state: ConversationState,
    now_ms: int,
    max_chars: int,
) -> list[Turn]:
    """The client's history messages the window left out while the store holds nothing yet (a
    whole-history client's first request, or its first after a forget), the newest
    :data:`UNSTORED_RECALL_MAX` of them within :data:`UNSTORED_RECALL_CHARS`: this request seeds
    them, and until then only recall can bring their lines back."""
    if state.last_seq or not plan.history:
        return []
    window = set(kept)
    out: list[Turn] = []
    chars = 0
    for index in range(len(plan.history) - 1, -1, -1):
        if len(out) >= UNSTORED_RECALL_MAX or chars >= UNSTORED_RECALL_CHARS:
            break
        if index not in window:
            turn = message_to_turn(plan.history[index], ts_ms=now_ms, max_chars=max_chars)
            if turn is not None:
                out.append(turn)
                chars += min(len(turn.text), ANALYSED_CHARS)
    return out[::-1]


def _stable_ends(messages: Sequence[Message], tail_in_user: bool) -> list[int]:
    """Where the cache layout's stable parts end: the head (a first system message), then the
    window's last message before the tail, when the tail stands before a last user message."""
    ends = [0] if messages and messages[0].get("role") in ("system", "developer") else []
    if messages and messages[-1].get("role") == "user":
        ends.append(len(messages) - (2 if tail_in_user else 3))
    return ends


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


def _head(
    state: ConversationState,
    pinned: Sequence[str],
    last_text: str,
    start: int,
    recorded: int,
    options: ContextOptions,
) -> tuple[HeadSnapshot, EpochUpdate | None]:
    """The memories and summary the request shows, and what to record. In the seed layout,
    the memories that fit their budget chosen for the last message, and the summary, afresh.
    In the cache layout, the snapshot of the epoch (the window's start and the pinned
    memories), taken now when the conversation has none for it: then it and the window's
    start are to be recorded."""
    if options.layout != "cache":
        return _snapshot(state, last_text, options), None
    epoch = epoch_of(start, pinned)
    found = read_snapshot(state.meta, epoch)
    if found is not None:
        return found, None
    snapshot = _snapshot(state, last_text, options, HEAD_MEMORY_FACTOR)
    record = start > 0 or recorded > 0
    return snapshot, EpochUpdate(start, epoch, snapshot) if record else None


def _snapshot(
    state: ConversationState, last_text: str, options: ContextOptions, factor: int = 1
) -> HeadSnapshot:
    """The memories (``factor`` times their budget) and summary a head shows."""
    return HeadSnapshot(
        tuple(select_items(state.memories, last_text, options.budget.memory_chars * factor)),
        cut_start(state.summary, options.budget.summary_chars),
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


def _last_user_content(raw_messages: object) -> object:
    """The ``content`` of the request's last user message (``None`` without one)."""
    for message in reversed(clean_messages(raw_messages)):
        if message.get("role") == "user":
            return message.get("content")
    return None


def _last_user_words(raw_messages: object) -> str:
    """What the user typed in the request's last user message ("" without one), without the
    placeholders of its images or files, a lone surrogate in it as U+FFFD: its words are
    looked up in Redis (recall), which holds UTF-8 text only, and the reminder names its
    script."""
    text: str = without_surrogates(typed_text(_last_user_content(raw_messages)))
    return text


def _user_words_newest_first(window: Sequence[Mapping[str, Any]], last_text: str) -> list[str]:
    """What the user typed in the window's newest :data:`EARLIER_MESSAGES` + 1 user messages,
    newest first, headed by the request's own last user message (``last_text``) when the
    window does not end with it."""
    said: list[str] = []
    for message in reversed(window):
        if len(said) > EARLIER_MESSAGES:
            break
        if message.get("role") == "user":
            text = without_surrogates(typed_text(message.get("content")))
            if text:
                said.append(text)
    if last_text and said[:1] != [last_text]:
        said.insert(0, last_text)
    return said


def _exclude_from(plan: TurnPlan, window_seqs: list[int], last_seq: int) -> int:
    """The first seq recall never returns: the recent window's oldest, and never a stored turn
    the reply replaces (nor, for a regenerate, the repeated question before it): the model must
    not see the reply it is asked to write again."""
    start = exclusion_start(window_seqs, last_seq)
    if plan.replace:
        first = min(t.seq for t in plan.replace)
        start = min(start, first - 1 if not plan.pending else first)
    return max(start, 1)
