"""The recent window: the newest messages that fit a character and a message budget.

Pure functions. Rules (DESIGN.md section 5; cases C22, C24, C26):

* Walk back from the newest message; stop at the first unit that would pass ``max_chars``
  characters or ``max_messages`` messages. The new turn is always kept.
* A unit is one message, or a tool-call group: an assistant message with ``tool_calls`` and the
  ``tool`` messages answering each of its calls. A group is kept whole or dropped whole; a group
  missing a reply, and a ``tool`` message without its assistant ``tool_calls``, are dropped.
* The new turn is the client's: it reaches the model whole, whatever its size (a 200,000-character
  paste ending in a question arrives as sent, as it would without the hook; case C22 b). It
  counts against the budget, so a new turn over it leaves no room for history. The newest
  earlier message, when it alone does not fit the room left (and at least ``MIN_TAIL_CHARS`` are
  left), keeps its end (cut on a grapheme boundary).
* No stored message with empty text content is ever returned (an assistant message with
  ``tool_calls`` has ``content: None`` instead of ``""``).
* The client's own messages (``verbatim``: a whole-history client's history, and the new turn)
  are never changed or dropped while they fit: the model receives them as the client sent them
  (``content: ""`` stays ``""``, every field stays). Only trimming drops the oldest of them,
  whole tool groups at a time, and never leaves a ``tool`` message first.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from litellm_memory_hook.core.messages import (
    TEXT_PART_TYPES,
    content_text,
    is_blank,
    keep_tail,
    message_chars,
)

Message = dict[str, Any]

#: the least room worth filling with the end of a newest message that is over the budget.
MIN_TAIL_CHARS = 200


def group_units(messages: Sequence[Message], *, verbatim: bool = False) -> list[list[Message]]:
    """Group messages into window units, dropping broken tool groups and empty messages.

    Args:
        messages: oldest first.
        verbatim: the client's own messages: nothing is changed or dropped; a broken tool
            group becomes single-message units.

    Returns:
        Units oldest first; each unit is one message or one whole tool-call group.
    """
    if verbatim:
        return _verbatim_units(messages)
    units: list[list[Message]] = []
    i = 0
    while i < len(messages):
        message = messages[i]
        role = message.get("role")
        calls = message.get("tool_calls") if role == "assistant" else None
        if calls:
            wanted = {c.get("id") for c in calls if isinstance(c, dict)}
            group = [message]  # content as stored: "" stays "" (D01)
            j = i + 1
            answered: set[object] = set()
            while j < len(messages) and messages[j].get("role") == "tool":
                if messages[j].get("tool_call_id") in wanted:
                    group.append(messages[j])
                    answered.add(messages[j].get("tool_call_id"))
                j += 1
            if answered == wanted and None not in wanted:
                units.append(group)
            i = j
            continue
        if role != "tool" and not is_blank(content_text(message.get("content"))):
            units.append([message])
        i += 1
    return units


def _verbatim_units(messages: Sequence[Message]) -> list[list[Message]]:
    units: list[list[Message]] = []
    i = 0
    while i < len(messages):
        message = messages[i]
        calls = message.get("tool_calls") if message.get("role") == "assistant" else None
        j = i + 1
        if calls:
            while j < len(messages) and messages[j].get("role") == "tool":
                j += 1
        units.append(list(messages[i:j]))
        i = j
    return units


def _cut_to(message: Message, room: int) -> Message:
    """A stored message with its text cut to its last ``room`` characters (grapheme-safe)."""
    return {**message, "content": keep_tail(content_text(message.get("content")), room)}


def _text_only(content: object) -> str:
    if isinstance(content, list):
        return "\n".join(
            p["text"]
            for p in content
            if isinstance(p, dict)
            and p.get("type") in TEXT_PART_TYPES
            and isinstance(p.get("text"), str)
        )
    return content_text(content)


def build_window(
    history: Sequence[Message],
    new: Sequence[Message],
    *,
    max_chars: int,
    max_messages: int,
    verbatim: bool = False,
) -> list[Message]:
    """The messages sent after the system message: the fitting tail of history, then the new turn.

    Args:
        history: earlier messages, oldest first (stored turns or the client's own history).
        new: the new turn (usually one user message).
        max_chars: character budget of the whole window, new turn included (the new turn is
            never cut: only history gives way).
        max_messages: message budget of the whole window, new turn included.
        verbatim: ``history`` is the client's own (see the module docstring).

    Returns:
        A list of OpenAI messages, oldest first, that a strict provider accepts.
    """
    current = list(new)
    used_chars = sum(message_chars(m) for m in current)
    used_messages = len(current)
    picked: list[list[Message]] = []
    for unit in reversed(group_units(history, verbatim=verbatim)):
        cost = sum(message_chars(m) for m in unit)
        if used_messages + len(unit) > max_messages:
            break
        if used_chars + cost > max_chars:
            room = max_chars - used_chars
            if not picked and len(unit) == 1 and room >= MIN_TAIL_CHARS and not verbatim:
                picked.append([_cut_to(unit[0], room)])  # the newest message keeps its end
            break
        picked.append(unit)
        used_chars += cost
        used_messages += len(unit)
    kept = [m for unit in reversed(picked) for m in unit]
    while kept and kept[0].get("role") == "tool":
        kept.pop(0)  # never start with a tool result whose call was trimmed away
    return kept + current
