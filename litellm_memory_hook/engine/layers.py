"""The layers of a rebuilt request: what the request gives by itself (persona, custom
instructions, the reminder), and what Redis gives (pinned memories, memories and summary,
recalled lines, the date and the days said), built into the head and the tail of the prompt.

:func:`build_layers` is the layer step of :func:`~litellm_memory_hook.engine.rebuild.rebuild`:
with the stored conversation (:class:`Stored`) it reads the recalled lines (one more round
trip: :mod:`.recall_step`); without it (Redis down) only the request's own layers are built.
The prompt's bands and sections: docs/prompt.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from litellm_memory_hook.core.budgets import cut_start, fit_items
from litellm_memory_hook.core.days import day_marks
from litellm_memory_hook.core.excerpt import ANALYSED_CHARS
from litellm_memory_hook.core.message_text import content_text, typed_text, without_surrogates
from litellm_memory_hook.core.messages import clean_messages
from litellm_memory_hook.core.models import ConversationState, Turn
from litellm_memory_hook.core.plan import TurnPlan, passed_over
from litellm_memory_hook.core.prompt import (
    HEAD_SECTIONS,
    TAIL_SECTIONS,
    PromptLayers,
    build_system_message,
)
from litellm_memory_hook.core.script import EARLIER_MESSAGES
from litellm_memory_hook.core.selection import related_items, select_items
from litellm_memory_hook.core.stored_messages import message_to_turn
from litellm_memory_hook.core.time_labels import now_label
from litellm_memory_hook.core.window import Window
from litellm_memory_hook.engine.options import (
    HEAD_MEMORY_FACTOR,
    TAIL_MEMORY_SHARE,
    ContextOptions,
)
from litellm_memory_hook.engine.recall_step import (
    Shown,
    Stored,
    exclusion_start,
    recall_lines,
)
from litellm_memory_hook.store.epochs import HeadSnapshot, epoch_of, read_snapshot, window_start

#: most lines recall ranks beyond its own number for window messages of unknown seq.
MAX_EXTRA_CANDIDATES = 16


@dataclass(frozen=True)
class EpochUpdate:
    """What the cache layout records after a request whose window stepped or whose epoch
    changed (:mod:`litellm_memory_hook.store.epochs`)."""

    start: int
    epoch: str
    snapshot: HeadSnapshot


@dataclass(frozen=True)
class BuiltLayers:
    """The layers of one request, built.

    Attributes:
        head: the memory block of the first system message.
        tail: the cache layout's volatile tail (``""``: none).
        layer_chars: characters per layer (:data:`~litellm_memory_hook.core.prompt.
            LAYER_NAMES`) plus ``window``; empty when Redis was not read.
        recalled: the recalled old turns, time order.
        epoch: what the cache layout records after the request (``None``: nothing).
        marked: the stable parts get ``cache_control`` marks.
    """

    head: str
    tail: str = ""
    layer_chars: dict[str, int] = field(default_factory=dict)
    recalled: list[Turn] = field(default_factory=list)
    epoch: EpochUpdate | None = None
    marked: bool = False


async def build_layers(
    stored: Stored | None,
    plan: TurnPlan,
    fitted: Window,
    window_seqs: list[int],
    raw_messages: object,
    options: ContextOptions,
    now: int,
) -> BuiltLayers:
    """The layers of a request whose window is ``fitted``: from the stored conversation, or,
    when Redis could not be read (``stored`` is ``None``), the request's own only
    (:func:`request_only_block`)."""
    window = fitted.messages
    if stored is None:
        return BuiltLayers(request_only_block(raw_messages, window, options))
    state, last_text = stored.state, stored.last_text
    # the client's messages the store may hold under a seq that was not matched (older than
    # the tail read): the window's first seq cannot exclude them from recall, their text does
    unmatched = [plan.history[i] for i in fitted.history_indices if not plan.history_seqs[i]]
    shown = Shown(
        exclude_from=_exclude_from(plan, window_seqs, state.last_seq),
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
    found = await recall_lines(stored, options.recall, shown, timezone=options.timezone)
    cache = options.layout == "cache"
    recorded = window_start(state.meta) if cache else 0
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
    return BuiltLayers(
        head=built.text,
        tail=tail.text if tail else "",
        layer_chars=layer_chars,
        recalled=list(found.turns),
        epoch=update,
        marked=cache and options.cache_marks,
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
    layers = _request_layers(window, last_user_words(raw_messages), options)
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


def _last_user_content(raw_messages: object) -> object:
    """The ``content`` of the request's last user message (``None`` without one)."""
    for message in reversed(clean_messages(raw_messages)):
        if message.get("role") == "user":
            return message.get("content")
    return None


def last_user_words(raw_messages: object) -> str:
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
