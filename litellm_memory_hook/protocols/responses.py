"""The Responses API (``/v1/responses``, LiteLLM call types ``aresponses`` and ``responses``):
Codex, the OpenAI Agents SDK and other agents.

A request (the fields the hook reads; every other field reaches the model untouched)::

    {"model": str, "instructions": str | None, "input": str | [item, ...],
     "user": str, "metadata": {...}, "previous_response_id": str, "conversation": ..., ...}

Items of ``input`` and the chat messages of the view they become (:func:`view_messages`):

* ``{"type": "message", "role": "user" | "system" | "developer", "content": str | [part]}``
  (``type`` may be left out) -> a message of that role; parts ``input_text`` -> ``text``,
  ``input_image`` -> ``image_url``, ``input_file`` -> ``file``, ``input_audio`` as it is;
* ``{"type": "message", "role": "assistant", "content": str | [output_text | refusal]}`` ->
  an assistant message with the text;
* ``{"type": "function_call", "call_id", "name", "arguments"}`` (and ``custom_tool_call``,
  ``input`` as its arguments) -> an assistant ``tool_calls`` entry; calls right after an
  assistant message join it, as parallel calls do in chat completions;
* ``{"type": "function_call_output", "call_id", "output": str | [part]}`` (and
  ``custom_tool_call_output``) -> a ``tool`` message;
* any other item (``reasoning``, ``item_reference``, ``web_search_call``, ...) rides with the
  next message (the previous one at the end): it is re-emitted exactly, with it.

The view's first message is a system message standing for ``instructions``: a text part with
the client's text (so budgets count it) and a part of type :data:`INSTRUCTIONS`; the rules and the
head (memories, summary) join it, and :meth:`Responses.apply` appends what joined it to the
client's ``instructions`` (the client's text first, byte-exact). Each of the client's chat
messages remembers the item range it came from; :func:`rebuilt_request` re-emits those items
exactly, in order, and converts what the hook added (stored turns, the cache layout's tail) into
items (:func:`message_items`). A string ``input`` stays a string when nothing comes before it
(the tail then ends ``instructions``).

``previous_response_id``: a provider that serves the Responses API itself replays the earlier
turns; the hook then sends no stored turns, memory only. A model LiteLLM bridges to chat
completions is replayed from LiteLLM's spend logs (its database); when the previous response is
one this hook stored (its id is in the conversation's ``calls`` hash), the hook sends the window
from Redis instead and drops ``previous_response_id``, so LiteLLM neither waits for its database
nor replays the turns a second time. The hook marks such a view ``served``
(:data:`SERVED`).
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from typing import Any

from litellm_memory_hook.core.messages import content_text
from litellm_memory_hook.protocols.base import HistoryMode
from litellm_memory_hook.protocols.chat import _plain

Message = dict[str, Any]
Item = dict[str, Any]

#: the view's key holding the client's request as read (:class:`Source`).
SOURCE = "_responses_source"
#: the view's key the hook sets to ``True`` when it serves a ``previous_response_id``
#: continuation from Redis (the window is sent; ``previous_response_id`` is dropped).
SERVED = "_responses_served"
#: the view's key holding the (decrypted) ``previous_response_id`` of a continuation.
CONTINUES = "continues"
#: the part type that marks the view's first message as the client's ``instructions`` (the
#: head joins it; an engine never drops a message holding a part that is not text).
INSTRUCTIONS = "responses_instructions"
#: the ``calls`` hash field that names a stored response: ``resp:<response id>``.
RESPONSE_FIELD = "resp:"

#: the controls that are flags: OpenAI's Responses ``metadata`` holds strings only, so
#: ``"true"`` and ``"false"`` stand for them there.
_FLAGS = frozenset({"memory_regenerate", "memory_flush"})
#: request controls (:mod:`litellm_memory_hook.core.controls`) a client sends in ``metadata``;
#: LiteLLM keeps the client's metadata for the provider and a copy in ``litellm_metadata``'s
#: ``requester_metadata``: the view reads them at the top of ``litellm_metadata``.
CONTROL_KEYS = _FLAGS | {"memory_mode", "conversation_id", "persona", "timezone"}
CONTROL_KEYS |= {"custom_instructions"}

_ROLES = frozenset({"user", "assistant", "system", "developer"})
_CALLS = {"function_call": "arguments", "custom_tool_call": "input"}
_OUTPUTS = frozenset({"function_call_output", "custom_tool_call_output"})


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


def _control(key: str, value: Any) -> Any:
    """A control's value as the controls read it (a flag's ``"true"`` / ``"false"`` as a bool)."""
    if key in _FLAGS and isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    return value


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


# -- rebuilt messages -> the request's fields -------------------------------------------------


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
    head = ""
    body = rebuilt
    first = rebuilt[0].get("content") if rebuilt else None
    if isinstance(first, list) and any(_part_type(p) == INSTRUCTIONS for p in first):
        own = source.instructions  # the rules before it and the head after it are the hook's
        head, body = _text([p for p in first if p is not own]), rebuilt[1:]
    out: list[Any] = []
    added: list[Item] = []  # the hook's data items (the tail)
    own_string = object()  # stands for a string input until the end
    for (index, prefix), message in zip(_matches(body, source.messages), body, strict=True):
        if index is not None:
            if prefix:
                added.append(_data_item(prefix, "user"))
                out.append(added[-1])
            if source.text is not None:
                out.append(own_string)
            else:
                start, end = source.spans[index]
                out.extend(source.items[start:end])
        elif message.get("role") in ("system", "developer"):
            added.append(_data_item(_text(message.get("content")), str(message["role"])))
            out.append(added[-1])
        elif window:
            out.extend(message_items(message))
    if source.text is not None:
        lead = 0
        while lead < len(out) and any(out[lead] is item for item in added):
            lead += 1
        if out[lead:] == [own_string]:  # only the tail before it: the tail ends instructions
            tails = [p["text"] for item in out[:lead] for p in item["content"]]
            return Rebuilt("\n\n".join(t for t in (head, *tails) if t.strip()), source.text)
        easy = {"role": "user", "content": source.text}
        out = [easy if item is own_string else item for item in out]
    return Rebuilt(head, out)


# -- replies ---------------------------------------------------------------------------------


def _get(value: Any, key: str) -> Any:
    return value.get(key) if isinstance(value, dict) else getattr(value, key, None)


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


class ResponsesStream:
    """Assembles a streamed Responses reply from its events: the ``response.completed`` (or
    ``incomplete``) event's whole response when it comes; until then the finished output items
    and the text deltas (a cut stream)."""

    def __init__(self) -> None:
        self.final: Message | None = None
        self.done: list[Any] = []
        self.deltas: list[str] = []
        self._id: str | None = None

    @property
    def reply_id(self) -> str | None:
        """The response's id (decrypted: :func:`decrypted_id`), once an event named it."""
        return decrypted_id(self._id) if self._id else None

    def add(self, chunk: Any) -> None:
        kind = _get(chunk, "type")
        response = _get(chunk, "response")
        if response is not None and isinstance(_get(response, "id"), str):
            self._id = _get(response, "id")
        if kind in ("response.completed", "response.incomplete") and response is not None:
            self.final = output_message(_get(response, "output"))
        elif kind == "response.output_item.done":
            self.done.append(_get(chunk, "item"))
            self.deltas = []
        elif kind == "response.output_text.delta" and isinstance(_get(chunk, "delta"), str):
            self.deltas.append(_get(chunk, "delta"))

    def message(self) -> Message:
        if self.final is not None:
            return self.final
        text = "".join(self.deltas)
        partial = [*self.done, {"type": "message", "content": [{"type": "text", "text": text}]}]
        return output_message(partial) or {"role": "assistant", "content": ""}


class Responses:
    """The Responses API adapter (module docstring)."""

    name = "responses"
    metadata_field = "litellm_metadata"

    def view(self, data: dict[str, Any]) -> dict[str, Any] | None:
        """``{"model", "messages", "user", "metadata", "litellm_call_id", "tools",
        "max_output_tokens", "continues"?}`` with the :class:`Source` under :data:`SOURCE`;
        ``None`` for a request the hook does not read (it then passes through)."""
        instructions, raw = data.get("instructions"), data.get("input")
        if instructions is not None and not isinstance(instructions, str):
            return None
        if isinstance(raw, str):
            items: list[Any] = [{"role": "user", "content": raw}]
        elif isinstance(raw, list):
            items = raw
        else:
            return None
        read = view_messages(items)
        if read is None:
            return None
        messages, spans = read
        metadata = data.get(self.metadata_field)
        if not isinstance(metadata, dict):
            metadata = {}
            data[self.metadata_field] = metadata
        for source in (data.get("metadata"), metadata.get("requester_metadata")):
            if isinstance(source, dict):
                for key in CONTROL_KEYS:
                    if key in source and key not in metadata:
                        metadata[key] = _control(key, source[key])
        own = {"type": "text", "text": instructions} if instructions else None
        lead = {"role": "system", "content": [*([own] if own else []), {"type": INSTRUCTIONS}]}
        view: dict[str, Any] = {
            "model": data.get("model"),
            "messages": [lead, *messages],
            "user": data.get("user"),
            "metadata": metadata,
            "litellm_call_id": data.get("litellm_call_id"),
            "tools": data.get("tools"),
            "max_output_tokens": data.get("max_output_tokens"),  # the reply's share (E06)
            SOURCE: Source(messages, spans, items, raw if isinstance(raw, str) else None, own),
        }
        previous = data.get("previous_response_id")
        if isinstance(previous, str) and previous:
            view[CONTINUES] = decrypted_id(previous)
        return view

    def apply(self, data: dict[str, Any], view: dict[str, Any]) -> None:
        """Write the rebuilt messages into ``instructions`` and ``input``; drop
        ``previous_response_id`` when the hook served the continuation from Redis."""
        source = view.get(SOURCE)
        rebuilt = view.get("messages")
        if not isinstance(source, Source) or not isinstance(rebuilt, list):
            return
        served = bool(view.get(SERVED))
        replayed = CONTINUES in view or data.get("conversation") is not None
        fields = rebuilt_request(source, rebuilt, window=served or not replayed)
        client = data.get("instructions")
        if fields.added.strip():
            remember_echo(data, "instructions", client)
            data["instructions"] = (client + "\n\n" if client else "") + fields.added
        data["input"] = fields.input
        if served:
            data.pop("previous_response_id", None)

    def history_mode(self, view: dict[str, Any]) -> HistoryMode:
        """``keep``: a Responses client that sends its history (Codex, the Agents SDK) is an
        agent; one that sends only new items continues with ``previous_response_id``."""
        return "keep"

    def reply_message(self, response: Any) -> Message | None:
        return output_message(_get(response, "output"))

    def reply_id(self, response: Any) -> str | None:
        """The id of a whole response (LiteLLM's form, before the proxy encrypts it)."""
        ident = _get(response, "id")
        return decrypted_id(ident) if isinstance(ident, str) and ident else None

    def accumulator(self) -> ResponsesStream:
        return ResponsesStream()


def decrypted_id(response_id: str) -> str:
    """The response id LiteLLM's proxy handed out, decrypted (the proxy encrypts the ids it
    returns with a random nonce; its pre-call hook decrypts ``previous_response_id`` again):
    the same string for every encryption of one response, and for the response the post-call
    hook reads."""
    try:
        from litellm.proxy.hooks.responses_id_security import decrypted_response_id

        return str(decrypted_response_id(response_id))
    except Exception:  # another LiteLLM, or not an id it made
        return response_id


_REPLAYS: dict[str, tuple[float, bool]] = {}


def provider_replays(model: object) -> bool:
    """Whether the alias's deployment serves the Responses API itself (so its provider replays
    ``previous_response_id``), as LiteLLM decides it
    (``litellm.responses.main.provider_stores_the_conversation``); ``True`` when it cannot be
    told (the hook then adds no earlier turns). Cached 30 s per alias."""
    if not isinstance(model, str):
        return True
    cached = _REPLAYS.get(model)
    if cached is not None and time.monotonic() - cached[0] < 30.0:
        return cached[1]
    answer = True
    try:
        from litellm.proxy import proxy_server
        from litellm.responses.main import provider_stores_the_conversation

        router = getattr(proxy_server, "llm_router", None)
        for deployment in (router.get_model_list(model_name=model) if router else None) or ():
            params = deployment.get("litellm_params") if isinstance(deployment, dict) else None
            if isinstance(params, dict) and isinstance(params.get("model"), str):
                kwargs = {**params, "model_info": deployment.get("model_info")}
                answer = bool(
                    provider_stores_the_conversation(
                        params["model"], params.get("custom_llm_provider"), kwargs
                    )
                )
                break
    except Exception:
        answer = True
    _REPLAYS[model] = (time.monotonic(), answer)
    return answer


#: the adapter (stateless: one for every request).
RESPONSES = Responses()


#: where :meth:`Responses.apply` leaves the request fields the Responses API echoes back in its
#: response (``instructions``) as the client sent them, in the request's LiteLLM metadata.
ECHO_KEY = "litellm_memory_echo"


def remember_echo(data: dict[str, Any], field: str, value: Any) -> None:
    """Keep the client's own ``field`` (before the hook changed it) for :func:`restore_echo`."""
    metadata = data.get("litellm_metadata")
    if not isinstance(metadata, dict):
        metadata = data["litellm_metadata"] = {}
    echo = metadata.setdefault(ECHO_KEY, {})
    if isinstance(echo, dict):
        echo.setdefault(field, value)


def restore_echo(data: Any, reply: Any) -> None:
    """Put the client's own fields back into what the client receives: a whole response, or
    a stream event that carries one (``response.created``, ``response.completed`` ...). The
    response echoes ``instructions`` as sent upstream: the operator's rules and the user's
    memory would otherwise reach the client."""
    metadata = data.get("litellm_metadata") if isinstance(data, dict) else None
    echo = metadata.get(ECHO_KEY) if isinstance(metadata, dict) else None
    if not isinstance(echo, dict) or not echo:
        return
    target = _get(reply, "response") or reply
    for field, value in echo.items():
        if isinstance(target, dict):
            if field in target:
                target[field] = value
        elif hasattr(target, field):
            with contextlib.suppress(Exception):  # a frozen object: left as it is
                setattr(target, field, value)
