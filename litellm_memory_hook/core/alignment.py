"""A whole-history client's messages against the stored tail (pure; no I/O).

:func:`align` finds where the client's conversation messages meet the stored turns (both oldest
first); :func:`follow_history` decides what the store does to follow the client: append, or
replace the stored turns from an edit, a deletion, a branch or a regenerate on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import replace as dc_replace
from typing import Any

from litellm_memory_hook.core.messages import content_text, keep_tail, messages_to_turns
from litellm_memory_hook.core.models import ConversationState, Turn

Message = dict[str, Any]

#: stored turns younger than this (ms) are never replaced by an edit or a branch: a client that
#: does not show them sent its request before they were stored (parallel requests, two tabs).
BRANCH_GRACE_MS = 5000


def tool_call_ids(message: Message | Turn) -> set[str]:
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
        frozenset(tool_call_ids(message)) if role == "assistant" else None,
        str(message.get("tool_call_id") or "") if role == "tool" else None,
    )


def _turn_key(turn: Turn) -> _Key:
    """:func:`_message_key` of a stored turn (``None`` for a tool turn without a call id:
    it is the same as no client message)."""
    return (
        turn.role,
        turn.text.strip(),
        frozenset(tool_call_ids(turn)) if turn.role == "assistant" else None,
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


@dataclass(frozen=True)
class HistoryWrites:
    """What the store does for a whole-history client's request (:func:`follow_history`).

    Attributes:
        history_seqs: the seq of each message of the client's history (0 for those the store
            does not hold).
        pending: turns to store after the reply.
        replace: stored turns the reply replaces.
        previous_text: text of the stored turn just before the first turn to store.
    """

    history_seqs: tuple[int, ...]
    pending: tuple[Turn, ...]
    replace: tuple[Turn, ...]
    previous_text: str


def follow_history(
    earlier: Sequence[Message],
    client_history: Sequence[Message],
    new_turns: Sequence[Turn],
    state: ConversationState,
    *,
    max_chars: int,
    call_id: str,
    now_ms: int,
) -> HistoryWrites:
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

    Args:
        earlier: the client's messages before the new turn, as sent.
        client_history: those of ``earlier`` the store can hold (in their stored form).
        new_turns: the new turn as stored turns.
        state: the stored conversation (its chat turns).
        max_chars: longest text stored for one message (characters).
        call_id: ``litellm_call_id`` recorded with the stored turns.
        now_ms: the request time, epoch ms.
    """
    tail = list(state.tail)
    stored = [t for t in tail if not t.partial]
    alignment = align(client_history, stored, max_chars)
    seq_of: dict[int, int] = {}
    if alignment is not None:
        for message, seq in zip(client_history, alignment.seqs, strict=True):
            seq_of[id(message)] = seq
    history_seqs = tuple(seq_of.get(id(m), 0) for m in earlier)
    follow = _Follow(client_history, new_turns, tail, stored, max_chars, call_id, now_ms)
    if alignment is None:
        pending, replace, previous = follow.appended(client_history)
    else:
        pending, replace, previous = follow.aligned(alignment)
    return HistoryWrites(history_seqs, tuple(pending), tuple(replace), previous)


#: what the store does: (turns to store, stored turns they replace, text before the first)
_Writes = tuple[Sequence[Turn], Sequence[Turn], str]


@dataclass(frozen=True)
class _Rewrite:
    """The stored turns from ``from_seq`` on give way to ``pending`` (unless they are too
    young: :meth:`_Follow.rewrite`); ``from_seq`` 0 replaces nothing."""

    from_seq: int
    pending: list[Turn]


@dataclass(frozen=True)
class _Follow:
    """The steps of :func:`follow_history`, over one request's client history and stored tail
    (``stored``: the tail without partial replies)."""

    client_history: Sequence[Message]
    new_turns: Sequence[Turn]
    tail: list[Turn]
    stored: list[Turn]
    max_chars: int
    call_id: str
    now_ms: int

    def turns(self, messages: Sequence[Message]) -> list[Turn]:
        """Client messages as turns to store."""
        return messages_to_turns(
            messages, ts_ms=self.now_ms, call_id=self.call_id, max_chars=self.max_chars
        )

    def appended(self, unstored: Sequence[Message]) -> _Writes:
        """Nothing stored is touched: the new turns are appended after the stored ones, with the
        question of the exchange they go on when ``unstored`` (client messages the store does
        not hold) holds it."""
        appended = _after_stored_call(self.new_turns, self.stored)
        asked = _unstored_question(unstored, appended)
        tail = self.tail
        return [*self.turns(asked), *appended], (), tail[-1].text if tail else ""

    def partial_after(self, last: int) -> list[Turn]:
        """The partial replies stored after seq ``last`` (a stream the client cut)."""
        return [t for t in self.tail if t.partial and t.seq > last]

    def after(self, seq: int) -> list[Turn]:
        """The tail's turns after seq ``seq``."""
        return [t for t in self.tail if t.seq > seq]

    def aligned(self, alignment: Alignment) -> _Writes:
        """The client's history aligned with the stored tail: where they part decides."""
        if alignment.client_at < len(self.client_history):
            step = self.client_differs(alignment)
        elif alignment.stored_at < len(self.stored):
            step = self.store_holds_more(self.stored[alignment.stored_at])
        else:
            return self.continued(alignment.stored_at)
        if isinstance(step, _Rewrite):
            return self.rewrite(step, alignment.client_at)
        return step

    def client_differs(self, alignment: Alignment) -> _Writes | _Rewrite:
        """An edit, a deletion or a branch inside the client's history, or messages it has
        after everything stored: its messages from there on, then the new turn."""
        rewritten = self.turns(self.client_history[alignment.client_at :])
        stored = self.stored
        if alignment.stored_at == len(stored):
            # after all of it: a partial reply stored after the matched turns (a stream the
            # client cut, then sent on with what it got) is replaced, not kept beside its copy
            last = stored[-1].seq if stored else 0
            return (
                [*rewritten, *self.new_turns],
                self.partial_after(last),
                stored[-1].text if stored else "",
            )
        rewritten = _keep_times(rewritten, stored[: alignment.stored_at], self.tail)
        return _Rewrite(stored[alignment.stored_at].seq, [*rewritten, *self.new_turns])

    def store_holds_more(self, nxt: Turn) -> _Writes | _Rewrite:
        """The client's history matched, and ``nxt`` is the first stored turn after it: tool
        results for it, a regenerate of it, or a deletion or branch from there."""
        new_turns = self.new_turns
        first = new_turns[0] if new_turns else None
        if (
            first is not None
            and first.role == "assistant"
            and first.tool_calls
            and tool_call_ids(first) == tool_call_ids(nxt)
        ):
            # tool results for the stored tool-call reply: it is not stored again
            return new_turns[1:], self.after(nxt.seq), nxt.text
        repeated = (
            len(new_turns) == 1
            and new_turns[0].role == "user"
            and nxt.role == "user"
            and (nxt.text, nxt.fp) == (new_turns[0].text, new_turns[0].fp)
        )
        if repeated:  # a regenerate: the replies after the repeated question go
            return (), self.after(nxt.seq), nxt.text
        return _Rewrite(nxt.seq, list(new_turns))

    def continued(self, stored_at: int) -> _Writes:
        """A plain continuation; a partial reply after the matched turns is replaced."""
        last = self.stored[stored_at - 1].seq if stored_at else 0
        previous = self.stored[stored_at - 1].text if last else ""
        return self.new_turns, self.partial_after(last), previous

    def rewrite(self, step: _Rewrite, client_at: int) -> _Writes:
        """The stored turns from ``step.from_seq`` on replaced by ``step.pending``; or, when
        some were stored moments ago, nothing replaced and the new turns appended."""
        from_seq = step.from_seq
        replace = [t for t in self.tail if t.seq >= from_seq] if from_seq else []
        if any(not t.partial and t.ts_ms > self.now_ms - BRANCH_GRACE_MS for t in replace):
            # Turns stored moments ago that this client's history does not show are another
            # request's (two tabs, parallel requests), not an edit: keep them, append.
            return self.appended(self.client_history[client_at:])
        before = [t for t in self.stored if not from_seq or t.seq < from_seq]
        return step.pending, replace, before[-1].text if before else ""


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
        and tool_call_ids(first) == tool_call_ids(stored[-1])
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
