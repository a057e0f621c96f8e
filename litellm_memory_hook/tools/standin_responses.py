"""The stand-in's Responses API route (``POST /v1/responses``): formats, rules and replay.

Pure functions and one small store, used by :mod:`litellm_memory_hook.tools.standin`. A LiteLLM
model ``openai/<any name>`` whose ``api_base`` is the stand-in sends its Responses calls here
(LiteLLM serves ``openai/`` Responses natively), so the tests see what the hook sends upstream.

Like OpenAI's API, the route keeps each response (its input items and output items) and replays
them for a request that names it in ``previous_response_id`` (:class:`Replays`); an unknown id
answers 400 ``previous_response_not_found``. The rules it enforces, with OpenAI's texts
(``invalid_request_error``):

* ``input`` is a string or a list of objects (or left out with ``previous_response_id``);
  ``instructions`` is a string or null;
* a ``function_call_output`` answers a ``function_call`` (``custom_tool_call_output``: a
  ``custom_tool_call``) with its ``call_id`` earlier in the conversation (replayed items count).

Answers: the reply text in one output ``message`` (``output_text``), then a ``function_call``
item per scripted OpenAI-style tool call (``id`` as ``call_id``, ``function.name``,
``function.arguments``), usage estimated at a token per 4 characters; with ``stream: true`` the
event stream of OpenAI's format (``response.created``, ``response.in_progress``; per output
item ``response.output_item.added``, for text ``response.content_part.added``, one
``response.output_text.delta`` per word, ``response.output_text.done``,
``response.content_part.done``, for a call ``response.function_call_arguments.delta`` and
``.done``; ``response.output_item.done``; then ``response.completed`` with the whole response).
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Sequence
from typing import Any

from litellm_memory_hook.core.messages import content_text

#: responses the replay store keeps (the oldest are forgotten first).
MAX_KEPT = 2000


class Replays:
    """Each answered response's conversation (input then output items), for
    ``previous_response_id``."""

    def __init__(self, max_kept: int = MAX_KEPT) -> None:
        self._kept: OrderedDict[str, list[Any]] = OrderedDict()
        self._max = max_kept

    def get(self, response_id: str) -> list[Any] | None:
        """The conversation up to and including the response, ``None`` for an unknown id."""
        return self._kept.get(response_id)

    def keep(self, response_id: str, items: list[Any]) -> None:
        self._kept[response_id] = items
        while len(self._kept) > self._max:
            self._kept.popitem(last=False)

    def clear(self) -> None:
        self._kept.clear()


def error_body(message: str, param: str | None = None, code: str | None = None) -> dict[str, Any]:
    """OpenAI's error object (``invalid_request_error``)."""
    return {
        "error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}
    }


def input_items(body: dict[str, Any]) -> list[Any] | None:
    """The request's ``input`` as a list of items (a string as one user message; left out:
    none), ``None`` when it is neither."""
    raw = body.get("input")
    if raw is None:
        return []
    if isinstance(raw, str):
        return [{"role": "user", "content": raw}]
    if isinstance(raw, list) and all(isinstance(i, dict) for i in raw):
        return list(raw)
    return None


def conversation(body: dict[str, Any], replays: Replays) -> tuple[list[Any] | None, dict[str, Any]]:
    """The whole conversation the model sees (replayed items, then ``input``), or ``None`` and
    the error body of the first rule (module docstring) the request breaks."""
    items = input_items(body)
    if items is None:
        return None, error_body("Invalid type for 'input': expected a string or an array.", "input")
    instructions = body.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        return None, error_body("Invalid type for 'instructions'.", "instructions")
    previous = body.get("previous_response_id")
    earlier: list[Any] = []
    if previous is not None:
        found = replays.get(str(previous))
        if found is None:
            message = f"Previous response with id '{previous}' not found."
            return None, error_body(message, "previous_response_id", "previous_response_not_found")
        earlier = found
    if not items and previous is None:
        return None, error_body("Missing required parameter: 'input'.", "input")
    whole = [*earlier, *items]
    if (problem := tool_rule_error(whole)) is not None:
        return None, error_body(problem, "input")
    return whole, {}


def tool_rule_error(items: Sequence[Any]) -> str | None:
    """OpenAI's 400 for a call output that answers no earlier call, else ``None``."""
    calls: set[tuple[str, str]] = set()
    for item in items:
        kind = item.get("type")
        if kind in ("function_call", "custom_tool_call"):
            calls.add((kind, str(item.get("call_id"))))
        elif kind in ("function_call_output", "custom_tool_call_output"):
            wanted = kind.removesuffix("_output")
            call_id = item.get("call_id")
            if (wanted, str(call_id)) not in calls:
                return f"No tool call found for function call output with call_id {call_id}."
    return None


def as_chat(instructions: Any, items: Sequence[Any]) -> dict[str, Any]:
    """A conversation seen as chat messages (for the stand-in's default reply): instructions as
    the first system message, message items with their text, calls and outputs as chat tool
    traffic; other items left out."""
    messages: list[dict[str, Any]] = []
    if isinstance(instructions, str) and instructions:
        messages.append({"role": "system", "content": instructions})
    for item in items:
        kind = item.get("type", "message" if "role" in item else None)
        if kind == "message":
            text = content_text(item.get("content"))
            messages.append({"role": item.get("role"), "content": text})
        elif kind == "function_call":
            call = {"id": item.get("call_id"), "type": "function", "function": item}
            messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            output = item.get("output")
            text = output if isinstance(output, str) else content_text(output)
            messages.append({"role": "tool", "tool_call_id": item.get("call_id"), "content": text})
    return {"messages": messages}


def output_items(text: str, calls: Sequence[Any]) -> list[dict[str, Any]]:
    """A reply's output items: the text message, then a ``function_call`` per chat tool call."""
    items: list[dict[str, Any]] = [
        {
            "type": "message",
            "id": f"msg_{uuid.uuid4().hex[:16]}",
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}],
        }
    ]
    for call in calls:
        function = call.get("function") or {}
        items.append(
            {
                "type": "function_call",
                "id": f"fc_{uuid.uuid4().hex[:16]}",
                "call_id": str(call.get("id") or f"call_{uuid.uuid4().hex[:12]}"),
                "name": str(function.get("name") or ""),
                "arguments": str(function.get("arguments") or ""),
                "status": "completed",
            }
        )
    return items


def _tokens(items: Sequence[Any]) -> int:
    return max(1, len(json.dumps(list(items), ensure_ascii=False)) // 4)


def response_object(
    body: dict[str, Any],
    ident: str,
    output: list[dict[str, Any]],
    seen: Sequence[Any],
    status: str = "completed",
) -> dict[str, Any]:
    """A Responses API object (``seen``: the conversation the model saw, for usage)."""
    done = status == "completed"
    usage = None
    if done:
        used_in, used_out = _tokens(seen), _tokens(output)
        usage = {
            "input_tokens": used_in,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": used_out,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": used_in + used_out,
        }
    return {
        "id": ident,
        "object": "response",
        "created_at": int(time.time()),
        "status": status,
        "error": None,
        "incomplete_details": None,
        "instructions": body.get("instructions"),
        "max_output_tokens": body.get("max_output_tokens"),
        "model": str(body.get("model", "standin")),
        "output": output if done else [],
        "parallel_tool_calls": True,
        "previous_response_id": body.get("previous_response_id"),
        "reasoning": {"effort": None, "summary": None},
        "store": body.get("store", True),
        "temperature": 1.0,
        "text": {"format": {"type": "text"}},
        "tool_choice": "auto",
        "tools": body.get("tools") or [],
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": usage,
        "user": body.get("user"),
        "metadata": body.get("metadata") or {},
    }


def _event(kind: str, number: int, **fields: Any) -> str:
    payload = {"type": kind, "sequence_number": number, **fields}
    return f"event: {kind}\ndata: {json.dumps(payload, ensure_ascii=False)}\n\n"


async def stream(
    body: dict[str, Any],
    ident: str,
    output: list[dict[str, Any]],
    seen: Sequence[Any],
    delay: float = 0.0,
) -> AsyncIterator[str]:
    """The SSE event stream of a response (module docstring)."""
    number = 0

    def event(kind: str, **fields: Any) -> str:
        nonlocal number
        number += 1
        return _event(kind, number - 1, **fields)

    yield event("response.created", response=response_object(body, ident, [], seen, "in_progress"))
    yield event(
        "response.in_progress", response=response_object(body, ident, [], seen, "in_progress")
    )
    for index, item in enumerate(output):
        where = {"item_id": item["id"], "output_index": index}
        if item["type"] == "message":
            text = item["content"][0]["text"]
            yield event(
                "response.output_item.added",
                output_index=index,
                item={**item, "status": "in_progress", "content": []},
            )
            part = {"type": "output_text", "text": "", "annotations": []}
            yield event("response.content_part.added", **where, content_index=0, part=part)
            for i, word in enumerate(text.split(" ") if text else ()):
                if delay:
                    await asyncio.sleep(delay)
                piece = word if i == 0 else " " + word
                yield event(
                    "response.output_text.delta", **where, content_index=0, delta=piece, logprobs=[]
                )
            yield event(
                "response.output_text.done", **where, content_index=0, text=text, logprobs=[]
            )
            whole = {**part, "text": text}
            yield event("response.content_part.done", **where, content_index=0, part=whole)
        else:
            yield event(
                "response.output_item.added",
                output_index=index,
                item={**item, "status": "in_progress", "arguments": ""},
            )
            arguments = item["arguments"]
            yield event("response.function_call_arguments.delta", **where, delta=arguments)
            yield event("response.function_call_arguments.done", **where, arguments=arguments)
        yield event("response.output_item.done", output_index=index, item=item)
    yield event("response.completed", response=response_object(body, ident, output, seen))
