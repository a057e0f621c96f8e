"""Anthropic Messages replies as one chat-completions assistant message: whole (the response
dict) and streamed (the SSE events). The same reading for a request's history
(:func:`assistant_chat`), so the store aligns a client's history with the replies it stored."""

from __future__ import annotations

import codecs
import json
from collections.abc import Iterable
from typing import Any

Block = dict[str, Any]
Message = dict[str, Any]
_THINKING = frozenset({"thinking", "redacted_thinking"})


def assistant_chat(blocks: Iterable[Block]) -> Message:
    """One assistant chat message of an Anthropic assistant's blocks: ``content`` its text (a
    string for one text block, text parts for more, ``None`` beside tool calls, ``""``
    without any), ``tool_calls`` its ``tool_use`` blocks, ``thinking_blocks`` its thinking
    blocks whole (signatures byte-exact). Other blocks (server tools) are left out. The same
    for a request's history and a reply, so that the store aligns the two."""
    texts: list[str] = []
    calls: list[Message] = []
    thinking: list[Block] = []
    for block in blocks:
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str) and block["text"]:
            texts.append(block["text"])
        elif kind == "tool_use":
            arguments = json.dumps(block.get("input") or {}, ensure_ascii=False)
            calls.append(
                {
                    "id": block.get("id"),
                    "type": "function",
                    "function": {"name": block.get("name"), "arguments": arguments},
                }
            )
        elif kind in _THINKING:
            thinking.append(block)
    content: Any = texts[0] if len(texts) == 1 else [{"type": "text", "text": t} for t in texts]
    message: Message = {"role": "assistant", "content": content or (None if calls else "")}
    if calls:
        message["tool_calls"] = calls
    if thinking:
        message["thinking_blocks"] = thinking
    return message


def _plain(value: Any) -> Any:
    """A pydantic object (LiteLLM's and the SDK's types) as plain JSON data."""
    dump = getattr(value, "model_dump", None)
    return dump() if callable(dump) else value


def reply_message(response: Any) -> Message | None:
    """The assistant message of a whole Messages reply (a dict: LiteLLM 1.108.7 hands the
    post-call hook Anthropic's JSON as a dict), ``None`` without content blocks."""
    response = _plain(response)
    content = response.get("content") if isinstance(response, dict) else None
    if not isinstance(content, list):
        return None
    return assistant_chat(b for b in (_plain(c) for c in content) if isinstance(b, dict))


class StreamAccumulator:
    """Assembles a Messages event stream into one assistant message: text and thinking deltas
    joined, a thinking block's signature and a tool use's ``input`` (its JSON deltas) read when
    whole.

    Chunks are what the proxy's streaming iterator yields: on LiteLLM 1.108.7, bytes of the
    SSE stream as the provider sent them (an event may be cut across chunks, a character
    across bytes); parsed events (dicts) are read too.
    """

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._pending = ""
        self._blocks: dict[int, Block] = {}
        self._json: dict[int, list[str]] = {}

    def add(self, chunk: Any) -> None:
        if isinstance(chunk, bytes | bytearray | str):
            text = chunk if isinstance(chunk, str) else self._decoder.decode(bytes(chunk))
            self._pending += text.replace("\r\n", "\n")
            *events, self._pending = self._pending.split("\n\n")
            for event in events:
                self._event_text(event)
            return
        event = _plain(chunk)
        if isinstance(event, dict):
            self._event(event)

    def _event_text(self, text: str) -> None:
        data = "\n".join(
            line[5:].lstrip(" ") for line in text.split("\n") if line.startswith("data:")
        )
        if not data:
            return
        try:
            event = json.loads(data)
        except ValueError:
            return
        if isinstance(event, dict):
            self._event(event)

    def _event(self, event: dict[str, Any]) -> None:
        index = event.get("index")
        if not isinstance(index, int):
            return
        kind = event.get("type")
        if kind == "content_block_start" and isinstance(event.get("content_block"), dict):
            self._blocks[index] = dict(event["content_block"])
            return
        block = self._blocks.get(index)
        delta = event.get("delta")
        if kind != "content_block_delta" or block is None or not isinstance(delta, dict):
            return
        for key, field_name in (
            ("text", "text"),
            ("thinking", "thinking"),
            ("signature", "signature"),
        ):
            piece = delta.get(key)
            if isinstance(piece, str) and delta.get("type") == f"{key}_delta":
                block[field_name] = str(block.get(field_name) or "") + piece
        if delta.get("type") == "input_json_delta" and isinstance(delta.get("partial_json"), str):
            self._json.setdefault(index, []).append(delta["partial_json"])

    def message(self) -> Message:
        blocks: list[Block] = []
        for index in sorted(self._blocks):
            block = dict(self._blocks[index])
            if block.get("type") == "tool_use" and index in self._json:
                try:
                    block["input"] = json.loads("".join(self._json[index]) or "{}")
                except ValueError:
                    block["input"] = {}
            blocks.append(block)
        return assistant_chat(blocks)
