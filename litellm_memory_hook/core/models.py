"""Data shapes shared by the store, the window and the hook."""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from litellm_memory_hook.core.memo import short_text_memo

_new_instance = object.__new__
_SCALARS = (str, int, float, bool, type(None))


def copy_json(value: Any) -> Any:
    """A deep copy of JSON data (dicts, lists, strings, numbers, booleans, ``None``): what
    :func:`copy.deepcopy` gives for it, ~4x faster; any other object is deep-copied."""
    kind = type(value)
    if kind is dict:
        return {k: copy_json(v) for k, v in value.items()}
    if kind is list:
        return [copy_json(v) for v in value]
    if kind in _SCALARS:
        return value
    return copy.deepcopy(value)


@dataclass(frozen=True)
class Turn:
    """One stored message of a conversation.

    Attributes:
        role: ``user``, ``assistant`` or ``tool``.
        text: the message text (parts joined; images and audio as placeholders such as
            ``[image]``); ``""`` only for an assistant message that carries ``tool_calls``.
        ts_ms: when it was written, epoch milliseconds.
        seq: position in the conversation, 1-based, given by the store (0 before storing).
        call_id: the ``litellm_call_id`` of the request that stored it ("" for imports).
        name: optional speaker name (OpenAI ``name``).
        tool_calls: the assistant's OpenAI ``tool_calls`` list, as sent by the model.
        tool_call_id: for ``tool`` messages, the call they answer.
        partial: a reply cut short (the client disconnected); kept for inspection, never replayed.
        joined: an imported line written into a conversation that already held turns chat
            requests stored (:func:`~litellm_memory_hook.tools.importer.import_lines`): the
            chatting client never sent it, so planning passes over it (it is never aligned with
            the client's history, never replaced, never shown in the recent window) and only
            recall brings it back (:func:`~litellm_memory_hook.core.plan.chat_turns`).
        ctx: the recall context keys (``^`` terms) it was indexed under, taken from the turn
            before it at write time; kept so that deleting it removes exactly those entries.
        fp: for a message sent as a list of parts, a fingerprint of all its parts (images
            included), so two different photos with the same text are told apart.
        msg: the message as the client (or the model) sent it, every field kept (``content``
            as sent, ``name``, ``reasoning_content``, thinking parts, ``cache_control``,
            ``refusal``, ``audio`` ids, unknown keys), made storable by
            :func:`litellm_memory_hook.core.messages.storable_message` (base64 media replaced by
            placeholders, every string bounded); replayed as is. Empty for turns stored before
            it existed and for imported lines.
    """

    role: str
    text: str
    ts_ms: int
    seq: int = 0
    call_id: str = ""
    name: str = ""
    tool_calls: tuple[dict[str, Any], ...] = field(default=())
    tool_call_id: str = ""
    partial: bool = False
    joined: bool = False
    ctx: tuple[str, ...] = field(default=())
    fp: str = ""
    msg: dict[str, Any] | None = field(default=None, compare=False)

    def full_body(self) -> dict[str, Any]:
        """The JSON object of this turn without ``seq``, in the full form (the field names of
        the dataclass; how every version before the compact member stored it, and how an
        export shows it): ``text`` is left out when it is ``msg``'s string ``content``."""
        body: dict[str, Any] = {"role": self.role}
        if not text_in_msg(self.text, self.msg):
            body["text"] = self.text
        body["ts"] = self.ts_ms
        if self.call_id:
            body["call_id"] = self.call_id
        if self.name:
            body["name"] = self.name
        if self.tool_calls:
            body["tool_calls"] = list(self.tool_calls)
        if self.tool_call_id:
            body["tool_call_id"] = self.tool_call_id
        if self.partial:
            body["partial"] = True
        if self.joined:
            body["joined"] = True
        if self.ctx:
            body["ctx"] = list(self.ctx)
        if self.fp:
            body["fp"] = self.fp
        if self.msg:
            body["msg"] = self.msg
        return body

    def body_json(self) -> str:
        """The JSON object of this turn as stored (:func:`compact_body` of :meth:`full_body`),
        without ``seq`` and without its opening brace.

        The store's append script writes ``{"seq":<n>,`` in front of it, so the sequence number
        is assigned atomically inside Redis. ``text`` is left out when it is ``msg``'s string
        ``content`` (most turns): the text is then stored once (:func:`stored_text`).
        """
        return json.dumps(self._compact_body(), ensure_ascii=False, separators=(",", ":"))[1:]

    def _compact_body(self) -> dict[str, Any]:
        """:func:`compact_body` of :meth:`full_body`, made directly (a request stores two turns
        or more; tests/integration/test_member_form.py holds the two equal)."""
        msg = self.msg
        by_msg = msg.__class__ is dict and _leads_with(msg, self.role)
        body: dict[str, Any] = {"role": self.role}
        if not text_in_msg(self.text, msg):
            body["text"] = self.text
        body["ts"] = self.ts_ms
        if self.call_id:
            body["c"] = self.call_id
        if not by_msg:
            body.update(self._msg_fields({}))
        if self.partial:
            body["partial"] = True
        if self.joined:
            body["joined"] = True
        if self.ctx:
            ctx = list(self.ctx)
            words = _context_words(ctx)
            if words is None:
                body["ctx"] = ctx
            else:
                body["cx"] = words
        if self.fp:
            body["fp"] = self.fp
        if by_msg:
            assert msg is not None
            body.update(self._msg_fields(msg))
            m = dict(msg)
            del m["role"]
            body["m"] = m
        elif msg:
            body["msg"] = msg
        return body

    def _msg_fields(self, msg: dict[str, Any]) -> dict[str, Any]:
        """The turn's ``name``, ``tool_calls`` and ``tool_call_id`` that are not ``msg``'s own
        (as :func:`_msg_defaults` says, inline); with ``{}``, those that are set."""
        out: dict[str, Any] = {}
        name = msg.get("name")
        if self.name != (name if name.__class__ is str else ""):
            out["name"] = self.name
        if self.tool_calls or "tool_calls" in msg:
            calls = msg.get("tool_calls")
            if list(self.tool_calls) != (calls if calls.__class__ is list else []):
                out["tool_calls"] = list(self.tool_calls)
        if self.tool_call_id or "tool_call_id" in msg:
            call_id = msg.get("tool_call_id")
            if self.tool_call_id != (call_id if call_id.__class__ is str else ""):
                out["tool_call_id"] = self.tool_call_id
        return out

    @classmethod
    def from_member(cls, member: str | bytes) -> Turn:
        """Parse a member of the ``turns`` sorted set (memoised, see :func:`_parse_member`).

        Raises:
            ValueError: not a JSON turn.
        """
        return _parse_member(member) if cls is Turn else cls._parse(member)

    @classmethod
    def _parse(cls, member: str | bytes) -> Turn:
        try:
            data = orjson.loads(member)
        except orjson.JSONDecodeError as exc:
            raise ValueError(f"not a stored turn: {exc}") from exc
        if not isinstance(data, dict) or "role" not in data:
            raise ValueError("not a stored turn")
        return cls._of_data(data)

    @classmethod
    def _of_data(cls, data: dict[str, Any]) -> Turn:
        """The turn of a stored member's JSON object (either form: :func:`compact_body`)."""
        get = data.get
        role = data["role"]
        msg = get("msg")
        # the turn's fields a compact member leaves to its message (``m``: the message without
        # its role, which is the turn's; compact_body)
        name, tool_calls, tool_call_id = get("name"), get("tool_calls"), get("tool_call_id")
        m = get("m")
        if m.__class__ is dict and msg is None:
            msg = {"role": role, **m}
            # as _msg_defaults says, inline (every request parses ~60 members)
            if "name" not in data and (name := m.get("name")).__class__ is not str:
                name = ""
            if "tool_calls" not in data and "tool_calls" in m:
                tool_calls = m["tool_calls"]
                tool_calls = copy_json(tool_calls) if tool_calls.__class__ is list else ()
            if "tool_call_id" not in data and "tool_call_id" in m:
                tool_call_id = m["tool_call_id"]
                if tool_call_id.__class__ is not str:
                    tool_call_id = ""
        ctx = get("ctx")
        if ctx:
            ctx = tuple(map(str, ctx))
        elif (words := get("cx")).__class__ is str and words:
            ctx = tuple([CONTEXT_MARK + word for word in words.split(" ")])
        else:
            ctx = ()
        # Every request parses ~60 of these (the tail and the recalled lines): the fields are
        # set straight into the new instance's __dict__, which is what the frozen dataclass's
        # __init__ does one object.__setattr__ at a time (about 40% of the parse).
        turn = _new_instance(cls)
        turn.__dict__.update(
            role=str(role),
            text=stored_text(data),
            ts_ms=int(get("ts") or 0),
            seq=int(get("seq") or 0),
            call_id=str(get("call_id") or get("c") or ""),
            name=str(name or ""),
            tool_calls=tuple(tool_calls or ()),
            tool_call_id=str(tool_call_id or ""),
            partial=bool(get("partial", False)),
            joined=bool(get("joined", False)),
            ctx=ctx,
            fp=str(get("fp") or ""),
            msg=msg if isinstance(msg, dict) else None,
        )
        return turn

    def to_message(self) -> dict[str, Any]:
        """The OpenAI chat message this turn replays as: the stored message with every field
        the client or the model sent (:attr:`msg`), else one rebuilt from the stored text
        (never with empty text content). A reply whose words were not in its content (an
        audio reply's transcript, a refusal) replays them as its content, without
        the ``audio`` id (it expires within hours; a text turn is valid for every provider)
        or the ``refusal`` field."""
        if self.msg and self.msg.get("role") == self.role:
            copied: dict[str, Any] = copy_json(self.msg)
            if (
                self.role == "assistant"
                and self.text
                and not copied.get("content")
                and not copied.get("tool_calls")
                and ("audio" in copied or "refusal" in copied)
            ):
                copied.pop("audio", None)
                copied.pop("refusal", None)
                copied["content"] = self.text
            return copied
        message: dict[str, Any] = {"role": self.role}
        if self.role == "assistant" and self.tool_calls:
            message["content"] = self.text or None
            message["tool_calls"] = [dict(c) for c in self.tool_calls]
        else:
            message["content"] = self.text
        if self.role == "tool":
            message["tool_call_id"] = self.tool_call_id
        if self.name and self.role in ("user", "assistant"):
            message["name"] = self.name
        return message


def text_in_msg(text: object, msg: object) -> bool:
    """True when a turn's ``text`` is its ``msg``'s string ``content``: the stored turn then
    leaves ``text`` out (:meth:`Turn.body_json`) and :func:`stored_text` reads it back."""
    return isinstance(msg, dict) and isinstance(text, str) and msg.get("content") == text


def stored_text(data: dict[str, Any]) -> str:
    """The text of a stored turn's JSON object: its ``text``, else its message's (``msg``, or
    ``m`` in a compact member) string ``content`` (:meth:`Turn.body_json` stores a text once),
    else ``""``."""
    text = data.get("text")
    if text is None:
        msg = data.get("msg", data.get("m"))
        text = msg.get("content") if isinstance(msg, dict) else None
        if not isinstance(text, str):
            return ""
    return str(text)


#: the mark of a recall context term (:data:`litellm_memory_hook.core.recall.CONTEXT_PREFIX`;
#: tests/integration/test_member_form.py holds the two equal), left out of a compact member's
#: ``cx``.
CONTEXT_MARK = "^"
#: the fields of a turn a compact member takes from its message when it does not name them.
_FROM_MSG = ("name", "tool_calls", "tool_call_id")
#: the keys of a stored turn this version knows, in either form (any other key is kept as is).
MEMBER_KEYS = frozenset(
    {"seq", "role", "text", "ts", "call_id", "c", "name", "tool_calls", "tool_call_id"}
    | {"partial", "joined", "ctx", "cx", "fp", "msg", "m"}
)


def _msg_defaults(msg: dict[str, Any]) -> dict[str, Any]:
    """What a compact member's ``name``, ``tool_calls`` and ``tool_call_id`` are when it does
    not name them: its message's, when of the field's type, else empty."""
    name, calls, call_id = msg.get("name"), msg.get("tool_calls"), msg.get("tool_call_id")
    return {
        "name": name if isinstance(name, str) else "",
        "tool_calls": calls if isinstance(calls, list) else [],
        "tool_call_id": call_id if isinstance(call_id, str) else "",
    }


def _leads_with(msg: dict[str, Any], role: object) -> bool:
    """True when the message's first key is ``role`` and says ``role``: a compact member keeps
    it without (``m``)."""
    return next(iter(msg), None) == "role" and msg["role"] == role


def _context_words(ctx: object) -> str | None:
    """``ctx`` as a compact member's ``cx``: the terms without their mark, joined by spaces;
    ``None`` when that would not give them back (a term without the mark, empty after it, or
    holding a space)."""
    if ctx.__class__ is not list or not ctx:
        return None
    try:
        joined = " ".join(ctx)
    except TypeError:  # a term that is no text
        return None
    gaps = len(ctx) - 1
    if (
        joined[:1] != CONTEXT_MARK
        or joined.count(" ") != gaps
        or joined.count(" " + CONTEXT_MARK) != gaps
        or CONTEXT_MARK + " " in joined
        or joined.endswith(CONTEXT_MARK)
    ):
        return None
    return joined[1:].replace(" " + CONTEXT_MARK, " ")


def compact_body(body: dict[str, Any]) -> dict[str, Any]:
    """A turn's JSON object (without ``seq``) in the full form as stored: the compact member
    (issue 30: fewer bytes a turn in Redis). Any key it does not know is kept as it is.

    - ``call_id`` is ``c``;
    - ``ctx`` (recall context terms, each ``^<word>``) is ``cx``, the words joined by spaces;
    - ``msg``, when its first key is ``role`` and says the turn's role, is ``m``, the message
      without it; the turn's ``name``, ``tool_calls`` and ``tool_call_id`` are then left out
      when they are the message's, and written (empty too) when they are not.

    :meth:`Turn.from_member` reads both forms; :func:`full_member` gives the full form back.
    The first key stays ``role`` and ``ts`` stays before the message (``store/lua`` reads
    them from the member's text).
    """
    msg = body.get("msg")
    by_msg = isinstance(msg, dict) and _leads_with(msg, body.get("role"))
    defaults = _msg_defaults(msg) if by_msg and isinstance(msg, dict) else {}
    out: dict[str, Any] = {}
    for key, value in body.items():
        if key == "call_id" and isinstance(value, str) and value:
            out["c"] = value
        elif key == "ctx" and (words := _context_words(value)) is not None:
            out["cx"] = words
        elif key in defaults:
            continue  # below
        elif key == "msg" and isinstance(msg, dict) and by_msg:
            for name, default in defaults.items():
                own = body.get(name, type(default)())
                if own != default:
                    out[name] = own
            out["m"] = {k: v for k, v in msg.items() if k != "role"}
        else:
            out[key] = value
    return out


def full_member(data: dict[str, Any]) -> dict[str, Any]:
    """A stored turn's JSON object in the full form (:meth:`Turn.full_body`, its ``seq``
    first): a compact member's keys named as the dataclass names them, its message whole. A
    member stored in the full form is returned as it is. Keys this version does not know come
    after the others."""
    if not any(key in data for key in ("c", "cx", "m")):
        return data
    turn = Turn._of_data(data)
    full: dict[str, Any] = {"seq": data.get("seq"), **turn.full_body()}
    full.update({k: v for k, v in data.items() if k not in MEMBER_KEYS})
    return full


@dataclass
class ConversationState:
    """What one pre-call read of a conversation returns.

    Attributes:
        meta: the meta hash (decoded strings).
        tail: the newest turns, oldest first.
        pinned: pinned memories in field-name order (writers use creation-ordered field names,
            so this is oldest first).
        memories: extracted memories, in field-name order likewise.
        forget_token: the user's and the conversation's forget tokens as read
            (``"<user>/<conversation>"``; ``""`` when not read): a write of this request is
            refused when a forget came since (:mod:`litellm_memory_hook.store.forgets`).
    """

    meta: dict[str, str]
    tail: list[Turn]
    pinned: list[str] = field(default_factory=list)
    memories: list[str] = field(default_factory=list)
    forget_token: str = ""

    @property
    def summary(self) -> str:
        """The rolling summary ("" when none yet)."""
        return self.meta.get("summary", "")

    @property
    def last_seq(self) -> int:
        """The highest seq given out so far (0 for a new conversation)."""
        return int(self.meta.get("seq", "0") or 0)


@dataclass(frozen=True)
class IndexedTurn:
    """A turn with the recall-index terms it is stored under (empty: not indexed)."""

    turn: Turn
    terms: Sequence[str] = ()


@short_text_memo(max_len=4096, maxsize=2048)
def _parse_member(member: str | bytes) -> Turn:
    """:meth:`Turn.from_member`, memoised on the member itself.

    A member is the whole stored turn (its seq included), so the same member always parses to
    the same turn, under any number of proxy processes: a request reads ~40-60 members, most of
    which the conversation's previous request read too. Turns are frozen; their ``msg`` is only
    read (:meth:`Turn.to_message` copies it). At most 2,048 members of at most 4 KB are kept
    (~25 MB with their parsed copies).
    """
    return Turn._parse(member)
