"""The stand-in's Anthropic Messages route (``POST /v1/messages``): formats and rules.

Pure functions, used by :mod:`litellm_memory_hook.tools.standin`. With it, a LiteLLM model
``anthropic/<any name>`` whose ``api_base`` is the stand-in sends its calls here, so the tests
see what LiteLLM's Anthropic transformation makes of the hook's messages, and a request a strict
provider refuses fails as it would there.

The rules the route enforces are the 400s Anthropic's API has answered to conversations that
clients rebuilt or trimmed (``invalid_request_error``, with Anthropic's texts):

* ``messages`` must be a non-empty list of ``user``/``assistant`` messages (a system prompt is
  the top-level ``system`` field);
* the first message must use the ``user`` role (field reports: mckaywrigley/chatbot-ui#1656,
  lobehub/lobehub#1601, when a trimmed history started with a reply; Bedrock's Converse API
  has the same rule);
* a text content block must not be empty;
* each ``tool_result`` block answers a ``tool_use`` block of the message just before it, and
  each ``tool_use`` block is answered in the message just after it;
* a user message's ``tool_result`` blocks come first, before its other blocks (Anthropic's
  tool-use guide: "any text must come after all tool results").

Answers: the scripted thinking blocks (``thinking`` with its ``signature``, or
``redacted_thinking``) first, the reply text in one ``text`` block, then a ``tool_use`` block
for each scripted OpenAI-style tool call (``id``, ``function.name``, ``function.arguments`` as
``input``), with
``stop_reason`` ``"tool_use"`` when there are calls and ``"end_turn"`` otherwise, and a usage
estimate of a token per 4 characters; with ``stream: true``, the event stream of Anthropic's
format (``message_start``; per block ``content_block_start``, deltas, ``content_block_stop``: a
thinking block's text in ``thinking_delta`` pieces of 7 characters then its ``signature_delta``,
a redacted one whole in its start, one ``text_delta`` per word, one ``input_json_delta`` per tool
call; ``message_delta``, ``message_stop``). ``count_tokens``: the ``input_tokens`` estimate of a
body (a token per 4 characters of its system, messages and tools as JSON).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Sequence
from typing import Any

from litellm_memory_hook.core.messages import content_text

ROLES = ("user", "assistant")


def as_chat(body: dict[str, Any]) -> dict[str, Any]:
    """An Anthropic Messages body seen as chat messages: ``system`` (a string or text blocks)
    as the first system message, then each message with its text blocks' text.

    Returns:
        ``{"model": ..., "messages": [{"role", "content": str}, ...]}``.
    """
    system = body.get("system")
    messages: list[dict[str, Any]] = []
    text = system if isinstance(system, str) else content_text(system)
    if text:
        messages.append({"role": "system", "content": text})
    for message in body.get("messages") or ():
        if isinstance(message, dict):
            content = message.get("content")
            messages.append({"role": message.get("role"), "content": content_text(content)})
    return {"model": body.get("model"), "messages": messages}


def rule_error(body: dict[str, Any]) -> str | None:
    """The message of the first rule (module docstring) the body breaks; ``None`` when valid."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages: at least one message is required"
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in ROLES:
            return f"messages.{index}.role: Input should be 'user' or 'assistant'"
    if messages[0]["role"] != "user":
        return 'messages: first message must use the "user" role'
    uses: set[str] = set()  # the tool_use ids of the previous (assistant) message
    for index, message in enumerate([*messages, {"role": "end", "content": []}]):
        content = message.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
        blocks = [b for b in blocks if isinstance(b, dict)]
        for block in blocks:
            if block.get("type") == "text" and not block.get("text"):
                return "messages: text content blocks must be non-empty"
        results = {str(b.get("tool_use_id")) for b in blocks if b.get("type") == "tool_result"}
        kinds = [b.get("type") for b in blocks]
        if "tool_result" in kinds[kinds.count("tool_result") :]:
            return (
                f"messages.{index}: `tool_result` blocks must come first in the content, "
                "before any other block"
            )
        if message["role"] == "user" and results - uses:
            return (
                f"messages.{index}: unexpected `tool_use_id` found in `tool_result` blocks: "
                f"{', '.join(sorted(results - uses))}. Each `tool_result` block must have a "
                "corresponding `tool_use` block in the previous message."
            )
        if uses - results:
            return (
                f"messages.{index - 1}: `tool_use` ids were found without `tool_result` blocks "
                f"immediately after: {', '.join(sorted(uses - results))}. Each `tool_use` block "
                "must have a corresponding `tool_result` block in the next message."
            )
        uses = {str(b.get("id")) for b in blocks if b.get("type") == "tool_use"}
        uses = uses if message["role"] == "assistant" else set()
    return None


def error_body(message: str, kind: str = "invalid_request_error") -> dict[str, Any]:
    """An error in Anthropic's shape: ``{"type": "error", "error": {"type", "message"}}``."""
    return {"type": "error", "error": {"type": kind, "message": message}}


def _usage(chat: dict[str, Any], text: str) -> dict[str, int]:
    prompt = sum(len(str(m.get("content") or "")) for m in chat.get("messages") or ())
    return {"input_tokens": max(1, prompt // 4), "output_tokens": max(1, len(text) // 4)}


def _message(text: str, model: str, usage: dict[str, int], content: list[Any]) -> dict[str, Any]:
    return {
        "id": f"msg_{uuid.uuid4().hex[:24]}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": usage,
    }


def _tool_use(call: Any) -> dict[str, Any]:
    """An OpenAI-style tool call as a ``tool_use`` block (arguments that are not a JSON object
    become ``{}``)."""
    call = call if isinstance(call, dict) else {}
    function = call.get("function") if isinstance(call.get("function"), dict) else {}
    try:
        arguments = json.loads(function.get("arguments") or "{}")
    except (TypeError, ValueError):
        arguments = {}
    return {
        "type": "tool_use",
        "id": str(call.get("id") or f"toolu_{uuid.uuid4().hex[:12]}"),
        "name": str(function.get("name") or "tool"),
        "input": arguments if isinstance(arguments, dict) else {},
    }


def thinking_blocks(specs: Sequence[Any]) -> list[dict[str, Any]]:
    """Scripted thinking blocks: a dict with ``data`` is a ``redacted_thinking`` block, any
    other a ``thinking`` block (``thinking``, ``signature``)."""
    blocks: list[dict[str, Any]] = []
    for spec in specs:
        spec = spec if isinstance(spec, dict) else {"thinking": str(spec)}
        if "data" in spec:
            blocks.append({"type": "redacted_thinking", "data": str(spec["data"])})
        else:
            blocks.append(
                {
                    "type": "thinking",
                    "thinking": str(spec.get("thinking") or ""),
                    "signature": str(spec.get("signature") or ""),
                }
            )
    return blocks


def count_tokens(body: dict[str, Any]) -> dict[str, int]:
    """``count_tokens``'s answer for a body (module docstring)."""
    counted = {k: body.get(k) for k in ("system", "messages", "tools")}
    return {"input_tokens": max(1, len(json.dumps(counted, ensure_ascii=False)) // 4)}


def message(
    text: str,
    chat: dict[str, Any],
    tool_calls: Sequence[Any] = (),
    thinking: Sequence[Any] = (),
) -> dict[str, Any]:
    """A complete Messages API answer holding ``thinking`` blocks (:func:`thinking_blocks`),
    ``text`` and ``tool_use`` blocks for ``tool_calls`` (``chat``: :func:`as_chat` of the
    body)."""
    model = str(chat.get("model") or "standin")
    blocks: list[Any] = thinking_blocks(thinking)
    blocks += [{"type": "text", "text": text}] if text or not tool_calls else []
    blocks += [_tool_use(call) for call in tool_calls]
    answer = _message(text, model, _usage(chat, text), blocks)
    if tool_calls:
        answer["stop_reason"] = "tool_use"
    return answer


async def stream(
    text: str,
    chat: dict[str, Any],
    delay_s: float = 0.0,
    tool_calls: Sequence[Any] = (),
    thinking: Sequence[Any] = (),
) -> AsyncIterator[str]:
    """The Messages API event stream of an answer holding ``thinking`` blocks, ``text`` (one
    delta per word, ``delay_s`` seconds before each), then ``tool_calls`` as ``tool_use``
    blocks."""

    def event(kind: str, payload: dict[str, Any]) -> str:
        return f"event: {kind}\ndata: {json.dumps({'type': kind, **payload})}\n\n"

    usage = _usage(chat, text)
    model = str(chat.get("model") or "standin")
    start = _message("", model, {**usage, "output_tokens": 0}, [])
    start["stop_reason"] = None
    yield event("message_start", {"message": start})
    first = 0
    for first, block in enumerate(thinking_blocks(thinking), 1):
        index = first - 1
        if block["type"] == "redacted_thinking":
            yield event("content_block_start", {"index": index, "content_block": block})
        else:
            empty = {"type": "thinking", "thinking": "", "signature": ""}
            yield event("content_block_start", {"index": index, "content_block": empty})
            thought = block["thinking"]
            for at in range(0, len(thought), 7):
                delta = {"type": "thinking_delta", "thinking": thought[at : at + 7]}
                yield event("content_block_delta", {"index": index, "delta": delta})
            delta = {"type": "signature_delta", "signature": block["signature"]}
            yield event("content_block_delta", {"index": index, "delta": delta})
        yield event("content_block_stop", {"index": index})
    if text or not tool_calls:  # a tool-call answer without text has no text block
        text_block = {"type": "text", "text": ""}
        yield event("content_block_start", {"index": first, "content_block": text_block})
        for number, word in enumerate(text.split(" ")):
            if delay_s:
                await asyncio.sleep(delay_s)
            piece = word if number == 0 else " " + word
            delta = {"type": "text_delta", "text": piece}
            yield event("content_block_delta", {"index": first, "delta": delta})
        yield event("content_block_stop", {"index": first})
        first += 1
    for index, call in enumerate(tool_calls, first):
        block = _tool_use(call)
        arguments = json.dumps(block.pop("input"))
        yield event(
            "content_block_start", {"index": index, "content_block": {**block, "input": {}}}
        )
        delta = {"type": "input_json_delta", "partial_json": arguments}
        yield event("content_block_delta", {"index": index, "delta": delta})
        yield event("content_block_stop", {"index": index})
    yield event(
        "message_delta",
        {
            "delta": {
                "stop_reason": "tool_use" if tool_calls else "end_turn",
                "stop_sequence": None,
            },
            "usage": {"output_tokens": usage["output_tokens"]},
        },
    )
    yield event("message_stop", {})
