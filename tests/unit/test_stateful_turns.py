"""A model-based (stateful) test of how client requests become stored turns.

Hypothesis drives the real hook in-process (``async_pre_call_hook``, then
``async_post_call_success_hook`` with a LiteLLM ``ModelResponse``) on fakeredis, through random
sequences of client actions, and after every request compares the turns read back from Redis
(``ZRANGE`` of the conversation's turns key) with a reference model, and what the model received
with what the client sent.

Time is a fake clock (``time.time`` as read by :mod:`litellm_memory_hook.engine.rebuild`, the
request time, and by :func:`litellm_memory_hook.store.writes.now_ms`, the reply's time):
a request starts at the clock's time and its reply is stored ``STEP_MS`` later; the ``wait``
and ``pause`` actions move the clock (1, 4, 6, 10, 60 or 400 s), so the 5 s grace and the 300 s
``regenerate_window_s`` are crossed both ways.

Reference model (README "How it works", "Clients that send their history ...", the
``metadata.memory_regenerate`` paragraph; ``core/plan.py``). Every message has an identity
(``mid``): a client message, an edited message (a new identity), a reply. The reference keeps
``stored`` (the turns the store must hold, in order, each with the time it was said) and, for a
whole-history client, ``conv`` (the conversation as the client believes it) and ``trim`` (the
client sends ``conv[trim:]``: it dropped older messages). A new-message-only client's
conversation is ``stored``.

* A new-message-only request (the new user message, or tool results alone) -- and a
  whole-history request with no assistant message in it (README: such a request "is a new
  turn, not a history") -- appends its messages and the reply, except a repeat of the last
  stored user message (same text) that is a regenerate: with ``metadata.memory_regenerate``,
  or within ``regenerate_window_s`` (300 s) of the last stored reply and 12+ characters long;
  a regenerate replaces everything after that user message with the reply. Tool results
  alone answer the stored last call (appended after it).
* A whole-history request into an empty store seeds it: the client's history, the new turn,
  the reply.
* A whole-history request otherwise is aligned with the stored tail (the newest
  ``recent_messages + 4`` = 44 stored turns): the client's history and new turn, from where
  the first of its messages the tail holds (by identity) is stored, are compared message by
  message (role, text, tool-call ids: the same question asked twice is equal) with the store; at
  the first difference ``d`` the stored turns from there on are replaced by the client's
  messages from there on, then the reply. So the store ends as ``stored[:p] + history + new +
  reply`` (``p``: where the client's history starts in the store; what the client trimmed stays
  stored). A difference older than the tail is not seen. When nothing aligns, the new turn is
  appended. Three outcomes fall out of this: a plain continuation (nothing replaced), a
  regenerate (the new user message is the next stored one: the replies after it go) and a tool
  continuation (the new turn's ``tool_calls`` message is stored: only its results and the reply
  are new); an edit, a deletion or a branch (the difference lies in the client's history or
  at its new turn) replaces the rest.
* Grace: when an edit, a deletion or a branch would replace a turn stored less than 5 s
  earlier (``BRANCH_GRACE_MS``), nothing is replaced and the new turn is appended (README: such
  turns "come from a parallel request, not an edit"): a repeated question again (a regenerate
  the store cannot see as one), but not a tool-call message that is already the newest stored
  turn (an agent's calls are stored once each); a regenerate and a tool continuation that align
  are not subject to it. The store then differs from the client's conversation until a later
  whole-history request, more than 5 s after, repairs it by the rule above.
* Each turn keeps the time it was said: a repaired message the store held keeps its time,
  others take the request's, never earlier than the turn before (``alignment._keep_times``); only
  the grace rule reads these times.

Checked after every request:

* the stored turns (role, text, tool-call ids, answered call id), in seq order, equal the
  reference's: no duplicate, nothing lost, nothing out of order; stored times never decrease;
* what the model received (the messages after the pre-call hook): one system message first,
  then for a whole-history client its own messages as sent (a suffix of them, equal as dicts:
  the window drops only whole old messages); for a new-message-only client its messages as sent
  at the end (tool results alone after the stored call they answer), after a suffix of the
  stored conversation that starts with a user message (without the reply a regenerate replaces).

Actions: a new message (either style; the model answers with text, one tool call or two
parallel calls), tool results for the open call, a regenerate (either style; new-message-only
with or without ``memory_regenerate``), an edit of an earlier user message by a whole-history
client (cut there and sent as the new message, or changed in place with a new message after),
deleting an earlier exchange (with a new message, or quietly: the next request shows it),
trimming the client's history, switching style, waiting.
The initial state may hold a history the whole-history client has and the store lacks (seed).

Not modelled: streaming and cut streams, parallel requests, Redis outages, forgets, side
requests, prefills, parts/images, names, window budgets beyond a suffix check, recall content.
A whole-history regenerate of a client's only visible exchange after the 300 s window is not
generated (it is a repeat, stored as a new turn, and the client's history then reads the same
text two ways).

Run longer: ``MEMORY_STATEFUL_EXAMPLES=400 MEMORY_STATEFUL_STEPS=30``; pass
``--hypothesis-seed=N`` to vary the run.
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import fakeredis
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)
from litellm.types.utils import ModelResponse

from litellm_memory_hook.core.models import full_member, stored_text
from litellm_memory_hook.engine import rebuild as rebuild_module
from litellm_memory_hook.store import writes as store_writes_module
from litellm_memory_hook.store.keys import ConversationKeys
from tests.support.hook_calls import Auth, make_hook
from tests.support.prompt_view import without_tail

TAIL = 44  # recent_messages (40) + 4: the stored tail a request reads
GRACE_MS = 5000
REGEN_WINDOW_MS = 300_000
STEP_MS = 100  # the reply comes this long after the request
USER = "u-state"

#: requests sent per action, over the run (the long run prints them: -s)
ACTIONS: Counter[str] = Counter()
#: what the reference decided, over the run
OUTCOMES: Counter[str] = Counter()


def teardown_module() -> None:
    """With ``-s``: how many requests each action and each reference outcome got."""
    print("\nrequests per action:", dict(sorted(ACTIONS.items())))  # noqa: T201
    print("reference outcomes:", dict(sorted(OUTCOMES.items())))  # noqa: T201


class FakeClock:
    """Stands in for the ``time`` module of the patched modules: ``time()`` is the fake clock,
    everything else is the real module's."""

    def __init__(self, start_ms: int) -> None:
        self.ms = start_ms

    def time(self) -> float:
        return self.ms / 1000

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


@dataclass(frozen=True)
class Msg:
    """A message of the conversation with its identity."""

    mid: int
    role: str
    text: str = ""
    call_ids: tuple[str, ...] = ()
    answers: str = ""  # a tool result: the call id

    def wire(self) -> dict[str, Any]:
        """The message as a client sends it."""
        if self.role == "tool":
            return {"role": "tool", "tool_call_id": self.answers, "content": self.text}
        if self.call_ids:
            return {"role": "assistant", "content": None, "tool_calls": _calls(self.call_ids)}
        return {"role": self.role, "content": self.text}

    def key(self) -> tuple[str, str, tuple[str, ...], str]:
        return (self.role, self.text, tuple(sorted(self.call_ids)), self.answers)

    @property
    def open_call(self) -> bool:
        return self.role == "assistant" and bool(self.call_ids)


@dataclass
class Entry:
    """A turn the reference store holds."""

    msg: Msg
    ts: int


def _calls(ids: tuple[str, ...]) -> list[dict[str, Any]]:
    return [
        {"id": i, "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
        for i in ids
    ]


def _response(reply: Msg) -> ModelResponse:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    finish = "stop"
    if reply.call_ids:
        message["tool_calls"] = _calls(reply.call_ids)
        finish = "tool_calls"
    return ModelResponse(
        id="resp", choices=[{"index": 0, "message": message, "finish_reason": finish}]
    )


Key = tuple[str, str, tuple[str, ...], str]


def _stored_key(turn: dict[str, Any]) -> Key:
    ids = tuple(sorted(str(c.get("id")) for c in turn.get("tool_calls") or ()))
    return (turn["role"], stored_text(turn), ids, str(turn.get("tool_call_id") or ""))


def _wire_key(message: dict[str, Any]) -> Key:
    content = message.get("content")
    ids = tuple(sorted(str(c.get("id")) for c in message.get("tool_calls") or ()))
    answers = str(message.get("tool_call_id") or "") if message.get("role") == "tool" else ""
    return (str(message.get("role")), content if isinstance(content, str) else "", ids, answers)


def _replayable(messages: list[Msg]) -> list[Msg]:
    """The stored messages a window can replay: a tool-call message only with a result for
    each of its calls right after it (an unanswered call is never sent: a 400 upstream)."""
    out: list[Msg] = []
    i = 0
    while i < len(messages):
        m = messages[i]
        if m.open_call:
            j = i + 1
            while j < len(messages) and messages[j].role == "tool":
                j += 1
            if {r.answers for r in messages[i + 1 : j]} >= set(m.call_ids):
                out += messages[i:j]
            i = j
            continue
        if m.role != "tool":
            out.append(m)
        i += 1
    return out


def _is_window(window: list[Any], messages: list[Any]) -> bool:
    """``window`` is a suffix of ``messages`` (keys, or messages as sent); or (README: when the
    budget cuts inside an exchange, its question stays first in place of its oldest tool
    groups) that exchange's question, then a suffix with only tool-group messages between."""
    if window == messages[len(messages) - len(window) :]:
        return True
    keys = [m if isinstance(m, tuple) else _wire_key(m) for m in messages]
    rest = window[1:]
    start = len(messages) - len(rest)
    if not rest or rest != messages[start:]:
        return False
    asked = max((i for i in range(start) if keys[i][0] == "user"), default=None)
    if asked is None or messages[asked] != window[0]:
        return False
    return all(k[0] == "tool" or k[2] for k in keys[asked + 1 : start])


@dataclass
class Expected:
    """What the model must receive for a request that is not verbatim: a suffix of ``history``
    (by key), then ``new`` (exact dicts)."""

    history: list[Msg]
    new: list[dict[str, Any]] = field(default_factory=list)


class TurnsMachine(RuleBasedStateMachine):
    """Client actions against the real hook; the reference in the module docstring."""

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.clock = FakeClock(1_760_000_000_000)
        self._saved = (rebuild_module.time, store_writes_module.time)
        rebuild_module.time = self.clock  # type: ignore[assignment]
        store_writes_module.time = self.clock  # type: ignore[assignment]
        self.redis = fakeredis.FakeAsyncRedis(server=fakeredis.FakeServer())
        self.prefix = "st" + uuid.uuid4().hex[:8]
        self.hook = make_hook(self.redis, self.prefix)
        self.keys = ConversationKeys.for_ids(self.prefix, "master", USER, "demo")
        self.stored: list[Entry] = []
        self.conv: list[Msg] = []
        self.trim = 0
        self.style = "new"
        self.lead: dict[str, Any] | None = None
        self.n = 0
        self.requests = 0
        self.log: list[str] = []

    def teardown(self) -> None:
        try:
            self.loop.run_until_complete(self.hook.drain())
            self.loop.run_until_complete(self.redis.aclose())
            self.loop.close()
        finally:
            rebuild_module.time, store_writes_module.time = self._saved  # type: ignore[assignment]

    # -- helpers -----------------------------------------------------------------------------

    def _mid(self) -> int:
        self.n += 1
        return self.n

    def _user(self, text: str | None = None) -> Msg:
        mid = self._mid()
        return Msg(mid, "user", text or f"question {mid} about the garden")

    def _reply(self, kind: str) -> Msg:
        mid = self._mid()
        if kind == "text":
            return Msg(mid, "assistant", f"answer {mid} from the model")
        count = 2 if kind == "tool2" else 1
        return Msg(mid, "assistant", "", tuple(f"call_{mid}_{k}" for k in range(count)))

    def _results(self, call: Msg) -> list[Msg]:
        out = []
        for cid in call.call_ids:
            mid = self._mid()
            out.append(Msg(mid, "tool", f"result {mid} of {cid}", answers=cid))
        return out

    def view(self) -> list[Msg]:
        """The conversation as the client sees it."""
        if self.style == "whole":
            return self.conv
        return [e.msg for e in self.stored]

    def open_call(self) -> bool:
        view = self.view()
        return bool(view) and view[-1].open_call

    def _send(
        self, messages: list[dict[str, Any]], reply: Msg, *, explicit: bool = False
    ) -> list[dict[str, Any]]:
        """One request through the hook; returns what the model received."""
        self.requests += 1
        ACTIONS[self.log[-1].split(" ")[0]] += 1
        data: dict[str, Any] = {
            "model": "demo",
            "user": USER,
            "messages": copy.deepcopy(messages),
            "litellm_call_id": f"req-{self.requests}",
        }
        if explicit:
            data["metadata"] = {"memory_regenerate": True}
        out = self.loop.run_until_complete(
            self.hook.async_pre_call_hook(Auth(), None, data, "acompletion")
        )
        assert out is not None
        received = without_tail(copy.deepcopy(out["messages"]))
        self.clock.ms += STEP_MS
        self.loop.run_until_complete(
            self.hook.async_post_call_success_hook(out, Auth(), _response(reply))
        )
        self.loop.run_until_complete(self.hook.drain())
        errors = {k: v for k, v in self.hook.counters.items() if k.endswith("errors") and v}
        assert not errors, errors
        return received

    def _read_store(self) -> list[dict[str, Any]]:
        raw = self.loop.run_until_complete(self.redis.zrange(self.keys.turns, 0, -1))
        return [full_member(json.loads(m)) for m in raw]

    # -- the reference ---------------------------------------------------------------------------

    def _ref_new_only(
        self, new: list[Msg], reply: Msg, t: int, *, explicit: bool = False
    ) -> Expected:
        """A request that sends only new messages (module docstring); returns what the model
        must receive before the new messages."""
        history = [e.msg for e in self.stored]
        if new[0].role == "tool":
            at = max(i for i, e in enumerate(self.stored) if e.msg.open_call)
            assert at == len(self.stored) - 1, "results answer the last stored turn"
            self.stored += [Entry(m, t) for m in new]
            self.stored.append(Entry(reply, t + STEP_MS))
            OUTCOMES["alone: tool results"] += 1
            return Expected(history[:at])
        users = [i for i, e in enumerate(self.stored) if e.msg.role == "user"]
        last = users[-1] if users else None
        if last is not None and new[0].role == "user" and len(new) == 1:
            same = self.stored[last].msg.text == new[0].text
            after = self.stored[last + 1 :]
            recent = bool(after) and t - after[-1].ts <= REGEN_WINDOW_MS
            if same and (explicit or not after or (recent and len(new[0].text.strip()) >= 12)):
                self.stored = [*self.stored[: last + 1], Entry(reply, t + STEP_MS)]
                OUTCOMES["alone: regenerate"] += 1
                return Expected(history[:last])
            if same:
                OUTCOMES["alone: a repeat stored again"] += 1
        self.stored += [Entry(m, t) for m in new]
        self.stored.append(Entry(reply, t + STEP_MS))
        OUTCOMES["alone: appended"] += 1
        return Expected(history)

    def _ref_whole(self, history: list[Msg], new: list[Msg], reply: Msg, t: int) -> None:
        """A whole-history request with an assistant message in it (module docstring)."""
        seq = [*history, *new]
        answer = Entry(reply, t + STEP_MS)
        if not self.stored:  # seed
            self.stored = [*(Entry(m, t) for m in seq), answer]
            OUTCOMES["whole: seed"] += 1
            return
        tail_start = max(0, len(self.stored) - TAIL)
        where = {e.msg.mid: i for i, e in enumerate(self.stored) if i >= tail_start}
        anchor = next(((j, where[m.mid]) for j, m in enumerate(seq) if m.mid in where), None)
        unstored = [m for m in new if m.mid not in where]
        if anchor is None:  # nothing aligns: the new turn is appended
            self.stored += [*(Entry(m, t) for m in unstored), answer]
            OUTCOMES["whole: nothing aligns"] += 1
            return
        p = anchor[1] - anchor[0]
        d = max(0, tail_start - p)
        while (
            d < len(seq)
            and p + d < len(self.stored)
            and self.stored[p + d].msg.key() == seq[d].key()
        ):
            d += 1
        replaced = self.stored[p + d :]
        if replaced and d <= len(history) and any(e.ts > t - GRACE_MS for e in replaced):
            # grace: keep the young turns, append the new turn (a user message the store
            # holds too: the store cannot tell it from a parallel request's), a tool-call
            # message the store holds excepted
            kept = [m for m in new if not (m.open_call and m.mid in where)]
            for m in kept:
                if m.mid in where:
                    # a user message the store holds is stored again (a regenerate the store
                    # takes for a new turn): the client's message is the new copy, which its
                    # reply follows; the old copy becomes a message of its own
                    old = self.stored[where[m.mid]]
                    renamed = Msg(self._mid(), m.role, m.text)
                    self.stored[where[m.mid]] = Entry(renamed, old.ts)
            self.stored += [*(Entry(m, t) for m in kept), answer]
            OUTCOMES["whole: grace"] += 1
            return
        said = {e.msg.mid: e.ts for e in replaced}
        floor = self.stored[p + d - 1].ts if p + d > 0 else 0
        rewritten = []
        for k, m in enumerate(seq[d:], start=d):
            ts = said.get(m.mid, t) if k < len(history) else t
            floor = max(floor, min(ts, t))
            rewritten.append(Entry(m, floor))
        self.stored = [*self.stored[: p + d], *rewritten, answer]
        if not replaced:
            OUTCOMES["whole: continuation"] += 1
        elif d > len(history):
            OUTCOMES["whole: regenerate or tool step replacing"] += 1
        elif d < len(history):
            OUTCOMES["whole: history rewritten (edit, delete, repair)"] += 1
        else:
            OUTCOMES["whole: branch at the new turn"] += 1
        if p < tail_start:
            OUTCOMES["whole: client history older than the tail"] += 1

    # -- requests of both styles -----------------------------------------------------------------

    def _request(
        self,
        history: list[Msg],
        new: list[Msg],
        reply: Msg,
        *,
        sent_new: list[Msg] | None = None,
        explicit: bool = False,
    ) -> None:
        """Send one request (the client's style), update the reference, check the store and
        what the model received. ``history``/``new``: the conversation split as the hook splits
        it (a tool-result turn's new part starts with the call); ``sent_new``: the new messages
        a new-message-only client sends (default ``new``)."""
        t = self.clock.ms
        lead = [self.lead] if self.lead is not None and self.style == "whole" else []
        if self.style == "new":
            sent_msgs = sent_new if sent_new is not None else new
            sent = [m.wire() for m in sent_msgs]
            received = self._send(sent, reply, explicit=explicit)
            expected = self._ref_new_only(sent_msgs, reply, t, explicit=explicit)
            expected.new = [
                *([new[0].wire()] if sent_msgs[0].role == "tool" else []),
                *sent,
            ]
            self._check_window(received, expected, by_key_new=sent_msgs[0].role == "tool")
        else:
            sent = [*lead, *(m.wire() for m in (*history, *new))]
            received = self._send(sent, reply)
            if not any(m.role == "assistant" for m in (*history, *new)):
                OUTCOMES["whole: no assistant message, a new turn"] += 1
                expected = self._ref_new_only(new, reply, t, explicit=explicit)
                expected.new = [m.wire() for m in new]
                self._check_window(received, expected)
            else:
                self._ref_whole(history, new, reply, t)
                self._check_verbatim(received, sent[len(lead) :], len(new))
        self._check_store()

    def _check_verbatim(
        self, received: list[dict[str, Any]], sent: list[dict[str, Any]], new: int
    ) -> None:
        assert received[0]["role"] == "system", received[0]
        if self.lead is not None:
            assert self.lead["content"] in received[0]["content"]
        window = received[1:]
        assert new <= len(window) <= len(sent), (window, sent)
        assert _is_window(window, sent), (
            "the model must receive the client's messages as sent",
            window,
            sent,
        )
        assert window[0]["role"] == "user", window

    def _check_window(
        self, received: list[dict[str, Any]], expected: Expected, by_key_new: bool = False
    ) -> None:
        assert received[0]["role"] == "system", received[0]
        window = received[1:]
        new = len(expected.new)
        assert len(window) >= new, (window, expected.new)
        got_new = window[len(window) - new :]
        if by_key_new:  # tool results alone: the stored call comes first, then as sent
            assert [_wire_key(m) for m in got_new[:1]] == [_wire_key(expected.new[0])]
            assert got_new[1:] == expected.new[1:], (got_new, expected.new)
        else:
            assert got_new == expected.new, (got_new, expected.new)
        history = [_wire_key(m) for m in window[: len(window) - new]]
        keys = [m.key() for m in _replayable(expected.history)]
        if history and not _is_window(history, keys):
            lines = ["the window must be a suffix of the stored conversation", "window:"]
            lines += [f"  {k}" for k in history]
            lines += ["stored history:", *(f"  {k}" for k in keys), "actions:", *self.log]
            raise AssertionError("\n".join(lines))
        if history:
            assert history[0][0] == "user", history
        elif any(m.role == "user" for m in expected.history[-6:]):
            raise AssertionError(f"the stored history is missing from the window: {keys}")

    def _check_store(self) -> None:
        turns = self._read_store()
        got = [_stored_key(t) for t in turns]
        want = [e.msg.key() for e in self.stored]
        if got != want:
            lines = ["stored turns differ from the reference", "stored:"]
            lines += [f"  {k}" for k in got]
            lines += ["expected:", *(f"  {k}" for k in want), "actions:", *self.log]
            raise AssertionError("\n".join(lines))
        times = [int(t["ts"]) for t in turns]
        assert times == sorted(times), ("stored times go back", times)

    # -- actions ---------------------------------------------------------------------------------

    @initialize(
        style=st.sampled_from(["new", "whole"]),
        lead=st.booleans(),
        seed_exchanges=st.integers(min_value=0, max_value=3),
        warmup=st.integers(min_value=0, max_value=8),
    )
    def start(self, style: str, lead: bool, seed_exchanges: int, warmup: int) -> None:
        """The client's style; a whole-history client may hold a history the store lacks
        (its first request seeds it); ``warmup`` plain exchanges 10 s apart, so that the
        actions after them meet longer conversations."""
        self.style = style
        if lead:
            self.lead = {"role": "system", "content": "You are a helpful gardener."}
        if style == "whole":
            for _ in range(seed_exchanges):
                self.conv += [self._user(), self._reply("text")]
        self.log.append(f"start style={style} lead={lead} seeded={len(self.conv)}")
        for _ in range(warmup):
            self.new_message("text")
            self.pause()

    @rule(dt=st.sampled_from([1_000, 4_000, 6_000, 60_000, 400_000]))
    def wait(self, dt: int) -> None:
        self.clock.ms += dt
        self.log.append(f"wait {dt}")

    @rule()
    def pause(self) -> None:
        """A user's pause between requests (a second rule, so that time passes often)."""
        self.clock.ms += 10_000
        self.log.append("wait 10000")

    @precondition(lambda self: not self.open_call())
    @rule(kind=st.sampled_from(["text", "text", "tool1", "tool2"]))
    def new_message(self, kind: str) -> None:
        user, reply = self._user(), self._reply(kind)
        self.log.append(f"new_message[{self.style}] {user.text!r} -> {kind}")
        history = self.conv[self.trim :] if self.style == "whole" else []
        self._request(list(history), [user], reply)
        if self.style == "whole":
            self.conv += [user, reply]

    @precondition(lambda self: self.open_call())
    @rule(kind=st.sampled_from(["text", "text", "tool1"]))
    def tool_results(self, kind: str) -> None:
        view = self.view()
        call = view[-1]
        results, reply = self._results(call), self._reply(kind)
        self.log.append(f"tool_results[{self.style}] {call.call_ids} -> {kind}")
        if self.style == "whole":
            self._request(self.conv[self.trim : -1], [call, *results], reply)
            self.conv += [*results, reply]
        else:
            self._request([], [call, *results], reply, sent_new=results)

    @precondition(lambda self: any(m.role == "user" for m in self.view()))
    @rule(kind=st.sampled_from(["text", "tool1"]), explicit=st.booleans())
    def regenerate(self, kind: str, explicit: bool) -> None:
        view = self.view()
        at = max(i for i, m in enumerate(view) if m.role == "user")
        reply = self._reply(kind)
        if self.style == "whole":
            if at < self.trim:
                return  # the client trimmed its own last question away: nothing to regenerate
            history = self.conv[self.trim : at]
            if not any(m.role == "assistant" for m in history):
                # a request without an assistant message: a regenerate only by time (the
                # repeat outside the window is not generated: see the module docstring)
                last = self.stored[-1].ts if self.stored else 0
                if self.clock.ms - last > REGEN_WINDOW_MS or self.clock.ms - last < 0:
                    return
                users = [e for e in self.stored if e.msg.role == "user"]
                if not users or users[-1].msg.text != view[at].text:
                    return  # the store's last question is another one: not a regenerate
            self.log.append(f"regenerate[whole] {view[at].text!r} -> {kind}")
            self._request(history, [view[at]], reply)
            self.conv = [*self.conv[: at + 1], reply]
        else:
            again = Msg(self._mid(), "user", view[at].text)
            self.log.append(f"regenerate[new] {again.text!r} explicit={explicit} -> {kind}")
            self._request([], [again], reply, explicit=explicit)

    @precondition(lambda self: self.style == "whole")
    @rule(data=st.data(), in_place=st.booleans(), kind=st.sampled_from(["text", "tool1"]))
    def edit(self, data: st.DataObject, in_place: bool, kind: str) -> None:
        users = [i for i, m in enumerate(self.conv) if m.role == "user" and i >= self.trim]
        if not users:
            return
        at = data.draw(st.sampled_from(users), label="edit at")
        if in_place and self.open_call():
            in_place = False
        edited = Msg(self._mid(), "user", f"{self.conv[at].text} (edited {self.n})")
        reply = self._reply(kind)
        self.log.append(f"edit[{'in_place' if in_place else 'cut'}] at {at} -> {kind}")
        if in_place:
            user = self._user()
            history = [*self.conv[self.trim : at], edited, *self.conv[at + 1 :]]
            self._request(history, [user], reply)
            self.conv = [*self.conv[:at], edited, *self.conv[at + 1 :], user, reply]
        else:
            self._request(self.conv[self.trim : at], [edited], reply)
            self.conv = [*self.conv[:at], edited, reply]

    @precondition(lambda self: self.style == "whole" and not self.open_call())
    @rule(data=st.data(), kind=st.sampled_from(["text", "tool1"]))
    def delete_exchange(self, data: st.DataObject, kind: str) -> None:
        users = [i for i, m in enumerate(self.conv) if m.role == "user" and i >= self.trim]
        if not users:
            return
        at = data.draw(st.sampled_from(users), label="delete at")
        end = next((i for i in range(at + 1, len(self.conv)) if self.conv[i].role == "user"), None)
        end = len(self.conv) if end is None else end
        user, reply = self._user(), self._reply(kind)
        self.log.append(f"delete_exchange [{at}:{end}] -> {kind}")
        kept = [*self.conv[:at], *self.conv[end:]]
        self._request(kept[self.trim :], [user], reply)
        self.conv = [*kept, user, reply]

    @precondition(lambda self: self.style == "whole")
    @rule(data=st.data())
    def delete_quietly(self, data: st.DataObject) -> None:
        """A chat UI deletes an exchange and sends nothing: the next request shows it."""
        users = [i for i, m in enumerate(self.conv) if m.role == "user" and i >= self.trim]
        if not users:
            return
        at = data.draw(st.sampled_from(users), label="delete quietly at")
        end = next((i for i in range(at + 1, len(self.conv)) if self.conv[i].role == "user"), None)
        self.conv = [*self.conv[:at], *self.conv[len(self.conv) if end is None else end :]]
        self.log.append(f"delete_quietly at {at}")

    @precondition(lambda self: self.style == "whole")
    @rule(data=st.data())
    def trim_history(self, data: st.DataObject) -> None:
        users = [i for i, m in enumerate(self.conv) if m.role == "user" and i > self.trim]
        if not users:
            return
        self.trim = data.draw(st.sampled_from(users), label="trim to")
        self.log.append(f"trim to {self.trim}")

    @rule(to=st.sampled_from(["new", "whole"]))
    def switch_style(self, to: str) -> None:
        if to == self.style:
            return
        if to == "whole":  # the client now holds the stored conversation and sends it all
            self.conv, self.trim = [e.msg for e in self.stored], 0
        self.style = to
        self.log.append(f"switch to {self.style}")

    @invariant()
    def times_of_stored_turns(self) -> None:
        assert all(e.ts <= self.clock.ms for e in self.stored)


TurnsMachine.TestCase.settings = settings(
    max_examples=int(os.environ.get("MEMORY_STATEFUL_EXAMPLES", "25")),
    stateful_step_count=int(os.environ.get("MEMORY_STATEFUL_STEPS", "25")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    phases=[p for p in Phase if p is not Phase.explain],
)
TestTurns = TurnsMachine.TestCase
