"""Rebuilding a request's messages from the stored conversation.

:func:`plan_turn` (pure) decides what the history is, which messages are new and must be stored
after the reply, and whether the request regenerates the last reply. :func:`prepare` does the I/O
around it: one read of the conversation (with the recall postings of the new message's words),
one read of the recalled lines, then the system message and the recent window.

Clients of both kinds work (DESIGN.md section 2 and issue 2):

* apps that send only the new message: the stored history is the conversation;
* apps that send the whole history: the stored history is still the source of truth; the client's
  earlier messages are used (and stored) only while the store is empty (seeding).

A regenerate is the last stored user message sent again as the new turn right after its reply:
for a whole-history client, one whose history does not end with that reply; for a new-message-only
client, within ``regenerate_window_s`` of the reply. The new reply then replaces the old one
instead of storing a duplicate pair.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from litellm_memory_hook import recall
from litellm_memory_hook.keys import ConversationKeys
from litellm_memory_hook.messages import (
    clean_messages,
    content_text,
    is_blank,
    keep_head,
    messages_to_turns,
    split_request,
)
from litellm_memory_hook.models import ConversationState, Turn
from litellm_memory_hook.prompt import (
    EarlierLine,
    PromptLayers,
    PromptWording,
    build_system_message,
    strip_injected,
)
from litellm_memory_hook.settings import AliasMemoryConfig, MemorySettings
from litellm_memory_hook.store import IndexedTurn, MemoryStore
from litellm_memory_hook.window import build_window

Message = dict[str, Any]


@dataclass(frozen=True)
class Budget:
    """Budgets of one request, in characters unless named otherwise.

    Attributes:
        chars / messages: the recent window (DESIGN.md section 5: 8000 characters, 40 messages).
        pinned_chars: the ``<fixed_memories>`` section. Pinned memories come first and are never
            displaced by extracted ones; past this budget the newest pinned items are left out.
        memory_chars: the ``<memories>`` section (case C22: memory never grows without bound).
        summary_chars: the ``<summary>`` section (a longer summary keeps its start).
        persona_chars: each of ``<persona>`` and ``<custom_instructions>``.
    """

    chars: int = 8000
    messages: int = 40
    pinned_chars: int = 2000
    memory_chars: int = 3000
    summary_chars: int = 2000
    persona_chars: int = 2000


def fit_items(items: Sequence[str], budget: int, max_items: int = 100) -> tuple[str, ...]:
    """The first items, in order, whose characters add up to at most ``budget``.

    Blank items are skipped. An item longer than the whole budget is cut to it (keeping its
    start, with ``…``) when it is the first one; otherwise the walk stops at the first item that
    does not fit, so the section never exceeds its budget (case C22 a, c).
    """
    kept: list[str] = []
    used = 0
    for item in items:
        text = item.strip()
        if not text:
            continue
        if len(kept) >= max_items:
            break
        if used + len(text) > budget:
            if not kept and budget > 1:
                kept.append(keep_head(text, budget))
            break
        kept.append(text)
        used += len(text)
    return tuple(kept)


def _cut_start(text: str, budget: int) -> str:
    if len(text) <= budget:
        return text
    return keep_head(text, budget) if budget >= 2 else ""


@dataclass(frozen=True)
class TurnPlan:
    """What :func:`plan_turn` decided.

    Attributes:
        system_texts: the client's own system texts, with blocks we injected earlier removed.
        history: earlier messages for the window, oldest first.
        history_seqs: the seq of each history message (0 for client-sent ones).
        new: the new turn as the client sent it (parts intact).
        pending: turns to store after the reply (the new turn; plus the client's history when
            seeding an empty store).
        replace: stored turns the reply replaces (a regenerate).
        previous_text: text of the stored turn just before the first turn to store (the recall
            index keys a reply by the question before it); "" when seeding.
        seeded: how many of ``pending`` come from the client's history (an empty store); they
            are written only if the conversation is still empty then.
    """

    system_texts: tuple[str, ...]
    history: tuple[Message, ...]
    history_seqs: tuple[int, ...]
    new: tuple[Message, ...]
    pending: tuple[Turn, ...]
    replace: tuple[Turn, ...] = ()
    previous_text: str = ""
    seeded: int = 0

    @property
    def regenerate(self) -> bool:
        """True when the reply replaces the last stored one."""
        return bool(self.replace)


def _tool_call_ids(message: Message | Turn) -> set[str]:
    calls = message.tool_calls if isinstance(message, Turn) else message.get("tool_calls")
    return {str(c.get("id")) for c in calls or () if isinstance(c, dict)}


def plan_turn(
    raw_messages: object,
    state: ConversationState,
    *,
    now_ms: int,
    call_id: str = "",
    regenerate_window_s: float = 300.0,
    max_stored_chars: int = 32_000,
    regenerate: bool = False,
) -> TurnPlan | None:
    """Decide history, new turn and writes for one request; ``None`` when there is no new turn.

    Args:
        raw_messages: the request's ``messages`` as received (malformed entries are skipped).
        state: the stored conversation (its ``tail`` holds the newest turns).
        now_ms: the request time, epoch ms (timestamps of the stored user turn).
        call_id: ``litellm_call_id`` recorded with the stored turns.
        regenerate_window_s: see the module docstring (seconds).
        max_stored_chars: longest text stored for one message (characters).
        regenerate: the request says it regenerates the last reply (``_repeated_turn``).
    """
    messages = clean_messages(raw_messages)
    if any(m.get("role") == "function" or m.get("function_call") for m in messages):
        return None  # legacy function calling: passed through as sent
    split = split_request(messages)
    if not split.new or split.new[-1].get("role") not in ("user", "tool"):
        return None
    if _broken_tool_groups(split.new):
        return None  # tool traffic that is not whole: the client's request, passed through
    if split.new[-1].get("role") == "user" and is_blank(content_text(split.new[-1].get("content"))):
        return None  # nothing to answer from memory; never store a reply without its question
    system_texts = tuple(t for t in (strip_injected(s) for s in split.system_texts) if t)
    stored = [t for t in state.tail if not t.partial]
    new = list(split.new)
    new_turns = messages_to_turns(new, ts_ms=now_ms, call_id=call_id, max_chars=max_stored_chars)

    if state.last_seq == 0:
        seed = messages_to_turns(
            split.earlier, ts_ms=now_ms, call_id=call_id, max_chars=max_stored_chars
        )
        return TurnPlan(
            system_texts,
            split.earlier,
            (0,) * len(split.earlier),
            tuple(new),
            (*seed, *new_turns),
            seeded=len(seed),
        )

    # A tool-result turn carries the assistant tool_calls message it answers. When a stored
    # assistant turn made the same calls, the request continues that group (usually the newest
    # turn) or repeats it (a client retrying, or regenerating the answer to the results): the
    # call is not stored again, and what the store holds after it is replaced.
    if new and new[0].get("role") == "assistant":
        group_at = _stored_call(state.tail, _tool_call_ids(new[0]))
        if group_at is not None:
            kept = [t for t in state.tail[:group_at] if not t.partial]
            return TurnPlan(
                system_texts,
                tuple(t.to_message() for t in kept),
                tuple(t.seq for t in kept),
                tuple(new),
                tuple(t for t in new_turns if not (t.role == "assistant" and t.tool_calls)),
                tuple(state.tail[group_at + 1 :]),
                previous_text=state.tail[group_at].text,
            )

    retry = _repeated_turn(
        split.earlier, new, new_turns, state.tail, now_ms, regenerate_window_s, regenerate
    )
    if retry is not None:
        user_at, replace = retry
        kept = [t for t in state.tail[:user_at] if not t.partial]
        return TurnPlan(
            system_texts,
            tuple(t.to_message() for t in kept),
            tuple(t.seq for t in kept),
            tuple(new),
            (),
            tuple(replace),
            previous_text=state.tail[user_at].text,
        )
    return TurnPlan(
        system_texts,
        tuple(t.to_message() for t in stored),
        tuple(t.seq for t in stored),
        tuple(new),
        tuple(new_turns),
        previous_text=state.tail[-1].text if state.tail else "",
    )


def _stored_call(tail: Sequence[Turn], ids: set[str]) -> int | None:
    """Index in ``tail`` of the newest stored assistant turn that made exactly these tool calls."""
    if not ids:
        return None
    for index in range(len(tail) - 1, -1, -1):
        turn = tail[index]
        if turn.role == "assistant" and turn.tool_calls and _tool_call_ids(turn) == ids:
            return index
    return None


def _broken_tool_groups(new: Sequence[Message]) -> bool:
    """True when the new turn's tool traffic is not whole: a ``tool`` message that answers no
    ``tool_calls`` before it, a call without an id, or a call left without its result."""
    open_ids: set[str] = set()
    for message in new:
        if message.get("role") == "assistant":
            if open_ids:
                return True  # the previous group was left unanswered
            calls = [c for c in message.get("tool_calls") or () if isinstance(c, dict)]
            if any(not isinstance(c.get("id"), str) or not c.get("id") for c in calls):
                return True
            open_ids = {str(c["id"]) for c in calls}
        elif message.get("role") == "tool":
            answered = message.get("tool_call_id")
            if not isinstance(answered, str) or answered not in open_ids:
                return True
            open_ids.discard(answered)
        elif open_ids:
            return True
    return bool(open_ids)


#: shortest text a new-message-only client's repeat must have to count as a regenerate by time
#: alone: "ok", "more" or "continue" twice in a row are usually meant twice.
MIN_REGENERATE_CHARS = 12


def _repeated_turn(
    earlier: Sequence[Message],
    new: Sequence[Message],
    new_turns: Sequence[Turn],
    tail: Sequence[Turn],
    now_ms: int,
    window_s: float,
    explicit: bool,
) -> tuple[int, list[Turn]] | None:
    """A regenerate or a retry: (index in ``tail`` of the repeated user turn, turns to replace).

    ``None`` when the new message is not the last stored user message again (same text and, for
    a list of parts, the same parts: two different photos are two messages). With no complete
    reply after that user turn (a stream the client cut, a failed call) it is a retry: the
    partial reply, if any, is replaced and the user turn is not stored twice. With a complete
    reply it is a regenerate when the request says so (``metadata.memory_regenerate``), or when
    the client's history does not show that reply (a whole-history client), or, for a
    new-message-only client, when the reply is younger than ``window_s`` seconds and the text
    has at least ``MIN_REGENERATE_CHARS`` characters.
    """
    if len(new) != 1 or new[0].get("role") != "user" or len(new_turns) != 1:
        return None
    repeated = new_turns[0]
    last_user = max((i for i, t in enumerate(tail) if t.role == "user"), default=None)
    if last_user is None:
        return None
    stored = tail[last_user]
    if (stored.text, stored.fp) != (repeated.text, repeated.fp):
        return None
    reply = list(tail[last_user + 1 :])
    complete = [t for t in reply if not t.partial]
    if not complete or explicit:
        return last_user, reply
    if earlier:
        previous = earlier[-1]
        echoed = previous.get("role") == "assistant" and (
            content_text(previous.get("content")) == complete[-1].text
        )
        return None if echoed else (last_user, reply)
    recent = now_ms - complete[-1].ts_ms <= window_s * 1000
    long_enough = len(repeated.text.strip()) >= MIN_REGENERATE_CHARS
    return (last_user, reply) if recent and long_enough else None


@dataclass
class PreparedRequest:
    """The rebuilt request and what the post-call hooks need.

    Attributes:
        messages: the messages to send upstream (one system message, then the window).
        plan: the turn plan (pending writes, regenerate).
        layer_chars: characters per system-message layer plus ``window`` (the recent messages).
        recalled: the recalled old turns, time order.
        cursor: the conversation's extraction cursor (seq extracted through).
    """

    messages: list[Message]
    plan: TurnPlan
    layer_chars: dict[str, int] = field(default_factory=dict)
    recalled: list[Turn] = field(default_factory=list)
    cursor: int = 0


@dataclass(frozen=True)
class ContextOptions:
    """Per-request knobs of :func:`prepare`."""

    budget: Budget = Budget()
    operator_rules: str = ""
    recall_k: int = 4
    regenerate_window_s: float = 300.0
    max_stored_chars: int = 32_000
    timezone: str | None = None
    wording: PromptWording | None = None
    persona: str = ""
    custom_instructions: str = ""
    regenerate: bool = False

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
    ) -> ContextOptions:
        """The options of a request to ``alias``: its own values, else the global settings."""
        return cls(
            budget=Budget(
                chars=alias.recent_chars or settings.recent_chars,
                messages=alias.recent_messages or settings.recent_messages,
                pinned_chars=settings.pinned_chars,
                memory_chars=settings.memory_chars,
                summary_chars=settings.summary_chars,
            ),
            operator_rules=alias.system_prompt,
            recall_k=settings.recall_k if alias.recall_k is None else alias.recall_k,
            regenerate_window_s=settings.regenerate_window_s,
            max_stored_chars=settings.stored_text_chars,
            timezone=timezone or settings.timezone,
            wording=alias.wording,
            persona=persona,
            custom_instructions=custom_instructions,
            regenerate=regenerate,
        )


def dedupe_rules(rules: Sequence[str]) -> tuple[str, ...]:
    """The operator's rules without paragraphs already given earlier in the list.

    A client that echoes the system message we sent back to us repeats the alias's
    ``system_prompt`` and its own earlier system text; after :func:`strip_injected` removed our
    data block, those repeated paragraphs (split on blank lines) are dropped here, so each rule
    appears once (case C23). Order is kept; a rule left empty is dropped.
    """
    seen: set[str] = set()
    kept: list[str] = []
    for rule in rules:
        paragraphs = [p for p in re.split(r"\n\s*\n", rule) if p.strip()]
        fresh = [p for p in paragraphs if p.strip() not in seen]
        seen.update(p.strip() for p in paragraphs)
        if fresh:
            kept.append("\n\n".join(fresh) if len(fresh) != len(paragraphs) else rule)
    return tuple(kept)


def speaker_label(turn: Turn) -> str:
    """The speaker of a recalled line: the stored name, else the role."""
    return turn.name or turn.role


async def prepare(
    store: MemoryStore,
    keys: ConversationKeys,
    raw_messages: object,
    options: ContextOptions,
    *,
    call_id: str = "",
    now_ms: int | None = None,
) -> PreparedRequest | None:
    """Load the conversation and rebuild the request's messages.

    Returns:
        ``None`` when the request has no new user turn (nothing to rebuild).

    Raises:
        StoreError: Redis failed (the hook then passes the request through unchanged).
    """
    now = now_ms if now_ms is not None else int(time.time() * 1000)
    last_text = _last_user_text(raw_messages)
    # With recall off, no postings are read at all.
    terms = recall.query_terms(last_text) if last_text and options.recall_k > 0 else []
    state, postings = await store.load(keys, tail=options.budget.messages + 4, query_terms=terms)
    plan = plan_turn(
        raw_messages,
        state,
        now_ms=now,
        call_id=call_id,
        regenerate_window_s=options.regenerate_window_s,
        max_stored_chars=options.max_stored_chars,
        regenerate=options.regenerate,
    )
    if plan is None:
        return None
    window = build_window(
        plan.history,
        plan.new,
        max_chars=options.budget.chars,
        max_messages=options.budget.messages,
    )
    in_window = len(window) - len(plan.new)
    window_seqs = [s for s in plan.history_seqs[len(plan.history_seqs) - in_window :] if s]
    recalled: list[Turn] = []
    if terms and postings.n_docs and plan.history_seqs:
        exclude_from = min(window_seqs) if window_seqs else state.last_seq + 1
        top = recall.score(
            terms,
            postings.seqs,
            postings.df,
            postings.n_docs,
            exclude_from_seq=exclude_from,
            k=options.recall_k,
        )
        recalled = await store.fetch_turns(keys, [seq for seq, _ in top])
    layers = PromptLayers(
        operator_rules=dedupe_rules([options.operator_rules, *plan.system_texts]),
        persona=_cut_start(options.persona, options.budget.persona_chars),
        custom_instructions=_cut_start(options.custom_instructions, options.budget.persona_chars),
        pinned=fit_items(state.pinned, options.budget.pinned_chars),
        memories=fit_items(state.memories, options.budget.memory_chars),
        summary=_cut_start(state.summary, options.budget.summary_chars),
        earlier_lines=tuple(
            EarlierLine(ts_ms=t.ts_ms, speaker=speaker_label(t), text=t.text) for t in recalled
        ),
        last_user_text=last_text,
        timezone=options.timezone,
    )
    built = build_system_message(layers, options.wording)
    layer_chars = dict(built.layer_chars)
    layer_chars["window"] = sum(len(content_text(m.get("content"))) for m in window)
    return PreparedRequest(
        messages=[{"role": "system", "content": built.text}, *window],
        plan=plan,
        layer_chars=layer_chars,
        recalled=recalled,
        cursor=int(state.meta.get("cursor", "0") or 0),
    )


def _last_user_text(raw_messages: object) -> str:
    for message in reversed(clean_messages(raw_messages)):
        if message.get("role") == "user":
            return content_text(message.get("content"))
    return ""


def _indexable(turn: Turn) -> bool:
    return turn.role in ("user", "assistant") and bool(turn.text) and not turn.partial


def indexed(turn: Turn, previous: str = "") -> IndexedTurn:
    """A new turn with its recall terms: user and assistant text is indexed, tool traffic is not.

    The context keys that come from ``previous`` are recorded on the returned turn (``ctx``), so
    :func:`stored_terms` can later give exactly the terms it was indexed under.

    Args:
        turn: the turn.
        previous: text of the turn before it (a reply is also keyed by the question it answers;
            :func:`litellm_memory_hook.recall.index_terms`).
    """
    if not _indexable(turn):
        return IndexedTurn(turn)
    terms = recall.index_terms(turn.text, turn.name, previous=previous)
    ctx = tuple(t for t in terms if t.startswith(recall.CONTEXT_PREFIX))
    return IndexedTurn(replace(turn, ctx=ctx), terms)


def stored_terms(turn: Turn) -> IndexedTurn:
    """A stored turn with exactly the terms it was indexed under (for deletion).

    Its own words and keys are recomputed from its text (:func:`recall.index_terms` is a pure
    function of it); the context keys come from ``turn.ctx``. ``index_terms`` keeps plain and
    phonetic terms before context keys under its cap, so the union is the original list.
    """
    if not _indexable(turn):
        return IndexedTurn(turn)
    own = recall.index_terms(turn.text, turn.name)
    return IndexedTurn(turn, sorted({*own, *turn.ctx}))


def indexed_chain(turns: Sequence[Turn], previous: str = "") -> list[IndexedTurn]:
    """:func:`indexed` over consecutive turns, each keyed by the text of the one before it."""
    out: list[IndexedTurn] = []
    for turn in turns:
        out.append(indexed(turn, previous))
        previous = turn.text
    return out
