"""The recent window: the newest messages that fit a character and a message budget.

Pure functions. Rules (docs/design.md#the-prompt-and-the-window, docs/prompt.md#the-window):

* Walk back from the newest message; stop at the first unit that would pass ``max_chars``
  characters or ``max_messages`` messages. The new turn is always kept.
* A unit is one message, or a tool-call group: an assistant message with ``tool_calls`` and the
  ``tool`` messages answering each of its calls. A group is kept whole or dropped whole; a group
  missing a reply, and a ``tool`` message without its assistant ``tool_calls``, are dropped.
* The new turn is the client's: it reaches the model whole, whatever its size (a 200,000-character
  paste ending in a question arrives as sent, as it would without the hook). It
  counts against the budget, so a new turn over it leaves no room for history. The newest
  earlier message, when it alone does not fit the room left (and at least ``MIN_TAIL_CHARS`` are
  left), keeps its end (cut on a grapheme boundary); a reply so cut comes after its question,
  which must then fit whole with ``MIN_TAIL_CHARS`` of the reply.
* No stored message with empty text content is ever returned (an assistant message with
  ``tool_calls`` has ``content: None`` instead of ``""``).
* The client's own messages (``verbatim``: a whole-history client's history, and the new turn)
  are never changed or dropped while they fit: the model receives them as the client sent them
  (``content: ""`` stays ``""``, every field stays). Only trimming drops them, whole
  messages and whole tool groups: the oldest, and an exchange's oldest tool groups (below).
* The window starts with a user message (strict providers refuse an assistant message first):
  the assistant messages and tool groups before the first kept user message go too. So the
  window holds at most ``max_messages`` messages, one fewer when the budget cuts between a
  question and its reply, and only the new turn when no user message of the history fits. The
  client's own history (``verbatim``) that fits whole is sent as it is.
* When the budget cuts inside an exchange (the history that fits starts with replies or tool
  steps whose question does not fit: an agent's long episode, then a follow-up question), the
  exchange's question goes first, in place of as many of the exchange's oldest tool groups as
  it needs room for: the window keeps the task and its final reply rather than neither.
* A new turn that continues tool calls (it starts with the assistant's ``tool_calls`` or a
  ``tool`` result) is the end of an exchange that began with the last user message: that
  question and every message since go with the new turn and, like it, are never cut or dropped
  (an agent's task and its steps so far, whatever their size).

Trimmed in steps (:func:`fit_window` with ``positions``, ``start`` and ``low_water`` < 1): a
provider caches the longest prefix a prompt shares with a recent one, so the window's first
message should stay put. The window holds every message from its recorded ``start`` on while
they fit the budget; when they no longer fit, it is built again within ``low_water`` of the
budget (for example 60%) and its first message becomes the new start: it then stays the same
for the many turns it takes to fill the budget again. The budget still holds on every request.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
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
            group = [message]  # content as stored: "" stays ""
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


def _cut_to(message: Message, room: int, cuts: dict[int, int]) -> Message:
    """A stored message with its text cut to its last ``room`` characters (grapheme-safe),
    recorded in ``cuts``; the reasoning it carries (which counts in the budget too) is left
    out, as a cut reply's reasoning no longer goes with its text."""
    cut = {k: v for k, v in message.items() if k not in ("reasoning_content", "thinking_blocks")}
    cut["content"] = keep_tail(content_text(message.get("content")), room)
    cuts[id(cut)] = id(message)
    return cut


def _cut_newest(
    units: Sequence[list[Message]], room: int, slots: int, cuts: dict[int, int]
) -> list[list[Message]]:
    """The window's units, newest first, when the newest history message alone passes the
    ``room`` characters left: its end, cut to fit; a reply comes after its question, whole (a
    window starts with a user message), in the room the question leaves, in place of the tool
    steps between them. ``[]`` when that leaves less than ``MIN_TAIL_CHARS`` or the newest unit
    is a tool group."""
    newest = units[-1]
    if len(newest) != 1 or room < MIN_TAIL_CHARS:
        return []
    if newest[0].get("role") == "user":
        return [[_cut_to(newest[0], room, cuts)]]
    asked = len(units) - 2
    while asked >= 0 and units[asked][0].get("tool_calls"):
        asked -= 1  # the exchange's tool steps give way to its question
    question = units[asked] if asked >= 0 else []
    if slots < 2 or len(question) != 1 or question[0].get("role") != "user":
        return []
    left = room - message_chars(question[0])
    if left < MIN_TAIL_CHARS:
        return []
    return [[_cut_to(newest[0], left, cuts)], question]


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


@dataclass(frozen=True)
class Window:
    """A window and where its history came from.

    Attributes:
        messages: the window (:func:`build_window`).
        history_indices: for each message of ``messages`` taken from ``history``, its index
            there, in window order (not always a suffix: an exchange's question can come from
            before a cut).
        start: the position (``positions`` of :func:`fit_window`) of the window's first history
            message; ``0`` when unknown, or without ``positions``.
    """

    messages: list[Message]
    history_indices: tuple[int, ...]
    start: int = 0


def fit_window(
    history: Sequence[Message],
    new: Sequence[Message],
    *,
    max_chars: int,
    max_messages: int,
    verbatim: bool = False,
    positions: Sequence[int] = (),
    start: int = 0,
    low_water: float = 1.0,
) -> Window:
    """:func:`build_window` with the history index of each message it kept; trimmed in steps
    (module docstring) when ``positions`` are given and ``low_water`` < 1.

    Args:
        history / new / max_chars / max_messages / verbatim: as :func:`build_window`.
        positions: for each message of ``history``, a number that names it across requests and
            grows along the conversation (a stored turn's seq); ``0`` for one not known.
        start: the position the window started at since its last step (``0``: none yet).
        low_water: the share of both budgets a step cuts the window back to (0 < x <= 1).
    """
    stepped = bool(positions) and low_water < 1.0
    window = None
    if stepped and start > 0:
        held = _held(history, new, max_chars, max_messages, verbatim, positions, start)
        if held is not None:
            return held
        # over the budget: one step, back to the low-water mark; a window so small that the
        # mark leaves no history at all slides instead (the full budget, as without steps)
        low = _fit(
            history,
            new,
            max(1, int(max_chars * low_water)),
            max(1, int(max_messages * low_water)),
            verbatim,
        )
        window = low if _has_history(low, new) else None
    if window is None:
        window = _fit(history, new, max_chars, max_messages, verbatim)
    if stepped and window.history_indices:
        return replace(window, start=positions[window.history_indices[0]])
    return window


def _has_history(window: Window, new: Sequence[Message]) -> bool:
    """Whether a window holds any message besides the new turn."""
    return len(window.messages) > len(new)


def _held(
    history: Sequence[Message],
    new: Sequence[Message],
    max_chars: int,
    max_messages: int,
    verbatim: bool,
    positions: Sequence[int],
    start: int,
) -> Window | None:
    """The window of every history message from position ``start`` on, when all of them fit
    the budget (as :func:`_build` keeps them); ``None`` when they do not, or when no message
    has that position or a later one."""
    first = next((i for i, p in enumerate(positions) if p >= start), None)
    if first is None:
        return None
    window = _fit(history[first:], new, max_chars, max_messages, verbatim)
    wanted = next((i for i in range(first, len(history)) if history[i].get("role") == "user"), None)
    kept = [first + i for i in window.history_indices]
    if wanted is not None and (not kept or kept[0] != wanted or len(kept) != len(history) - wanted):
        return None  # something from the start on did not fit: time for a step
    return Window(window.messages, tuple(kept), start)


def _fit(
    history: Sequence[Message],
    new: Sequence[Message],
    max_chars: int,
    max_messages: int,
    verbatim: bool,
) -> Window:
    """:func:`build_window` with the history index of each message it kept."""
    cuts: dict[int, int] = {}
    messages = _build(history, new, max_chars, max_messages, verbatim, cuts)
    # The window's history is a subsequence of ``history`` (the same objects, or cut copies)
    # and comes before the new turn: matched in order, in one pass, so an object that history
    # holds twice is told apart by its place.
    indices: list[int] = []
    at = 0
    for message in messages:
        wanted = cuts.get(id(message), id(message))
        while at < len(history) and id(history[at]) != wanted:
            at += 1
        if at == len(history):
            break  # the new turn: nothing after it comes from history
        indices.append(at)
        at += 1
    return Window(messages, tuple(indices))


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
    return _build(history, new, max_chars, max_messages, verbatim, {})


def _build(
    history: Sequence[Message],
    new: Sequence[Message],
    max_chars: int,
    max_messages: int,
    verbatim: bool,
    cuts: dict[int, int],
) -> list[Message]:
    """:func:`build_window`; ``cuts`` gets ``id(cut copy) -> id(history message)`` for a
    message whose end was kept."""
    units = group_units(history, verbatim=verbatim)
    current = list(new)
    if current and current[0].get("role") in ("assistant", "tool"):
        # A tool continuation: the question it works on and the steps since go whole with it.
        asked = _last_question(units)
        if asked is not None:
            current = [m for unit in units[asked:] for m in unit] + current
            units = units[:asked]
    used_chars = sum(message_chars(m) for m in current)
    used_messages = len(current)
    picked: list[list[Message]] = []
    for unit in reversed(units):
        cost = sum(message_chars(m) for m in unit)
        if used_messages + len(unit) > max_messages:
            break
        if used_chars + cost > max_chars:
            if not picked and not verbatim:
                picked = _cut_newest(
                    units, max_chars - used_chars, max_messages - used_messages, cuts
                )
            break
        picked.append(unit)
        used_chars += cost
        used_messages += len(unit)
    kept_units = list(reversed(picked))
    if len(picked) < len(units):
        kept_units = _anchored(
            units, kept_units, max_chars - used_chars, max_messages - used_messages
        )
    kept = [m for unit in kept_units for m in unit]
    if len(picked) < len(units) or not verbatim:
        kept = _from_first_user(kept)
    return kept + current


def _anchored(
    units: Sequence[list[Message]],
    kept: Sequence[list[Message]],
    chars_left: int,
    messages_left: int,
) -> list[list[Message]]:
    """The kept units (a suffix of ``units``, oldest first) with their exchange's question put
    first when the budget cut inside that exchange: the kept history then starts with replies
    or tool steps whose question was trimmed (an agent's long episode, then a follow-up
    question). The question takes the room left and, when it needs more, the place of the
    oldest kept tool groups of the exchange, so the window keeps the task and its final reply
    instead of neither. Unchanged when the question does not fit even so, or only the
    question would be left."""
    lead = 0
    while lead < len(kept) and kept[lead][0].get("role") != "user":
        lead += 1
    asked = _last_question(units[: len(units) - len(kept)]) if lead else None
    if asked is None:
        return list(kept)
    question = units[asked]
    need_chars = sum(message_chars(m) for m in question) - chars_left
    need_messages = len(question) - messages_left
    steps = list(kept[:lead])
    dropped: set[int] = set()
    for index, unit in enumerate(steps):
        if need_chars <= 0 and need_messages <= 0:
            break
        if unit[0].get("tool_calls"):
            dropped.add(index)
            need_chars -= sum(message_chars(m) for m in unit)
            need_messages -= len(unit)
    if need_chars > 0 or need_messages > 0 or len(dropped) == lead:
        return list(kept)
    return [question, *(u for i, u in enumerate(steps) if i not in dropped), *kept[lead:]]


def _last_question(units: Sequence[list[Message]]) -> int | None:
    """The index of the last unit that is a user message; ``None`` when there is none."""
    for index in range(len(units) - 1, -1, -1):
        if units[index][0].get("role") == "user":
            return index
    return None


def _from_first_user(kept: list[Message]) -> list[Message]:
    """A window's history from its first user message on: Anthropic and Bedrock answer
    400 to a conversation whose first message is the assistant's ("first message must use the
    user role"; a field report of exactly this after trimming: mckaywrigley/chatbot-ui#1656),
    and an assistant reply or tool result whose question was trimmed away is half a turn. The
    same rule as LangChain's ``trim_messages(start_on="human")``."""
    for index, message in enumerate(kept):
        if message.get("role") == "user":
            return kept[index:]
    return []
