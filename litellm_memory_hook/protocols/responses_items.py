"""Responses API items as chat messages, and chat messages as items.

A request's ``input`` items become the chat messages of the view (:func:`view_messages`, with
each message's item range); the messages the hook adds (stored turns, the cache layout's tail)
become items (:func:`message_items`); a response's ``output`` items become one assistant message
(:func:`output_message`). The mapping, item by item, is in
:mod:`litellm_memory_hook.protocols.responses`.
"""

from __future__ import annotations

from typing import Any

from litellm_memory_hook.core.messages import content_text
from litellm_memory_hook.protocols.chat import _plain

Message = dict[str, Any]
Item = dict[str, Any]

_ROLES = frozenset({"user", "assistant", "system", "developer"})
_CALLS = {"function_call": "arguments", "custom_tool_call": "input"}
_OUTPUTS = frozenset({"function_call_output", "custom_tool_call_output"})


# -- request: items -> chat messages --------------------------------------------------------


def _chat_part(part: Any) -> dict[str, Any] | None:
    """A Responses content part as a chat part; ``None`` for a part that is not an object."""
    if not isinstance(part, dict):
        return None
    kind = part.get("type")
    if kind in ("input_text", "output_text", "text"):
        text = part.get("text")
        return {"type": "text", "text": text} if isinstance(text, str) else None
    if kind == "refusal":
        text = part.get("refusal")
        return {"type": "text", "text": text} if isinstance(text, str) else None
    if kind == "input_image":
        url = part.get("image_url")
        if isinstance(url, str):
            return {"type": "image_url", "image_url": {"url": url}}
        return {"type": "file", "file": {"file_id": str(part.get("file_id") or "")}}
    if kind == "input_file":
        keys = ("file_id", "file_data", "filename", "file_url")
        return {"type": "file", "file": {k: part[k] for k in keys if isinstance(part.get(k), str)}}
    if kind == "input_audio" and isinstance(part.get("input_audio"), dict):
        return {"type": "input_audio", "input_audio": part["input_audio"]}
    return {"type": "text", "text": ""}  # a part the engine needs no text of


def _chat_content(content: Any, role: str) -> Any:
    """A message item's ``content`` in chat form (``None`` when it is not readable): a string
    as it is; parts as chat parts (an assistant's as its text)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return None
    parts = [_chat_part(p) for p in content]
    if any(p is None for p in parts):
        return None
    if role == "assistant":
        return content_text(parts)
    return parts


def _call(item: Item, field: str) -> dict[str, Any] | None:
    """A ``function_call`` (``custom_tool_call``) item as a chat tool call."""
    call_id, name, arguments = item.get("call_id"), item.get("name"), item.get(field)
    if not (isinstance(call_id, str) and isinstance(name, str) and isinstance(arguments, str)):
        return None
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def _output(item: Item) -> Message | None:
    """A ``function_call_output`` item as a chat ``tool`` message."""
    call_id, output = item.get("call_id"), item.get("output")
    if not isinstance(call_id, str):
        return None
    if isinstance(output, list):
        parts = [_chat_part(p) for p in output]
        if any(p is None for p in parts):
            return None
        output = content_text(parts)
    if not isinstance(output, str):
        return None
    return {"role": "tool", "tool_call_id": call_id, "content": output}


def item_kind(item: Any) -> str | None:
    """An item's type (``message`` for one that names only a role); ``None`` for a value that
    is no item."""
    if not isinstance(item, dict):
        return None
    kind = item.get("type")
    if kind is None and "role" in item:
        return "message"
    return kind if isinstance(kind, str) else None


def view_messages(items: list[Any]) -> tuple[list[Message], list[tuple[int, int]]] | None:
    """The chat messages of a list of ``input`` items (module docstring) and each one's item
    range; ``None`` when an item is not in a shape the hook reads, or no item is a message."""
    messages: list[Message] = []
    spans: list[list[int]] = []
    riders = 0  # items waiting to ride with the next message
    joinable = False  # the last message is an assistant one that calls may join
    for index, item in enumerate(items):
        kind = item_kind(item)
        if kind is None:
            return None
        if kind == "message":
            role = item.get("role")
            content = _chat_content(item.get("content"), str(role))
            if role not in _ROLES or content is None:
                return None
            messages.append({"role": role, "content": content})
            spans.append([index - riders, index + 1])
            joinable = role == "assistant"
        elif kind in _CALLS:
            call = _call(item, _CALLS[kind])
            if call is None:
                return None
            if joinable:
                messages[-1].setdefault("tool_calls", []).append(call)
                spans[-1][1] = index + 1
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
                spans.append([index - riders, index + 1])
            joinable = True
        elif kind in _OUTPUTS:
            message = _output(item)
            if message is None:
                return None
            messages.append(message)
            spans.append([index - riders, index + 1])
            joinable = False
        else:
            riders += 1
            continue
        riders = 0
    if not messages:
        return None
    spans[-1][1] = len(items)  # riders at the end go with the last message
    return messages, [(a, b) for a, b in spans]


# -- chat messages -> items (stored turns, the tail) ------------------------------------------


def _input_part(part: Any) -> dict[str, Any]:
    """A chat content part as a Responses input part."""
    if isinstance(part, dict):
        kind = part.get("type")
        if kind in ("text", "input_text", "output_text") and isinstance(part.get("text"), str):
            return {"type": "input_text", "text": part["text"]}
        image = part.get("image_url")
        if kind == "image_url" and isinstance(image, dict | str):
            url = image.get("url") if isinstance(image, dict) else image
            if isinstance(url, str):
                return {"type": "input_image", "image_url": url, "detail": "auto"}
        if kind == "file" and isinstance(part.get("file"), dict):
            keys = ("file_id", "file_data", "filename", "file_url")
            return {"type": "input_file", **{k: v for k, v in part["file"].items() if k in keys}}
    return {"type": "input_text", "text": content_text([part])}


def message_items(message: Message) -> list[Item]:
    """A chat message (a stored turn, the tail) as ``input`` items: a message item, an
    assistant's text and then a ``function_call`` per tool call, a ``tool`` message as a
    ``function_call_output``."""
    role = message.get("role")
    content = message.get("content")
    if role == "tool":
        call_id = str(message.get("tool_call_id") or "")
        output = content_text(content)
        return [{"type": "function_call_output", "call_id": call_id, "output": output}]
    if role == "assistant":
        items: list[Item] = []
        text = content_text(content)
        if text:
            items.append({"type": "message", "role": "assistant", "content": text})
        for call in message.get("tool_calls") or ():
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict):
                items.append(
                    {
                        "type": "function_call",
                        "call_id": str(call.get("id") or ""),
                        "name": str(function.get("name") or ""),
                        "arguments": str(function.get("arguments") or ""),
                    }
                )
        return items
    if not isinstance(content, str):
        content = [_input_part(p) for p in content] if isinstance(content, list) else ""
    return [{"type": "message", "role": role if role in _ROLES else "user", "content": content}]


# -- replies: output items -> one chat message ------------------------------------------------


def output_message(output: Any) -> Message | None:
    """The ``output`` items of a response as one chat assistant message: the text of its
    message items, a tool call per ``function_call`` (``custom_tool_call``), the summary and
    reasoning text of ``reasoning`` items as ``reasoning_content``; ``None`` for no output."""
    items = _plain(output)
    if not isinstance(items, list) or not items:
        return None
    texts: list[str] = []
    reasoning: list[str] = []
    calls: list[dict[str, Any]] = []
    for item in items:
        kind = item_kind(item)
        if kind == "message":
            texts.append(content_text([_chat_part(p) or {} for p in item.get("content") or ()]))
        elif kind in _CALLS:
            call = _call(item, _CALLS[kind])
            if call is not None:
                calls.append(call)
        elif kind == "reasoning":
            for part in [*(item.get("summary") or ()), *(item.get("content") or ())]:
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    reasoning.append(part["text"])
    text = "".join(texts)
    message: Message = {"role": "assistant", "content": text or (None if calls else "")}
    if calls:
        message["tool_calls"] = calls
    if reasoning:
        message["reasoning_content"] = "\n\n".join(reasoning)
    return message
