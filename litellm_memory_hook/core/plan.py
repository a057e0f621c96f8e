"""Deciding what one request means for the stored conversation (pure; no I/O).

:func:`plan_turn` decides what the history is, which messages are new and must be stored after
the reply, and whether the request regenerates the last reply. Clients of both kinds work:

* apps that send only the new message: the stored history is the conversation (tool results
  sent alone are completed with the stored ``tool_calls`` message they answer);
* apps that send the whole history are authoritative for what they send: the model receives
  their messages as sent, and the store follows them (an edited or deleted message, a branch,
  a regenerate), within the stored tail read for the request (:func:`_plan_whole_history`);
  an empty store is seeded with their history.

A regenerate is the last stored user message sent again as the new turn right after its reply:
for a whole-history client, one whose history does not end with that reply; for a new-message-only
client, within ``regenerate_window_s`` of the reply. The new reply then replaces the old one
instead of storing a duplicate pair.

Lines imported into a conversation that already held chat were never sent by the chatting
client: planning passes over them (:func:`chat_turns`), so a whole-history client's next request
neither replaces them as messages it deleted nor aligns around them, and the recent window of a
new-message-only client shows the chat, not lines said years before it; recall finds them.

Text that no UTF-8 can hold (a lone surrogate: a JavaScript client cutting a string inside an
emoji writes ``"\\ud83d"``) is planned in the form the store holds it, U+FFFD in its place
(:func:`storable_forms`): such a message gets memory and is stored like any other, and a
whole-history client that sends it again on every later request aligns with its stored turn.
The plan's ``lead``, ``history`` and ``new`` are still the client's own messages, the lone
surrogate included, so the model receives them as sent. (Passing such requests through unstored
instead switched memory off for the rest of a whole-history conversation, which keeps the
message in every request; and its turns would have been stored with U+FFFD anyway, by the first
later request that got memory, as messages the store lacks.)

Also here: the section budgets (:class:`Budget`, :func:`fit_items`) and the operator-rule dedupe.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from dataclasses import replace as dc_replace
from typing import Any

from litellm_memory_hook.core.messages import (
    clean_messages,
    content_text,
    is_blank,
    is_stored,
    keep_head,
    keep_tail,
    lone_surrogate,
    messages_to_turns,
    split_request,
    without_surrogates,
)
from litellm_memory_hook.core.models import ConversationState, Turn
from litellm_memory_hook.core.prompt import strip_injected

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


def cut_start(text: str, budget: int) -> str:
    if len(text) <= budget:
        return text
    return keep_head(text, budget) if budget >= 2 else ""


@dataclass(frozen=True)
class TurnPlan:
    """What :func:`plan_turn` decided.

    Attributes:
        system_texts: the client's leading system texts, with blocks we injected earlier removed.
        lead: the client's leading system / developer messages, as sent.
        history: earlier messages for the window, oldest first: the client's own (``verbatim``)
            or the stored turns' messages.
        history_seqs: the seq of each history message (0 for client messages the store does
            not hold).
        new: the new turn as the client sent it (parts intact, a prefill and trailing system
            messages included).
        pending: turns to store after the reply (the new turn; plus the client's history when
            seeding an empty store, or the client's version of turns it edited).
        replace: stored turns the reply replaces (a regenerate, an edit, a branch, a deletion).
        previous_text: text of the stored turn just before the first turn to store (the recall
            index keys a reply by the question before it); "" when seeding.
        seeded: how many of ``pending`` come from the client's history (an empty store); they
            are written only if the conversation is still empty then.
        verbatim: ``history`` is the client's own and reaches the model as sent.
        prefill: the assistant prefill the client ended with ("" without one); the stored reply
            is the prefill followed by the model's continuation.
        prefill_name: the prefill's ``name`` (a roleplay frontend's speaker; "" without), which
            the stored reply takes.
        store: False when nothing of the request may be stored: it would replace turns that
            wait in the outage buffer (:func:`plan_with_buffered`).
        surrogates: how many of the client's messages hold a lone surrogate (planned, and
            stored, with U+FFFD in its place: :func:`storable_forms`); ``lead``, ``history``
            and ``new`` hold them as the client sent them.
    """

    system_texts: tuple[str, ...]
    history: tuple[Message, ...]
    history_seqs: tuple[int, ...]
    new: tuple[Message, ...]
    pending: tuple[Turn, ...]
    replace: tuple[Turn, ...] = ()
    previous_text: str = ""
    seeded: int = 0
    lead: tuple[Message, ...] = ()
    verbatim: bool = False
    prefill: str = ""
    prefill_name: str = ""
    store: bool = True
    surrogates: int = 0

    @property
    def regenerate(self) -> bool:
        """True when the reply replaces stored turns."""
        return bool(self.replace)


def _tool_call_ids(message: Message | Turn) -> set[str]:
    """The ids of a message's tool calls, whole (a stored id is never cut: a provider checks
    it, so it is compared by its full value)."""
    calls = message.tool_calls if isinstance(message, Turn) else message.get("tool_calls")
    return {str(c.get("id")) for c in calls or () if isinstance(c, dict)}


#: what makes a client message the same as a stored turn (:func:`_message_key`)
_Key = tuple[object, str, frozenset[str] | None, str | None]


def _message_key(message: Message, max_chars: int) -> _Key:
    """What :func:`align` compares of a client message: its role, its text as stored (the end
    kept within ``max_chars``) without surrounding white space, the ids of an assistant's tool
    calls and a tool result's call id (both whole)."""
    role = message.get("role")
    text = content_text(message.get("content"))
    if len(text) > max_chars:
        text = keep_tail(text, max_chars)
    return (
        role if isinstance(role, str) else None,
        text.strip(),
        frozenset(_tool_call_ids(message)) if role == "assistant" else None,
        str(message.get("tool_call_id") or "") if role == "tool" else None,
    )


def _turn_key(turn: Turn) -> _Key:
    """:func:`_message_key` of a stored turn (``None`` for a tool turn without a call id:
    it is the same as no client message)."""
    return (
        turn.role,
        turn.text.strip(),
        frozenset(_tool_call_ids(turn)) if turn.role == "assistant" else None,
        turn.tool_call_id if turn.role == "tool" else None,
    )


@dataclass(frozen=True)
class Alignment:
    """Where a whole-history client's messages meet the stored tail.

    ``client_at`` / ``stored_at``: the first client message and stored turn that differ (or
    the ends); ``matched``: how many matched before them; ``seqs``: for each client message,
    the seq of the stored turn it matched (0 when none).
    """

    client_at: int
    stored_at: int
    matched: int
    seqs: tuple[int, ...]


def align(client: Sequence[Message], stored: Sequence[Turn], max_chars: int) -> Alignment | None:
    """Align a client's conversation messages with the stored tail (both oldest first).

    Tries every offset of the two lists and keeps the one whose overlap starts with the longest
    run of equal messages (ties: the longest run right after the first difference, then the
    most equal messages in the overlap, then the overlap that ends latest in the store). The
    first difference inside that overlap is where the client's
    history and the store part (an edit, a deleted message, a branch); clients that trim their
    own history align on the stored tail's end. The run comes first so that a deleted earlier
    exchange parts the two where it was: ranked by equal messages alone, the messages after it
    (when more than those before) aligned the client's first message with the deleted one, and
    the client's whole history was stored again after the turns before it (a fresh-user
    report). The run after the first difference comes before the count for the same reason:
    with the client's first message edited (no offset starts with a run) and an exchange after
    it deleted, the messages after the deletion outnumbered the first reply, which follows the
    edited message where it was, and the client's history was stored after the old first
    exchange, its reply twice. ``None`` when no offset has any equal message.
    """
    # Each message and turn is keyed once, and only the offsets at which some message meets an
    # equal turn are tried: linear in the messages' length for distinct messages, and at most
    # (n + m) x m key comparisons when many are alike, where every offset was compared
    # message by message before.
    client_keys = [_message_key(message, max_chars) for message in client]
    stored_keys = [_turn_key(turn) for turn in stored]
    positions: dict[_Key, list[int]] = {}
    for si, stored_key in enumerate(stored_keys):
        positions.setdefault(stored_key, []).append(si)
    offsets = {si - ci for ci, found in enumerate(client_keys) for si in positions.get(found, ())}
    # (first diff = run, run after the first diff, matches, end, offset)
    best: tuple[int, int, int, int, int] | None = None
    n, m = len(client), len(stored)
    for offset in sorted(offsets):
        ci, si = max(0, -offset), max(0, offset)
        length = min(n - ci, m - si)
        same = [client_keys[ci + k] == stored_keys[si + k] for k in range(length)]
        matches = sum(same)
        first_diff = same.index(False) if False in same else length
        after = same[first_diff + 1 :]
        run_after = after.index(False) if False in after else len(after)
        key = (first_diff, run_after, matches, si + length, offset)
        if best is None or key[:4] > best[:4]:
            best = key
    if best is None:
        return None
    first_diff, _, _, _, offset = best
    ci, si = max(0, -offset), max(0, offset)
    seqs = [0] * n
    for k in range(first_diff):
        seqs[ci + k] = stored[si + k].seq
    return Alignment(ci + first_diff, si + first_diff, first_diff, tuple(seqs))


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

    Clients of both kinds (the module docstring): a client that sends its history is
    authoritative for what it sends; one that sends only the new message gets the stored
    history.

    Args:
        raw_messages: the request's ``messages`` as received (malformed entries are skipped).
        state: the stored conversation (its ``tail`` holds the newest turns).
        now_ms: the request time, epoch ms (timestamps of the stored user turn).
        call_id: ``litellm_call_id`` recorded with the stored turns.
        regenerate_window_s: see the module docstring (seconds).
        max_stored_chars: longest text stored for one message (characters).
        regenerate: the request says it regenerates the last reply (``_repeated_turn``).
    """
    messages, as_sent = storable_forms(clean_messages(raw_messages))
    plan = _plan_turn(
        messages,
        state,
        now_ms=now_ms,
        call_id=call_id,
        regenerate_window_s=regenerate_window_s,
        max_stored_chars=max_stored_chars,
        regenerate=regenerate,
    )
    if plan is None or not as_sent:
        return plan

    def sent(planned: tuple[Message, ...]) -> tuple[Message, ...]:
        return tuple(as_sent.get(id(m), m) for m in planned)

    return dc_replace(
        plan,
        lead=sent(plan.lead),
        history=sent(plan.history),
        new=sent(plan.new),
        surrogates=len(as_sent),
    )


def chat_turns(state: ConversationState) -> ConversationState:
    """The state with only the tail's turns that belong to the chat: without the lines imported
    into the conversation after chat requests stored turns there (the chatting client never
    sent them), which planning passes over.

    Such a line is one marked :attr:`~litellm_memory_hook.core.models.Turn.joined` by the
    importer, or, for lines imported before that mark existed, an imported line (no
    ``call_id``: every turn a request stores has LiteLLM's ``litellm_call_id``) that follows,
    in the tail, a turn a request stored. Imported lines that precede the chat (a history
    imported into a new conversation, then continued) stay: they are the conversation a client
    goes on from, and may be the client's own history.

    Returns:
        ``state`` itself when every turn of the tail belongs to the chat (no copy).
    """
    tail = state.tail
    if not any(t.joined or not t.call_id for t in tail):
        return state
    chat: list[Turn] = []
    chatting = False
    for turn in tail:
        if turn.joined or (chatting and not turn.call_id):
            continue
        chatting = chatting or bool(turn.call_id)
        chat.append(turn)
    return state if len(chat) == len(tail) else dc_replace(state, tail=chat)


def passed_over(state: ConversationState) -> tuple[int, ...]:
    """Seqs of the tail's turns that :func:`chat_turns` passes over (imported lines the recent
    window never shows: recall may still return them), oldest first."""
    chat = chat_turns(state)
    if chat is state:
        return ()
    kept = {t.seq for t in chat.tail}
    return tuple(t.seq for t in state.tail if t.seq not in kept)


def storable_forms(messages: list[Message]) -> tuple[list[Message], dict[int, Message]]:
    """The client's messages in the form the store holds them, for planning; and the
    messages as sent, by the ``id`` of their stored form, for those that differ.

    A message holding a lone surrogate anywhere (text, ``name``, tool arguments: the text no
    UTF-8 can hold) becomes a copy with U+FFFD in its place
    (:func:`~litellm_memory_hook.core.messages.without_surrogates`), which is what
    :func:`~litellm_memory_hook.core.messages.message_to_turn` stores. Planning on those forms
    compares a client's history with the stored turns as the store holds them: a whole-history
    client sending such a message again on every request matches its stored turn (compared as
    sent, it differed, and every later request rewrote the store from it on, as an edit).

    Args:
        messages: clean messages (:func:`~litellm_memory_hook.core.messages.clean_messages`).

    Returns:
        ``(forms, as_sent)``: ``forms`` is ``messages`` (the same list) when no message holds
        a lone surrogate, else a new list with copies in place of those that do; ``as_sent``
        maps ``id(copy)`` to the client's message (empty when there is none).
    """
    if lone_surrogate(messages) is None:
        return messages, {}
    forms: list[Message] = []
    as_sent: dict[int, Message] = {}
    for message in messages:
        if lone_surrogate(message) is None:
            forms.append(message)
            continue
        form = without_surrogates(message)
        as_sent[id(form)] = message
        forms.append(form)
    return forms, as_sent


def _plan_turn(
    messages: list[Message],
    state: ConversationState,
    *,
    now_ms: int,
    call_id: str,
    regenerate_window_s: float,
    max_stored_chars: int,
    regenerate: bool,
) -> TurnPlan | None:
    """:func:`plan_turn` on clean messages in their stored form (:func:`storable_forms`)."""
    state = chat_turns(state)
    if any(m.get("role") == "function" or m.get("function_call") for m in messages):
        return None  # legacy function calling: passed through as sent
    split = split_request(messages)
    new_convo = split.new_conversation
    new = tuple(split.new)
    # what the store can hold of the client's history: a blank reply it keeps is never stored,
    # so aligning on it would part the two there and rewrite the store on every request
    client_history = [m for m in split.earlier if is_stored(m)]
    call = None if client_history else _answered_call(new_convo, state.tail)
    if call is not None:  # tool results sent alone: the stored call they answer goes first
        new_convo, new = (call, *new_convo), (call, *new)
    if not new_convo or new_convo[-1].get("role") not in ("user", "tool"):
        return None
    if _broken_tool_groups(new_convo):
        return None  # tool traffic that is not whole: the client's request, passed through
    if new_convo[-1].get("role") == "user" and is_blank(content_text(new_convo[-1].get("content"))):
        return None  # nothing to answer from memory; never store a reply without its question
    system_texts = tuple(t for t in (strip_injected(s) for s in split.system_texts) if t)
    new_turns = messages_to_turns(
        new_convo, ts_ms=now_ms, call_id=call_id, max_chars=max_stored_chars
    )
    common: dict[str, Any] = {
        "lead": split.lead,
        "prefill": split.prefill_text,
        "prefill_name": split.prefill_name,
    }

    if state.last_seq == 0:
        seed = messages_to_turns(
            client_history, ts_ms=now_ms, call_id=call_id, max_chars=max_stored_chars
        )
        return TurnPlan(
            system_texts,
            split.earlier,
            (0,) * len(split.earlier),
            new,
            (*seed, *new_turns),
            seeded=len(seed),
            verbatim=True,
            **common,
        )
    if client_history:
        return _plan_whole_history(
            split.earlier,
            client_history,
            new,
            new_turns,
            state,
            system_texts,
            common,
            max_stored_chars,
            call_id,
            now_ms,
        )

    # A tool-result turn carries the assistant tool_calls message it answers. When a stored
    # assistant turn made the same calls, the request continues that group (usually the newest
    # turn) or repeats it (a client retrying, or regenerating the answer to the results): the
    # call is not stored again, and what the store holds after it is replaced.
    stored = [t for t in state.tail if not t.partial]
    if new_convo[0].get("role") == "assistant":
        group_at = _stored_call(state.tail, _tool_call_ids(new_convo[0]))
        if group_at is not None:
            kept = [t for t in state.tail[:group_at] if not t.partial]
            return TurnPlan(
                system_texts,
                tuple(t.to_message() for t in kept),
                tuple(t.seq for t in kept),
                new,
                tuple(t for t in new_turns if not (t.role == "assistant" and t.tool_calls)),
                tuple(state.tail[group_at + 1 :]),
                previous_text=state.tail[group_at].text,
                **common,
            )

    retry = _repeated_turn(
        new_convo, new_turns, state.tail, now_ms, regenerate_window_s, regenerate
    )
    if retry is not None:
        user_at, replace = retry
        kept = [t for t in state.tail[:user_at] if not t.partial]
        return TurnPlan(
            system_texts,
            tuple(t.to_message() for t in kept),
            tuple(t.seq for t in kept),
            new,
            (),
            tuple(replace),
            previous_text=state.tail[user_at].text,
            **common,
        )
    return TurnPlan(
        system_texts,
        tuple(t.to_message() for t in stored),
        tuple(t.seq for t in stored),
        new,
        tuple(new_turns),
        previous_text=state.tail[-1].text if state.tail else "",
        **common,
    )


def plan_with_buffered(
    raw_messages: object,
    state: ConversationState,
    buffered: Sequence[Turn],
    *,
    now_ms: int,
    call_id: str = "",
    regenerate_window_s: float = 300.0,
    max_stored_chars: int = 32_000,
    regenerate: bool = False,
    superseded: Collection[int] = (),
) -> TurnPlan | None:
    """:func:`plan_turn` against the stored tail followed by the turns this proxy holds for the
    conversation in its outage buffer (written after what ``state`` holds once Redis takes
    writes again; here with stand-in seqs after ``state.last_seq``, never written).

    So while Redis refuses writes (full, just back) or is down, a request sees the turns said
    since: a client that sends only new messages gets them in its window, and tool results
    sent alone the buffered call they answer; a client that sends its history aligns with them
    and is not stored twice. A plan that would replace buffered turns (a regenerate, a retry
    after a cut stream, an edit of a buffered message) is made with ``store=False``: the model
    gets the request, nothing of it is stored, the buffered turns stay (they cannot be
    replaced before they are written).

    While Redis is down the hook plans with an empty ``state``. With nothing buffered, that is
    planned as for an empty store: a client's history is seed turns, which the outage buffer
    writes only if the conversation is still empty then (the plan is ``verbatim``: the
    client's messages go as sent); tool results that answer a call only Redis holds pass
    through unstored. With buffered turns, a client that sends only new messages gets a plan
    that is not ``verbatim`` (the model gets ``lead`` and the window of ``history`` and
    ``new``).

    Args:
        state: the stored conversation (empty while Redis is down).
        buffered: the conversation's buffered turns, oldest first, taken before ``state`` was
            read; those of a write that ``state`` already holds (the same ``call_id``: the
            buffer wrote it meanwhile) are left out.
        superseded: seqs of stored turns that buffered writes replace (a regenerate made while
            Redis refused writes): left out of the stored tail while they wait.

    Returns:
        ``None`` when there is no new turn to store (the request then goes as sent).
    """
    options: dict[str, Any] = {
        "now_ms": now_ms,
        "call_id": call_id,
        "regenerate_window_s": regenerate_window_s,
        "max_stored_chars": max_stored_chars,
        "regenerate": regenerate,
    }
    if buffered:
        written = {t.call_id for t in state.tail if t.call_id}
        buffered = [t for t in buffered if not (t.call_id and t.call_id in written)]
    if not buffered:
        return plan_turn(raw_messages, state, **options)
    last = state.last_seq
    stored = [t for t in state.tail if t.seq not in superseded]
    merged = dc_replace(
        state,
        meta={**state.meta, "seq": str(last + len(buffered))},
        tail=[*stored, *(dc_replace(t, seq=last + i) for i, t in enumerate(buffered, 1))],
    )
    plan = plan_turn(raw_messages, merged, **options)
    if plan is not None and any(t.seq > last for t in plan.replace):
        return dc_replace(plan, pending=(), replace=(), store=False)
    return plan


#: stored turns younger than this (ms) are never replaced by an edit or a branch: a client that
#: does not show them sent its request before they were stored (parallel requests, two tabs).
BRANCH_GRACE_MS = 5000


def _plan_whole_history(
    earlier: Sequence[Message],
    client_history: Sequence[Message],
    new: tuple[Message, ...],
    new_turns: Sequence[Turn],
    state: ConversationState,
    system_texts: tuple[str, ...],
    common: dict[str, Any],
    max_chars: int,
    call_id: str,
    now_ms: int,
) -> TurnPlan:
    """A client that sent its history: the model gets the client's messages as sent; the store
    follows the client (edits, deletions, branches, regenerates) within the stored tail.

    Rules, with the client's conversation messages aligned to the stored tail (:func:`align`):

    * everything matched up to the end of both: a plain continuation, the new turn is stored;
    * the client's history matched but the store holds more after it: when the new user message
      is the next stored user message, it is a regenerate (the replies after it are replaced);
      otherwise the client deleted or branched: the stored turns from there on are replaced by
      the new turn;
    * a difference inside the client's history (an edited or deleted earlier message, a branch
      from an older reply): the stored turns from the first difference on are replaced by the
      client's messages from there and the new turn;
    * nothing aligns (the tail shows another client's turns, or the edit is older than the
      tail): nothing stored is touched; the new turn is appended;
    * turns that would be replaced but were stored less than ``BRANCH_GRACE_MS`` ago are kept
      and the new turn is appended (a parallel request stored them; not an edit); tool results
      whose call is the newest stored turn append only the results, as when nothing aligns;
      in both cases a new turn that starts with a tool call the store does not hold goes with
      the client's unstored messages from the question that started it
      (:func:`_unstored_question`), so the call is never stored without its question.
    """
    tail = list(state.tail)
    stored = [t for t in tail if not t.partial]
    alignment = align(client_history, stored, max_chars)
    seq_of: dict[int, int] = {}
    if alignment is not None:
        for message, seq in zip(client_history, alignment.seqs, strict=True):
            seq_of[id(message)] = seq
    history_seqs = tuple(seq_of.get(id(m), 0) for m in earlier)

    def plan(pending: Sequence[Turn], replace: Sequence[Turn], previous: str) -> TurnPlan:
        return TurnPlan(
            system_texts,
            tuple(earlier),
            history_seqs,
            new,
            tuple(pending),
            tuple(replace),
            previous_text=previous,
            verbatim=True,
            **common,
        )

    def append(unstored: Sequence[Message]) -> list[Turn]:
        """The new turns appended after the stored ones, with the question of the exchange
        they go on when ``unstored`` (client messages the store does not hold) holds it."""
        appended = _after_stored_call(new_turns, stored)
        asked = _unstored_question(unstored, appended)
        return [
            *messages_to_turns(asked, ts_ms=now_ms, call_id=call_id, max_chars=max_chars),
            *appended,
        ]

    if alignment is None:
        return plan(append(client_history), (), tail[-1].text if tail else "")
    from_seq = 0
    pending: list[Turn] = list(new_turns)
    if alignment.client_at < len(client_history):
        # an edit, a deletion or a branch inside the client's history, or messages it has
        # after everything stored
        rewritten = messages_to_turns(
            client_history[alignment.client_at :],
            ts_ms=now_ms,
            call_id=call_id,
            max_chars=max_chars,
        )
        if alignment.stored_at == len(stored):
            # after all of it: a partial reply stored after the matched turns (a stream the
            # client cut, then sent on with what it got) is replaced, not kept beside its copy
            last = stored[-1].seq if stored else 0
            partial = [t for t in tail if t.partial and t.seq > last]
            return plan([*rewritten, *new_turns], partial, stored[-1].text if stored else "")
        rewritten = _keep_times(rewritten, stored[: alignment.stored_at], tail)
        pending = [*rewritten, *new_turns]
        from_seq = stored[alignment.stored_at].seq
    elif alignment.stored_at < len(stored):
        nxt = stored[alignment.stored_at]
        first = new_turns[0] if new_turns else None
        if (
            first is not None
            and first.role == "assistant"
            and first.tool_calls
            and _tool_call_ids(first) == _tool_call_ids(nxt)
        ):
            # tool results for the stored tool-call reply: it is not stored again
            replace = [t for t in tail if t.seq > nxt.seq]
            return plan(new_turns[1:], replace, nxt.text)
        repeated = (
            len(new_turns) == 1
            and new_turns[0].role == "user"
            and nxt.role == "user"
            and (nxt.text, nxt.fp) == (new_turns[0].text, new_turns[0].fp)
        )
        if repeated:  # a regenerate: the replies after the repeated question go
            replace = [t for t in tail if t.seq > nxt.seq]
            return plan((), replace, nxt.text)
        from_seq = nxt.seq
    else:
        # a plain continuation; a partial reply after the matched turns is replaced
        last = stored[alignment.stored_at - 1].seq if alignment.stored_at else 0
        partial = [t for t in tail if t.partial and t.seq > last]
        return plan(new_turns, partial, stored[alignment.stored_at - 1].text if last else "")
    replace = [t for t in tail if t.seq >= from_seq] if from_seq else []
    if any(not t.partial and t.ts_ms > now_ms - BRANCH_GRACE_MS for t in replace):
        # Turns stored moments ago that this client's history does not show are another
        # request's (two tabs, parallel requests), not an edit: keep them, append.
        unstored = client_history[alignment.client_at :]
        return plan(append(unstored), (), tail[-1].text if tail else "")
    before = [t for t in stored if not from_seq or t.seq < from_seq]
    return plan(pending, replace, before[-1].text if before else "")


def _after_stored_call(new_turns: Sequence[Turn], stored: Sequence[Turn]) -> list[Turn]:
    """The new turns to append after the stored ones: a tool-result turn whose
    ``tool_calls`` message is the newest stored turn (the model's call, stored with its reply)
    appends only its results, so the call is not stored twice."""
    first = new_turns[0] if new_turns else None
    if (
        first is not None
        and stored
        and first.role == "assistant"
        and first.tool_calls
        and stored[-1].role == "assistant"
        and _tool_call_ids(first) == _tool_call_ids(stored[-1])
    ):
        return list(new_turns[1:])
    return list(new_turns)


def _unstored_question(
    client_history: Sequence[Message], appended: Sequence[Turn]
) -> Sequence[Message]:
    """The client's messages of the exchange that the appended turns go on, when they start
    with a tool call and nothing of the client's history is stored: from its last user message
    (the question that started the call) to the end of its history; ``[]`` otherwise.

    Appended alone, the call, its results and the answer would be stored without the question
    that asked for them (the client sent it, the store never saw it).
    """
    first = appended[0] if appended else None
    if first is None or first.role != "assistant" or not first.tool_calls:
        return []
    users = [i for i, m in enumerate(client_history) if m.get("role") == "user"]
    return client_history[users[-1] :] if users else []


def _keep_times(
    rewritten: Sequence[Turn], kept: Sequence[Turn], tail: Sequence[Turn]
) -> list[Turn]:
    """The client's messages that take the place of stored turns, each said when the stored
    turn with the same role and text was (the first not taken yet, of those after ``kept``),
    never earlier than the message before it: the store's repair of an edit or a branch keeps
    the times the messages were said, which dated recall reads (fresh-user report: every turn
    after the first difference was stamped with the time of the repair). A message with no
    such turn keeps its time (now)."""
    after = kept[-1].seq if kept else 0
    said: dict[tuple[str, str], list[int]] = {}
    for turn in tail:
        if turn.seq > after and not turn.partial:
            said.setdefault((turn.role, turn.text), []).append(turn.ts_ms)
    floor = kept[-1].ts_ms if kept else 0
    out: list[Turn] = []
    for turn in rewritten:
        times = said.get((turn.role, turn.text))
        ts = times.pop(0) if times else turn.ts_ms
        floor = max(floor, min(ts, turn.ts_ms))
        out.append(dc_replace(turn, ts_ms=floor) if floor != turn.ts_ms else turn)
    return out


def _answered_call(new: Sequence[Message], tail: Sequence[Turn]) -> Message | None:
    """The stored ``tool_calls`` message that tool results sent alone answer: a client that
    sends only its new messages sends the results of the calls the model made in the last reply
    (stored by the hook), without that reply. ``None`` unless the new turn starts with ``tool``
    messages that all answer calls of the newest stored tool-call turn with no user message
    after it: the last reply, or (a client retrying the step) the call whose results and answer
    were stored since, which the retry then replaces."""
    sent: set[str] = set()  # the ids the results answer, whole as stored
    for message in new:
        if message.get("role") != "tool":
            break
        sent.add(str(message.get("tool_call_id")))
    if not sent:
        return None
    for turn in reversed([t for t in tail if not t.partial]):
        if turn.role == "user":
            return None
        if turn.role == "assistant" and turn.tool_calls:
            if not sent <= _tool_call_ids(turn):
                return None
            return turn.to_message()  # with its ids exactly as the model produced them
    return None


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
    new: Sequence[Message],
    new_turns: Sequence[Turn],
    tail: Sequence[Turn],
    now_ms: int,
    window_s: float,
    explicit: bool,
) -> tuple[int, list[Turn]] | None:
    """A regenerate or a retry: (index in ``tail`` of the repeated user turn, turns to replace).

    ``None`` when the new message is not the last stored user message again (same text, same
    ``name``, and, for a list of parts, the same parts: two different photos are two messages,
    and Bob saying what Alice said is Bob's message). With no complete
    reply after that user turn (a stream the client cut, a failed call) it is a retry: the
    partial reply, if any, is replaced and the user turn is not stored twice. With a complete
    reply it is a regenerate when the request says so (``metadata.memory_regenerate``), or when
    the reply is younger than ``window_s`` seconds and the text has at least
    ``MIN_REGENERATE_CHARS`` characters. (Clients that send their history are handled by
    :func:`_plan_whole_history`.)
    """
    if len(new) != 1 or new[0].get("role") != "user" or len(new_turns) != 1:
        return None
    repeated = new_turns[0]
    last_user = max((i for i, t in enumerate(tail) if t.role == "user"), default=None)
    if last_user is None:
        return None
    stored = tail[last_user]
    if (stored.text, stored.fp, stored.name) != (repeated.text, repeated.fp, repeated.name):
        return None  # other words, other parts, or another speaker (a group chat)
    reply = list(tail[last_user + 1 :])
    complete = [t for t in reply if not t.partial]
    if not complete or explicit:
        return last_user, reply
    recent = now_ms - complete[-1].ts_ms <= window_s * 1000
    long_enough = len(repeated.text.strip()) >= MIN_REGENERATE_CHARS
    return (last_user, reply) if recent and long_enough else None


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
