"""Anthropic's rules for a Messages request's ``messages`` (the 400s its API answers), and the
shape the memory hook reads: pure functions, used by :mod:`.anthropic_messages` on the client's
request (one it does not read passes through as sent) and on the request it writes back."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

Block = dict[str, Any]


def _valid_block(block: object, role: str) -> bool:
    """A block of the shape Anthropic takes (the fields the hook reads are of the right type)."""
    if not isinstance(block, dict) or not isinstance(block.get("type"), str):
        return False
    kind = block["type"]
    if kind == "text":
        return isinstance(block.get("text"), str) and bool(block["text"])
    if kind == "tool_use":
        return (
            role == "assistant"
            and isinstance(block.get("id"), str)
            and isinstance(block.get("name"), str)
            and isinstance(block.get("input"), dict)
        )
    if kind == "tool_result":
        content = block.get("content")
        return (
            role == "user"
            and isinstance(block.get("tool_use_id"), str)
            and (content is None or isinstance(content, str) or _blocks(content, "tool"))
        )
    if kind == "thinking":
        return isinstance(block.get("thinking"), str) and isinstance(block.get("signature"), str)
    if kind == "redacted_thinking":
        return isinstance(block.get("data"), str)
    if kind in ("image", "document"):
        return isinstance(block.get("source"), dict)
    return True


def _blocks(content: object, role: str) -> bool:
    return isinstance(content, list) and all(_valid_block(b, role) for b in content)


def content_blocks(message: Mapping[str, Any]) -> list[Block]:
    """A message's content as blocks (a string is one text block)."""
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def rule_problem(messages: object) -> str | None:
    """The first of Anthropic's rules the messages break, ``None`` when they keep them all: a
    non-empty list of ``user``/``assistant`` messages, the first a user's, no empty text, each
    ``tool_result`` answering a ``tool_use`` of the message just before and each ``tool_use``
    answered in the message just after, a user message's results before its other blocks."""
    if not isinstance(messages, list) or not messages:
        return "no messages"
    for message in messages:
        if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
            return "a message that is not a user's or an assistant's"
        content = message.get("content")
        if not (isinstance(content, str) and content) and not _blocks(content, message["role"]):
            return "a content that is not a non-empty string or valid blocks"
    if messages[0]["role"] != "user":
        return "the first message is not a user's"
    open_ids: set[str] = set()
    for message in messages:
        blocks = content_blocks(message)
        kinds = [b.get("type") for b in blocks]
        results = {str(b.get("tool_use_id")) for b in blocks if b.get("type") == "tool_result"}
        if results != open_ids and (results or open_ids):
            return "tool_use and tool_result blocks that do not pair"
        if "tool_result" in kinds and kinds[: len(results)] != ["tool_result"] * len(results):
            return "tool_result blocks after other blocks"
        open_ids = {str(b["id"]) for b in blocks if b.get("type") == "tool_use"}
    return "a tool_use without its result" if open_ids else None


def valid_request(data: Mapping[str, Any]) -> bool:
    """True when the hook reads the request: Anthropic's rules kept (:func:`rule_problem`),
    ``system`` absent, a string or text blocks, ``metadata`` absent or an object."""
    system = data.get("system")
    texts = isinstance(system, list) and all(
        isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
        for b in system
    )
    if not (system is None or isinstance(system, str) or texts):
        return False
    metadata = data.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        return False
    return isinstance(data.get("model"), str) and rule_problem(data.get("messages")) is None
