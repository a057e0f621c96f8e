"""The Responses API (``/v1/responses``, LiteLLM call types ``aresponses`` and ``responses``):
Codex, the OpenAI Agents SDK and other agents.

A request (the fields the hook reads; every other field reaches the model untouched)::

    {"model": str, "instructions": str | None, "input": str | [item, ...],
     "user": str, "metadata": {...}, "previous_response_id": str, "conversation": ..., ...}

Items of ``input`` and the chat messages of the view they become
(:func:`~litellm_memory_hook.protocols.responses_items.view_messages`):

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
messages remembers the item range it came from; the rebuild re-emits those items exactly, in
order, and converts what the hook added (stored turns, the cache layout's tail) into items
(:mod:`litellm_memory_hook.protocols.responses_rebuild`). A string ``input`` stays a string
when nothing comes before it (the tail then ends ``instructions``).

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
from typing import Any

from litellm_memory_hook.protocols.base import HistoryMode
from litellm_memory_hook.protocols.responses_items import Message, output_message, view_messages
from litellm_memory_hook.protocols.responses_rebuild import (
    INSTRUCTIONS,
    Source,
    rebuilt_request,
)

#: the view's key holding the client's request as read (:class:`Source`).
SOURCE = "_responses_source"
#: the view's key the hook sets to ``True`` when it serves a ``previous_response_id``
#: continuation from Redis (the window is sent; ``previous_response_id`` is dropped).
SERVED = "_responses_served"
#: the view's key holding the (decrypted) ``previous_response_id`` of a continuation.
CONTINUES = "continues"
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


def _control(key: str, value: Any) -> Any:
    """A control's value as the controls read it (a flag's ``"true"`` / ``"false"`` as a bool)."""
    if key in _FLAGS and isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    return value


# -- replies ---------------------------------------------------------------------------------


def _get(value: Any, key: str) -> Any:
    return value.get(key) if isinstance(value, dict) else getattr(value, key, None)


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
            "max_output_tokens": data.get("max_output_tokens"),  # the reply's share
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
