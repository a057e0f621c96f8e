"""Anthropic Messages (``/v1/messages``, LiteLLM call type ``anthropic_messages``): Claude Code,
the ``anthropic`` SDK.

Request (Anthropic's shape)::

    {"model", "max_tokens", "system": str | [{"type": "text", "text", "cache_control"?}],
     "messages": [{"role": "user" | "assistant", "content": str | [block, ...]}],
     "metadata": {"user_id"}, "tools", "thinking", ...}

with blocks ``text``, ``image``, ``document``, ``tool_use`` {id, name, input}, ``tool_result``
{tool_use_id, content: str | [block], is_error?}, ``thinking`` {thinking, signature} and
``redacted_thinking`` {data}.

The view (:func:`to_chat`): each Anthropic message as chat messages: a user message's
``tool_result`` blocks as ``tool`` messages, then its other blocks as one user message of parts
(``text``, ``image`` as ``image_url``, ``document`` as sent, any other block as a ``[type]``
text); an assistant message as one message with ``content`` (its text), ``tool_calls`` (its
``tool_use`` blocks) and ``thinking_blocks`` (its thinking blocks, whole). The client's
``system`` is not in the view: it reaches the model as sent, and the engine's head (rules and
memory) goes after it. The view's ``user`` is ``metadata.user_id``; its ``metadata`` is
LiteLLM's ``litellm_metadata`` (Anthropic's own ``metadata`` takes only ``user_id``).

Writing back (:func:`to_anthropic`): the client's messages are re-emitted as sent (the same
objects), in order; stored turns from Redis become Anthropic messages; the tail goes into the
client's last user message as one text block, after its ``tool_result`` blocks and before its
other blocks; ``system`` is the client's (a string or its blocks, as sent) followed by the head
(a string stays a string unless the head carries a cache mark; blocks get one more text block).
Cache marks the engine put on the client's messages are left out (the client's message goes as
sent) and the engine's own are dropped past Anthropic's limit of 4 in the whole request.
"""

from __future__ import annotations

import json
import logging
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from litellm_memory_hook.core.cache_marks import MAX_MARKS
from litellm_memory_hook.protocols.anthropic_replies import (
    StreamAccumulator,
    assistant_chat,
    reply_message,
)
from litellm_memory_hook.protocols.anthropic_rules import (
    content_blocks,
    rule_problem,
    valid_request,
)
from litellm_memory_hook.protocols.base import HistoryMode

logger = logging.getLogger("litellm_memory_hook")

Block = dict[str, Any]
Message = dict[str, Any]

#: the header Claude Code (v2.1.86 on) names its session in, on every request
SESSION_HEADER = "x-claude-code-session-id"
#: sessions whose user id this process remembers (:func:`session_user`)
SESSIONS_KEPT = 10_000
_session_users: OrderedDict[str, str] = OrderedDict()

#: the view key that holds what :func:`to_anthropic` needs of the client's request
ORIGIN_KEY = "_anthropic_origin"
_THINKING = frozenset({"thinking", "redacted_thinking"})
_PLACEHOLDERS = {"file": "[file]", "input_audio": "[audio]", "audio": "[audio]"}


# -- Anthropic -> chat ---------------------------------------------------------------------------


def _image_part(block: Block) -> Block:
    """An image block as a chat ``image_url`` part (base64 data as a data: URL)."""
    source = block.get("source") or {}
    if source.get("type") == "base64":
        url = f"data:{source.get('media_type', 'image/png')};base64,{source.get('data', '')}"
    else:
        url = str(source.get("url") or source.get("file_id") or "")
    return {"type": "image_url", "image_url": {"url": url}}


def _chat_part(block: Block) -> Block:
    kind = block["type"]
    if kind == "text":
        return {"type": "text", "text": block["text"]}
    if kind == "image":
        return _image_part(block)
    if kind == "document":
        return {"type": "document", "source": block["source"]}
    return {"type": "text", "text": f"[{kind[:24]}]"}


def _tool_content(content: object) -> Any:
    if isinstance(content, list):
        return [_chat_part(b) for b in content if isinstance(b, dict)]
    return content if isinstance(content, str) else ""


def _message_chat(message: Message) -> list[Message]:
    """The chat messages of one Anthropic message (module docstring)."""
    if message["role"] == "assistant":
        return [assistant_chat(content_blocks(message))]
    out: list[Message] = []
    parts: list[Block] = []
    for block in content_blocks(message):
        if block["type"] == "tool_result":
            result = {"role": "tool", "tool_call_id": block["tool_use_id"]}
            out.append({**result, "content": _tool_content(block.get("content"))})
        else:
            parts.append(_chat_part(block))
    if parts:
        out.append({"role": "user", "content": parts})
    return out


@dataclass
class Origin:
    """The client's request as :func:`to_anthropic` needs it.

    Attributes:
        messages: the client's Anthropic messages, as sent.
        chat: the view's messages, and ``index`` the client message each comes from.
    """

    messages: list[Message]
    chat: list[Message] = field(default_factory=list)
    index: list[int] = field(default_factory=list)


def to_chat(messages: Sequence[Message]) -> Origin:
    """The chat view of a valid request's messages, with where each came from."""
    origin = Origin(list(messages))
    for index, message in enumerate(messages):
        for chat in _message_chat(message):
            origin.chat.append(chat)
            origin.index.append(index)
    return origin


def _parts(content: object) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content) if isinstance(content, list) else []


def _added(rebuilt: Message, sent: Message) -> list[Any] | None:
    """The parts the engine put before a copy of the view message ``sent`` (the tail: ``[]``
    for none), ``None`` when ``rebuilt`` is no copy of it. A copy has the same fields, and its
    parts end with the view's, a cache mark added to one of them or not."""
    if rebuilt is sent:
        return []
    if rebuilt.keys() != sent.keys() or any(
        rebuilt[k] != sent[k] for k in rebuilt if k != "content"
    ):
        return None
    got, own = _parts(rebuilt.get("content")), _parts(sent.get("content"))
    unmarked = [
        {k: v for k, v in p.items() if k != "cache_control"} if isinstance(p, dict) else p
        for p in got
    ]
    if len(got) < len(own) or unmarked[len(got) - len(own) :] != own:
        return None
    added = got[: len(got) - len(own)]
    return added if not added or rebuilt.get("role") == "user" else None


def client_positions(window: Sequence[Message], origin: Origin) -> dict[int, tuple[int, list[Any]]]:
    """Which messages of the rebuilt window are the client's: position in ``window`` -> (its
    view message's position, the parts the engine put before it). The client's messages are
    a suffix of the window (after stored turns; in the engine's own words a whole history is
    ``verbatim`` and trimmed from its start), followed at most by the tail as a user message
    of its own; system messages among them are the engine's. Each is the view's message, or
    a copy of it with a cache mark or the tail added (:func:`_added`)."""
    found: dict[int, tuple[int, list[Any]]] = {}
    at, own = len(window) - 1, len(origin.chat) - 1
    while at >= 0 and own >= 0:
        message = window[at]
        added = _added(message, origin.chat[own])
        if added is not None:
            found[at] = (own, added)
            own -= 1
        elif message.get("role") not in ("system", "developer") and (
            found or at != len(window) - 1 or message.get("role") != "user"
        ):
            break  # a stored turn (a trailing user message of ours is the tail)
        at -= 1
    return found


# -- chat -> Anthropic ---------------------------------------------------------------------------


def _text_of(content: object) -> list[Block]:
    """Text blocks of a chat content (marks kept), empty texts left out."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    blocks: list[Block] = []
    for part in content if isinstance(content, list) else ():
        if isinstance(part, dict) and isinstance(part.get("text"), str) and part["text"]:
            block: Block = {"type": "text", "text": part["text"]}
            if "cache_control" in part:
                block["cache_control"] = part["cache_control"]
            blocks.append(block)
    return blocks


def _anthropic_part(part: object) -> Block | None:
    """A chat content part as an Anthropic block (``None``: nothing to send)."""
    if isinstance(part, str):
        return {"type": "text", "text": part} if part else None
    if not isinstance(part, dict):
        return None
    kind = part.get("type")
    if kind == "image_url":
        image = part.get("image_url")
        url = image.get("url") if isinstance(image, dict) else image
        if not isinstance(url, str) or not url:
            return None
        if url.startswith("data:") and ";base64," in url:
            media, data = url[5:].split(";base64,", 1)
            return {
                "type": "image",
                "source": {"type": "base64", "media_type": media, "data": data},
            }
        return {"type": "image", "source": {"type": "url", "url": url}}
    if kind == "document" and isinstance(part.get("source"), dict):
        return {"type": "document", "source": part["source"]}
    if isinstance(part.get("text"), str):
        return _text_of([part])[0] if part["text"] else None
    text = _PLACEHOLDERS.get(str(kind), f"[{str(kind)[:24]}]")
    return {"type": "text", "text": text}


def _user_blocks(content: object) -> list[Block]:
    if isinstance(content, str):
        return _text_of(content)
    found = (_anthropic_part(p) for p in content) if isinstance(content, list) else ()
    return [b for b in found if b is not None]


def _assistant_blocks(message: Message) -> list[Block]:
    """An assistant chat message's blocks: thinking (whole), text, then tool uses."""
    blocks = [
        b
        for b in message.get("thinking_blocks") or ()
        if isinstance(b, dict) and b.get("type") in _THINKING
    ]
    blocks += _text_of(message.get("content"))
    for call in message.get("tool_calls") or ():
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not call.get("id"):
            continue
        try:
            arguments = json.loads(function.get("arguments") or "{}")
        except (TypeError, ValueError):
            arguments = {}
        blocks.append(
            {
                "type": "tool_use",
                "id": str(call["id"]),
                "name": str(function.get("name") or ""),
                "input": arguments if isinstance(arguments, dict) else {},
            }
        )
    return blocks


def _result_block(message: Message) -> Block:
    block: Block = {"type": "tool_result", "tool_use_id": str(message.get("tool_call_id") or "")}
    content = message.get("content")
    if isinstance(content, list):
        parts = _user_blocks(content)
        if parts:
            block["content"] = parts
    elif isinstance(content, str) and content:
        block["content"] = content
    return block


@dataclass
class _Segment:
    """One Anthropic message being built: the client's ``index`` (its blocks as sent, ours
    inserted at ``at``) or ours (``index`` None)."""

    role: str
    blocks: list[Block]
    index: int | None = None
    data: list[Block] = field(default_factory=list)
    data_only: bool = False


def _ours(message: Message) -> tuple[str, list[Block]] | None:
    """An engine message (a stored turn, the tail) as ``(role, blocks)``."""
    role = message.get("role")
    if role == "assistant":
        return "assistant", _assistant_blocks(message)
    if role == "tool":
        return "user", [_result_block(message)]
    if role == "user":
        return "user", _user_blocks(message.get("content"))
    return None


def _segments(rebuilt: Sequence[Message], origin: Origin) -> list[_Segment] | None:
    """The rebuilt window as Anthropic messages; ``None`` when the client's messages are not in
    their order."""
    segments: list[_Segment] = []
    last = -1
    clients = client_positions(rebuilt, origin)
    for at, message in enumerate(rebuilt):
        if at in clients:
            position, added = clients[at]
            index = origin.index[position]
            if index < last:
                return None
            if index > last:
                segments.append(_Segment(origin.messages[index]["role"], [], index))
                last = index
            segments[-1].data += _user_blocks(added)
        elif message.get("role") in ("system", "developer"):
            segments.append(_Segment("user", _text_of(message.get("content")), data_only=True))
        else:
            converted = _ours(message)
            if converted is not None and converted[1]:
                role, blocks = converted
                segments.append(_Segment(role, blocks, data_only=message.get("role") == "user"))
    return segments


def _result_end(blocks: Sequence[Block]) -> int:
    end = 0
    while end < len(blocks) and blocks[end].get("type") == "tool_result":
        end += 1
    return end


def _merged(segments: list[_Segment]) -> list[_Segment]:
    """Adjacent segments of one role joined where one of them is ours: ours into ours (results
    first); a user's data (the tail, a system message of the window) into the client's user
    message next to it, after its results. Ours before the first user message without results
    go (Anthropic's first message is a user's: a stored reply cut from its question)."""
    out: list[_Segment] = []
    for segment in segments:
        previous = out[-1] if out else None
        if previous is None or previous.role != segment.role:
            out.append(segment)
        elif previous.index is None and segment.index is None:
            blocks = previous.blocks + segment.blocks
            results = [b for b in blocks if b.get("type") == "tool_result"]
            previous.blocks = results + [b for b in blocks if b.get("type") != "tool_result"]
            previous.data_only = previous.data_only and segment.data_only
        elif previous.index is not None and segment.data_only and segment.role == "user":
            previous.data += segment.blocks
        elif segment.index is not None and previous.data_only and segment.role == "user":
            segment.data = previous.blocks + segment.data
            out[-1] = segment
        else:
            out.append(segment)
    while (
        out
        and out[0].index is None
        and (out[0].role != "user" or any(b.get("type") == "tool_result" for b in out[0].blocks))
    ):
        out.pop(0)
    return out


def _emit(segment: _Segment, origin: Origin) -> tuple[Message, list[Block]]:
    """The segment's message and the blocks of ours in it."""
    if segment.index is None:
        return {"role": segment.role, "content": segment.blocks}, segment.blocks
    sent = origin.messages[segment.index]
    if not segment.data or sent["role"] != "user":
        return sent, []
    blocks = list(sent["content"]) if isinstance(sent["content"], list) else content_blocks(sent)
    at = _result_end(blocks)
    return {**sent, "content": [*blocks[:at], *segment.data, *blocks[at:]]}, segment.data


# -- system and cache marks ----------------------------------------------------------------------


def _head_blocks(lead: Sequence[Message]) -> list[Block]:
    """The engine's head (rules and memory) as text blocks, its cache mark kept."""
    blocks: list[Block] = []
    for message in lead:
        blocks += _text_of(message.get("content"))
    return blocks


def _system(sent: object, head: list[Block]) -> object:
    """The client's ``system`` as sent, then the head: one string for a string (or none) and an
    unmarked head, else blocks with one more text block."""
    if not head:
        return sent
    text = "\n\n".join(b["text"] for b in head)
    mark = next((b["cache_control"] for b in head if "cache_control" in b), None)
    if mark is None and (sent is None or isinstance(sent, str)):
        return f"{sent}\n\n{text}" if sent else text
    block: Block = {"type": "text", "text": text}
    if mark is not None:
        block["cache_control"] = mark
    if isinstance(sent, list):
        return [*sent, block]
    return [{"type": "text", "text": sent}, block] if sent else [block]


def _marked(blocks: Iterable[object]) -> Iterable[Block]:
    for block in blocks:
        if isinstance(block, dict):
            if "cache_control" in block:
                yield block
            nested = block.get("content")
            if isinstance(nested, list):
                yield from _marked(nested)


def count_marks(data: Mapping[str, Any]) -> int:
    """The ``cache_control`` marks of a whole Messages request (tools, system, messages)."""
    found = sum(1 for t in data.get("tools") or () if isinstance(t, dict) and "cache_control" in t)
    system = data.get("system")
    found += len(list(_marked(system if isinstance(system, list) else ())))
    for message in data.get("messages") or ():
        if isinstance(message, dict) and isinstance(message.get("content"), list):
            found += len(list(_marked(message["content"])))
    return found


def _drop_marks(data: dict[str, Any], ours: list[Block]) -> None:
    """Take our marks off, the last first, until the request has at most 4."""
    excess = count_marks(data) - MAX_MARKS
    for block in reversed(ours):
        if excess <= 0:
            break
        if "cache_control" in block:
            del block["cache_control"]
            excess -= 1


# -- the whole request ---------------------------------------------------------------------------


def to_anthropic(data: dict[str, Any], rebuilt: Sequence[Message], origin: Origin) -> bool:
    """Write the rebuilt chat messages back into ``data``'s ``system`` and ``messages``
    (module docstring). Returns False when the result would break one of Anthropic's rules
    (:func:`rule_problem`): the client's messages then go as sent, with the head in
    ``system``."""
    lead_end = 0
    while lead_end < len(rebuilt) and rebuilt[lead_end].get("role") in ("system", "developer"):
        lead_end += 1
    head = _head_blocks(rebuilt[:lead_end])
    segments = _segments(rebuilt[lead_end:], origin)
    emitted = [_emit(s, origin) for s in _merged(segments)] if segments is not None else []
    messages = [m for m, _ in emitted]
    written = segments is not None and rule_problem(messages) is None
    ours = [b for _, blocks in emitted for b in blocks] if written else []
    if not written:
        logger.debug("memory hook: an Anthropic request keeps its own messages (rules)")
    elif len(messages) != len(origin.messages) or any(
        a is not b for a, b in zip(messages, origin.messages, strict=False)
    ):
        data["messages"] = messages
    if head:
        data["system"] = _system(data.get("system"), head)
        system = data["system"]
        if isinstance(system, list) and "cache_control" in system[-1]:
            ours.insert(0, system[-1])
    _drop_marks(data, ours)
    return written


# -- sessions ------------------------------------------------------------------------------------


def note_session(headers: object, user_id: object) -> None:
    """Remember the ``metadata.user_id`` a Claude Code session sent (its
    ``x-claude-code-session-id`` header), the newest :data:`SESSIONS_KEPT` in this process:
    its ``count_tokens`` requests carry no metadata."""
    session = headers.get(SESSION_HEADER) if isinstance(headers, dict) else None
    if isinstance(session, str) and session and isinstance(user_id, str) and user_id:
        _session_users[session] = user_id
        _session_users.move_to_end(session)
        while len(_session_users) > SESSIONS_KEPT:
            _session_users.popitem(last=False)


def session_user(headers: Mapping[str, str]) -> str | None:
    """The ``metadata.user_id`` this process last saw with the request's session header."""
    session = headers.get(SESSION_HEADER)
    return _session_users.get(session) if session else None


# -- the adapter ---------------------------------------------------------------------------------


def _uses_tools(data: Mapping[str, Any]) -> bool:
    if data.get("tools"):
        return True
    return any(
        isinstance(b, dict) and b.get("type") in ("tool_use", "tool_result")
        for m in data.get("messages") or ()
        if isinstance(m, dict)
        for b in content_blocks(m)
    )


class AnthropicMessages:
    """The Anthropic Messages adapter (module docstring)."""

    name = "anthropic"
    metadata_field = "litellm_metadata"
    #: one system prompt, at the top: the cache layout's tail goes in the user's message
    #: (after the tool results that end an agent's request), never in a system message
    system_on_top = True

    def view(self, data: dict[str, Any]) -> dict[str, Any] | None:
        """The chat view (module docstring); ``None`` for a request the hook does not read
        (:func:`valid_request`: it reaches the proxy as sent). Creates ``litellm_metadata``
        in ``data`` when missing: the view's ``metadata`` is that object. Notes the user id
        of a Claude Code session (:func:`note_session`)."""
        if not valid_request(data):
            return None
        metadata = data.get("litellm_metadata")
        if not isinstance(metadata, dict):
            metadata = {}
            data["litellm_metadata"] = metadata
        sent = data.get("metadata")
        user = sent.get("user_id") if isinstance(sent, dict) else None
        note_session(metadata.get("headers"), user)
        origin = to_chat(data["messages"])
        return {
            "model": data.get("model"),
            "messages": list(origin.chat),
            "user": user,
            "metadata": metadata,
            "litellm_call_id": data.get("litellm_call_id"),
            "tools": data.get("tools"),
            "max_tokens": data.get("max_tokens"),  # the reply's share of the model's window
            ORIGIN_KEY: origin,
        }

    def apply(self, data: dict[str, Any], view: dict[str, Any]) -> None:
        origin = view.get(ORIGIN_KEY)
        rebuilt = view.get("messages")
        if isinstance(origin, Origin) and isinstance(rebuilt, list):
            to_anthropic(data, rebuilt, origin)

    def history_mode(self, view: dict[str, Any]) -> HistoryMode:
        """``keep`` for an agent (tools declared or used), ``window`` for a chat app."""
        origin = view.get(ORIGIN_KEY)
        messages = origin.messages if isinstance(origin, Origin) else []
        return (
            "keep" if _uses_tools({"tools": view.get("tools"), "messages": messages}) else "window"
        )

    def reply_message(self, response: Any) -> dict[str, Any] | None:
        return reply_message(response)

    def accumulator(self) -> StreamAccumulator:
        return StreamAccumulator()


#: the adapter (stateless: one for every request).
ANTHROPIC = AnthropicMessages()
