"""The rebuilt chat messages of a Responses request written back as its ``instructions`` and
``input``.

The view's first message stands for the client's ``instructions`` (a part of type
:data:`INSTRUCTIONS`); what the hook put in it is appended to them. Each of the client's
messages is re-emitted as the items it came from (:class:`Source`), exactly, in order; the
hook's system messages become system items, its stored turns items (when the window is sent).
A string ``input`` stays a string when only the hook's tail comes before it (the tail then ends
``instructions``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from litellm_memory_hook.protocols.responses_items import Item, Message, message_items

#: the part type that marks the view's first message as the client's ``instructions`` (the
#: head joins it; an engine never drops a message holding a part that is not text).
INSTRUCTIONS = "responses_instructions"

#: stands for a string ``input`` among the rebuilt items until its place is known.
_OWN_STRING: Final = object()


@dataclass
class Source:
    """The client's request as the view read it.

    Attributes:
        messages: the view's chat messages that are the client's, in order (not the
            instructions message); kept referenced, as the rebuild finds them by identity.
        spans: for each of them, the range ``(start, end)`` of ``input`` items it came from.
        items: the client's ``input`` as a list (a string input as one user message).
        text: the client's ``input`` when it was a string, else ``None``.
        instructions: the text part holding the client's ``instructions`` in the view's first
            message (``None`` without them).
    """

    messages: list[Message]
    spans: list[tuple[int, int]]
    items: list[Any]
    text: str | None
    instructions: dict[str, Any] | None = None


def _text(content: Any) -> str:
    """The text of a rebuilt system message: a string, or its text parts joined by blank lines
    (the cache layout marks a part of it with ``cache_control``)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [p.get("text") for p in content if isinstance(p, dict)]
        return "\n\n".join(t for t in texts if isinstance(t, str) and t)
    return ""


def _part_type(part: Any) -> Any:
    return part.get("type") if isinstance(part, dict) else None


def _unmarked(content: Any) -> Any:
    """Parts without their ``cache_control`` (the cache layout's marks), ``None`` when none
    carried one."""
    if not isinstance(content, list):
        return None
    if not any(isinstance(p, dict) and "cache_control" in p for p in content):
        return None
    return [
        {k: v for k, v in p.items() if k != "cache_control"} if isinstance(p, dict) else p
        for p in content
    ]


def _marked_copy(rebuilt: Message, client: Message) -> bool:
    """Whether a rebuilt message is the client's message with the cache layout's mark."""
    if rebuilt.keys() != client.keys() or rebuilt.get("role") != client.get("role"):
        return False
    plain = _unmarked(rebuilt.get("content"))
    if plain is None or any(rebuilt[k] != client[k] for k in rebuilt if k != "content"):
        return False
    content = client.get("content")
    return bool(plain == content or plain == [{"type": "text", "text": content}])


def _tail_prefix(rebuilt: Message, client: Message) -> str | None:
    """The data the cache layout put before the client's last user message (``tail_placement:
    user``), ``None`` when ``rebuilt`` is not that message with data before it."""
    if rebuilt.get("role") != "user" or client.get("role") != "user":
        return None
    content, own = rebuilt.get("content"), client.get("content")
    if isinstance(own, str) and isinstance(content, str) and own and content.endswith(own):
        head = content[: len(content) - len(own)]
        return head.rstrip() or None
    if isinstance(own, list) and isinstance(content, list) and content[1:] == own and content:
        first = content[0]
        return first.get("text") if isinstance(first, dict) else None
    return None


def _matches(rebuilt: list[Message], client: list[Message]) -> list[tuple[int | None, str]]:
    """For each rebuilt message, the index of the client's message it is (or ``None``: the
    hook added it) and the data put before it (``""`` for none)."""
    where = {id(m): k for k, m in enumerate(client)}
    found: list[tuple[int | None, str]] = [(where.get(id(m)), "") for m in rebuilt]
    used = {k for k, _ in found if k is not None}
    for i, message in enumerate(rebuilt):
        if found[i][0] is not None:
            continue
        for k, own in enumerate(client):
            if k not in used and _marked_copy(message, own):
                found[i] = (k, "")
                used.add(k)
                break
    last = len(client) - 1
    if rebuilt and found[-1][0] is None and last >= 0 and last not in used:
        prefix = _tail_prefix(rebuilt[-1], client[last])
        if prefix is not None:
            found[-1] = (last, prefix)
    return found


def _data_item(text: str, role: str = "system") -> Item:
    return {"type": "message", "role": role, "content": [{"type": "input_text", "text": text}]}


@dataclass
class Rebuilt:
    """The request's rebuilt fields (:func:`rebuilt_request`).

    Attributes:
        added: text appended to the client's ``instructions`` ("" for none).
        input: the new ``input``: the client's string, or a list of items.
    """

    added: str
    input: str | list[Any]


def rebuilt_request(source: Source, rebuilt: list[Message], *, window: bool) -> Rebuilt:
    """The ``instructions`` addition and ``input`` of the rebuilt messages: the first (system)
    message is the head; each client message is re-emitted as its items, exactly; the hook's
    system messages become system items; stored turns become items when ``window`` (else
    they are left out: the provider replays the earlier turns itself).

    Args:
        source: the client's request as read (:class:`Source`).
        rebuilt: the view's rebuilt ``messages``.
        window: send the stored turns the rebuild put in.
    """
    head, body = _head(source, rebuilt)
    out: list[Any] = []
    added: list[Item] = []  # the hook's data items (the tail)
    for (index, prefix), message in zip(_matches(body, source.messages), body, strict=True):
        if index is not None:
            if prefix:
                added.append(_data_item(prefix, "user"))
                out.append(added[-1])
            out.extend(_client_items(source, index))
        elif message.get("role") in ("system", "developer"):
            added.append(_data_item(_text(message.get("content")), str(message["role"])))
            out.append(added[-1])
        elif window:
            out.extend(message_items(message))
    if source.text is None:
        return Rebuilt(head, out)
    return _string_input(source.text, head, out, added)


def _head(source: Source, rebuilt: list[Message]) -> tuple[str, list[Message]]:
    """What the hook put in the view's first message (the rules before the client's
    ``instructions`` and the head after them) and the messages after it; ``""`` and all the
    messages when the first one does not stand for the instructions."""
    first = rebuilt[0].get("content") if rebuilt else None
    if isinstance(first, list) and any(_part_type(p) == INSTRUCTIONS for p in first):
        own = source.instructions
        return _text([p for p in first if p is not own]), rebuilt[1:]
    return "", rebuilt


def _client_items(source: Source, index: int) -> list[Any]:
    """The items the client's message ``index`` came from (:data:`_OWN_STRING` for a string
    ``input``)."""
    if source.text is not None:
        return [_OWN_STRING]
    start, end = source.spans[index]
    return source.items[start:end]


def _string_input(text: str, head: str, out: list[Any], added: list[Item]) -> Rebuilt:
    """The fields for a string ``input``: when only the hook's data items come before it, the
    string stays and those items' text ends ``instructions``; else it becomes a user message
    item among the others."""
    lead = 0
    while lead < len(out) and any(out[lead] is item for item in added):
        lead += 1
    if out[lead:] == [_OWN_STRING]:
        tails = [p["text"] for item in out[:lead] for p in item["content"]]
        return Rebuilt("\n\n".join(t for t in (head, *tails) if t.strip()), text)
    easy = {"role": "user", "content": text}
    return Rebuilt(head, [easy if item is _OWN_STRING else item for item in out])
