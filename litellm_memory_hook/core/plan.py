"""Deciding what one request means for the stored conversation (pure; no I/O).

:func:`plan_turn` decides what the history is, which messages are new and must be stored after
the reply, and whether the request regenerates the last reply. Clients of both kinds work:

* apps that send only the new message: the stored history is the conversation (tool results
  sent alone are completed with the stored ``tool_calls`` message they answer);
* apps that send the whole history are authoritative for what they send: the model receives
  their messages as sent, and the store follows them (an edited or deleted message, a branch,
  a regenerate), within the stored tail read for the request
  (:func:`~litellm_memory_hook.core.alignment.follow_history`); an empty store is seeded with
  their history.

A regenerate is the last stored user message sent again as the new turn right after its reply:
for a whole-history client, one whose history does not end with that reply; for a new-message-only
client, within ``requests.regenerate_window_s`` of the reply. The new reply then replaces the old
one instead of storing a duplicate pair.

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

A whole-history client's alignment with the store is in
:mod:`litellm_memory_hook.core.alignment`, the section budgets in
:mod:`litellm_memory_hook.core.budgets`.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from dataclasses import replace as dc_replace
from typing import Any

from litellm_memory_hook.core.alignment import follow_history, tool_call_ids
from litellm_memory_hook.core.messages import (
    clean_messages,
    content_text,
    is_blank,
    is_stored,
    lone_surrogate,
    message_to_turn,
    messages_to_turns,
    split_request,
    without_surrogates,
)
from litellm_memory_hook.core.models import ConversationState, Turn
from litellm_memory_hook.core.prompt import strip_injected

Message = dict[str, Any]


@dataclass(frozen=True)
class Seed:
    """A whole-history client's older messages that seed an empty store, kept as messages
    until the write: making 500 turns of a 1 MB history cost ~10 ms of the request's path,
    for turns needed only after the reply.

    Attributes:
        messages: the messages to store (each one :func:`~litellm_memory_hook.core.messages.
            is_stored`), in their stored form (:func:`storable_forms`), oldest first.
        ts_ms: their timestamp, the request time (epoch ms).
        call_id: the request's ``litellm_call_id``.
        max_chars: longest text stored for one message (characters).
    """

    messages: tuple[Message, ...]
    ts_ms: int
    call_id: str
    max_chars: int

    def turn(self, index: int) -> Turn | None:
        """The turn of ``messages[index]`` (``None`` only for a message not worth storing,
        which planning leaves out)."""
        return message_to_turn(
            self.messages[index], ts_ms=self.ts_ms, call_id=self.call_id, max_chars=self.max_chars
        )

    def turns(self) -> list[Turn]:
        """Every message's turn, oldest first."""
        return [t for t in map(self.turn, range(len(self.messages))) if t is not None]


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
        pending: turns to store after the reply (the new turn; plus the client's version of
            turns it edited).
        replace: stored turns the reply replaces (a regenerate, an edit, a branch, a deletion).
        previous_text: text of the stored turn just before the first turn to store (the recall
            index keys a reply by the question before it); "" when seeding.
        seed: the client's history that seeds an empty store (a whole-history client's first
            request), stored before ``pending`` and written only if the conversation is still
            empty then; ``None`` otherwise. Its messages become turns after the reply
            (:meth:`Seed.turn`), not on the request's path.
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
    seed: Seed | None = None
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

    @property
    def seeded(self) -> int:
        """How many turns the seed stores (0 without one)."""
        return len(self.seed.messages) if self.seed is not None else 0

    def turns_to_store(self) -> tuple[Turn, ...]:
        """Every turn the plan stores after the reply, oldest first: the seed's, then
        ``pending`` (the write makes the seed's turns itself, in slices)."""
        if self.seed is None:
            return self.pending
        return (*self.seed.turns(), *self.pending)


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
    if not _answerable(new_convo):
        return None
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
        seed = Seed(tuple(client_history), now_ms, call_id, max_stored_chars)
        return TurnPlan(
            system_texts,
            split.earlier,
            (0,) * len(split.earlier),
            new,
            tuple(new_turns),
            seed=seed if client_history else None,
            verbatim=True,
            **common,
        )
    if client_history:
        writes = follow_history(
            split.earlier,
            client_history,
            new_turns,
            state,
            max_chars=max_stored_chars,
            call_id=call_id,
            now_ms=now_ms,
        )
        return TurnPlan(
            system_texts,
            tuple(split.earlier),
            writes.history_seqs,
            new,
            writes.pending,
            writes.replace,
            previous_text=writes.previous_text,
            verbatim=True,
            **common,
        )
    repeat = _Repeat(now_ms, regenerate_window_s, regenerate)
    return _plan_new_only(new_convo, new, new_turns, state, system_texts, common, repeat)


def _answerable(new_convo: Sequence[Message]) -> bool:
    """Whether the new turn is one memory can answer and store: it ends with a user message
    that is not blank or with tool results, and its tool traffic is whole."""
    if not new_convo or new_convo[-1].get("role") not in ("user", "tool"):
        return False
    if _broken_tool_groups(new_convo):
        return False  # tool traffic that is not whole: the client's request, passed through
    last = new_convo[-1]
    # a blank question: nothing to answer from memory; never store a reply without its question
    return not (last.get("role") == "user" and is_blank(content_text(last.get("content"))))


@dataclass(frozen=True)
class _Repeat:
    """What tells a repeated message a regenerate (:func:`_repeated_turn`): the request time
    (epoch ms), the window in seconds, and whether the request says so."""

    now_ms: int
    window_s: float
    explicit: bool


def _plan_new_only(
    new_convo: Sequence[Message],
    new: tuple[Message, ...],
    new_turns: Sequence[Turn],
    state: ConversationState,
    system_texts: tuple[str, ...],
    common: dict[str, Any],
    repeat: _Repeat,
) -> TurnPlan:
    """A client that sent only its new messages: the stored turns are the history."""
    tail = state.tail

    def plan(
        before: Sequence[Turn], pending: Sequence[Turn], replace: Sequence[Turn], previous: str
    ) -> TurnPlan:
        """The plan whose history is the complete stored turns of ``before``."""
        kept = [t for t in before if not t.partial]
        return TurnPlan(
            system_texts,
            tuple(t.to_message() for t in kept),
            tuple(t.seq for t in kept),
            new,
            tuple(pending),
            tuple(replace),
            previous_text=previous,
            **common,
        )

    # A tool-result turn carries the assistant tool_calls message it answers. When a stored
    # assistant turn made the same calls, the request continues that group (usually the newest
    # turn) or repeats it (a client retrying, or regenerating the answer to the results): the
    # call is not stored again, and what the store holds after it is replaced.
    first = new_convo[0]
    group_at = (
        _stored_call(tail, tool_call_ids(first)) if first.get("role") == "assistant" else None
    )
    if group_at is not None:
        results = [t for t in new_turns if not (t.role == "assistant" and t.tool_calls)]
        return plan(tail[:group_at], results, tail[group_at + 1 :], tail[group_at].text)
    retry = _repeated_turn(
        new_convo, new_turns, tail, repeat.now_ms, repeat.window_s, repeat.explicit
    )
    if retry is not None:
        user_at, replace = retry
        return plan(tail[:user_at], (), replace, tail[user_at].text)
    return plan(tail, new_turns, (), tail[-1].text if tail else "")


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
        return dc_replace(plan, pending=(), replace=(), seed=None, store=False)
    return plan


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
            if not sent <= tool_call_ids(turn):
                return None
            return turn.to_message()  # with its ids exactly as the model produced them
    return None


def _stored_call(tail: Sequence[Turn], ids: set[str]) -> int | None:
    """Index in ``tail`` of the newest stored assistant turn that made exactly these tool calls."""
    if not ids:
        return None
    for index in range(len(tail) - 1, -1, -1):
        turn = tail[index]
        if turn.role == "assistant" and turn.tool_calls and tool_call_ids(turn) == ids:
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
    :func:`~litellm_memory_hook.core.alignment.follow_history`.)
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


def speaker_label(turn: Turn) -> str:
    """The speaker of a recalled line: the stored name, else the role."""
    return turn.name or turn.role
