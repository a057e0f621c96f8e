"""Putting the request back together: the client's messages, in the client's order, plus memory.

Pure functions. The first rule of the hook: for everything the client sent, the model receives
what it would have received without the hook, plus memory. So:

* the client's leading system / developer messages stay as sent (role, content form, parts and
  their ``cache_control``, every other field), in place; the alias's rules (``system_prompt``)
  and the memory block join the FIRST of them: for string content, ``rules`` + the client's
  text + the memory block, separated by blank lines; for a list of parts, a text part with the
  rules first, the client's parts as sent, then one text part with the memory block. The
  rules and the client's prompt form a stable prefix, so a provider's prompt cache of them
  keeps working; only the memory block after them changes from request to request;
* with no leading system message, one system message is put first (rules, then memory);
* system / developer messages placed later stay where the client put them;
* a block that an earlier request injected and the client echoed back (our ``<memory_context>``
  and ``<memory_reminder>``) is removed, with the alias rules it repeats;
* the cache layout's volatile tail (recalled lines, the date, the reminder) goes just before
  the user's last message: as a system message of its own where the provider takes system
  messages anywhere, or as a leading data part of that message where the provider moves every
  system message to the top (``tail_in_user``): a string content gets the tail and a blank
  line before it, a list of parts a text part first. When the window does not end with a user
  message (an agent's tool results), the tail ends the system message instead, or, where the
  protocol asks for it (``tail_after_tools``: Anthropic Messages), follows the results as a
  user message.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from litellm_memory_hook.core.messages import TEXT_PART_TYPES, is_valid_request
from litellm_memory_hook.core.prompt import strip_injected

Message = dict[str, Any]


def _paragraphs(text: str) -> list[str]:
    return [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()]


def _without_echo(text: str, known: str, rules: str = "") -> str:
    """``text`` without our injected blocks; when it had one (an echo of what we sent), also
    without paragraphs that repeat ``known`` (the alias rules, the client's own prompt). A text
    that holds the alias ``rules`` and nothing but paragraphs of ``known`` is an echo too (the
    cache layout's head carries no block when there is no memory yet), and goes whole."""
    cleaned = strip_injected(text)
    seen = set(_paragraphs(known))
    if cleaned.strip() == text.strip():
        paragraphs = _paragraphs(text)
        ours = set(_paragraphs(rules))
        if ours and ours & set(paragraphs) and all(p in seen for p in paragraphs):
            return ""
        return text  # nothing of ours in it: kept exactly, white space included
    kept = [p for p in _paragraphs(cleaned) if p not in seen]
    return "\n\n".join(kept)


def clean_lead(lead: Sequence[Message], rules: str, ours: str = "") -> list[Message]:
    """System messages with echoed blocks removed (and the paragraphs of ``rules`` they echo),
    and those that echo nothing but ``rules`` and paragraphs of ``ours`` (the alias rules) are
    dropped; a message that held nothing else is dropped, a text part that held nothing else
    too; other messages are kept as they are."""
    out: list[Message] = []
    for message in lead:
        if message.get("role") not in ("system", "developer"):
            out.append(message)
            continue
        content = message.get("content")
        if isinstance(content, str):
            cleaned = _without_echo(content, rules, ours)
            if cleaned == content:
                out.append(message)
            elif cleaned:
                out.append({**message, "content": cleaned})
        elif isinstance(content, list):
            parts: list[Any] = []
            for part in content:
                if isinstance(part, dict) and part.get("type") in TEXT_PART_TYPES:
                    text = part.get("text")
                    if isinstance(text, str):
                        cleaned = _without_echo(text, rules, ours)
                        if cleaned != text:
                            if cleaned:
                                parts.append({**part, "text": cleaned})
                            continue
                parts.append(part)
            if parts:
                out.append(message if parts == content else {**message, "content": parts})
        else:
            out.append(message)
    return out


def _join(*texts: str) -> str:
    return "\n\n".join(t for t in texts if t.strip())


def merge_into_system(lead: Sequence[Message], rules: str, memory_block: str) -> list[Message]:
    """The leading system messages with the rules and the memory block joined to the first
    (module docstring); ``[]`` when there is nothing at all to send."""
    if not lead:
        text = _join(rules, memory_block)
        return [{"role": "system", "content": text}] if text else []
    first, rest = dict(lead[0]), list(lead[1:])
    content = first.get("content")
    if isinstance(content, list):
        parts: list[Any] = []
        if rules.strip():
            parts.append({"type": "text", "text": rules})
        parts.extend(content)
        if memory_block.strip():
            parts.append({"type": "text", "text": memory_block})
        first["content"] = parts
    else:
        first["content"] = _join(rules, content if isinstance(content, str) else "", memory_block)
    return [first, *rest]


def assemble(
    lead: Sequence[Message],
    window: Sequence[Message],
    *,
    rules: str,
    memory_block: str,
    tail: str = "",
    tail_in_user: bool = False,
    tail_after_tools: bool = False,
) -> list[Message]:
    """The messages sent to the model: the lead (rules and memory joined to its first message),
    then the window as built (history and the new turn, in the client's order), with the tail
    before the user's last message (module docstring).

    Args:
        lead: the client's leading system / developer messages, as sent.
        window: the recent window (:func:`litellm_memory_hook.core.window.build_window`).
        rules: the alias's ``system_prompt`` ("" for none).
        memory_block: the memory sections (and, in the seed layout, the final reminder:
            :func:`litellm_memory_hook.core.prompt.build_system_message` without rules).
        tail: the cache layout's volatile tail ("" for none).
        tail_in_user: put the tail in the last user message, not in a system message.
        tail_after_tools: with ``tail_in_user``, a window that ends with tool results gets
            the tail as a user message after them, not at the end of the system message (an
            API with one system prompt at the top, whose user message holds the results:
            the head stays the same while an agent works).
    """
    cleaned_lead = clean_lead(lead, rules)
    known = "\n\n".join(
        [rules, *(str(m.get("content")) for m in cleaned_lead if isinstance(m.get("content"), str))]
    )
    messages = clean_lead(window, known, rules)
    if tail.strip():
        last = messages[-1].get("role") if messages else None
        if last == "user":
            if tail_in_user:
                messages[-1] = _with_leading_data(messages[-1], tail)
            else:
                messages.insert(len(messages) - 1, {"role": "system", "content": tail})
        elif last == "tool" and tail_in_user and tail_after_tools:
            messages.append({"role": "user", "content": tail})
        else:
            memory_block = _join(memory_block, tail)
    return [*merge_into_system(cleaned_lead, rules, memory_block), *messages]


def _with_leading_data(message: Message, data: str) -> Message:
    """A user message with ``data`` before what the user wrote: a text part first for a list
    of parts, else ``data``, a blank line and the text."""
    content = message.get("content")
    if isinstance(content, list):
        return {**message, "content": [{"type": "text", "text": data}, *content]}
    text = content if isinstance(content, str) else ""
    return {**message, "content": _join(data, text) if text else data}


def with_rules(raw_messages: object, rules: str) -> object:
    """A request's messages with only the alias's rules added (no memory): for requests that get
    no memory (memory off, no user id, side requests), the alias's rules still apply. A body
    that is not a valid list of messages (:func:`is_valid_request`) is returned as it is (the
    proxy judges it as the client sent it)."""
    if not (rules.strip() and isinstance(raw_messages, list) and is_valid_request(raw_messages)):
        return raw_messages
    messages: list[Message] = raw_messages
    end = 0
    while end < len(messages) and messages[end].get("role") in ("system", "developer"):
        end += 1
    lead = clean_lead(messages[:end], rules)
    return [*merge_into_system(lead, rules, ""), *messages[end:]]
