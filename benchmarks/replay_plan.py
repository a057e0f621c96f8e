"""How ``bench extraction`` replays a LoCoMo conversation: the requests (:class:`Step`) a client
that sends only the new message makes, lines never joined (the rules are in
:mod:`benchmarks.extraction`'s docstring, step 2)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from benchmarks.evidence import evidence_ids
from litellm_memory_hook.tools.histories import History, HistoryLine


@dataclass(frozen=True)
class Step:
    """One chat request of the replay.

    Attributes:
        before: assistant lines with no user line before them, sent as client history (see
            :mod:`benchmarks.extraction`); usually empty.
        users: the user lines sent as the new message(s).
        reply: the assistant line the stand-in answers with; ``None``: an empty reply (the
            conversation ends with user lines; an empty reply is not stored).
    """

    before: tuple[HistoryLine, ...]
    users: tuple[HistoryLine, ...]
    reply: HistoryLine | None

    @property
    def lines(self) -> tuple[HistoryLine, ...]:
        """The dataset lines this request stores, in order."""
        return (*self.before, *self.users, *((self.reply,) if self.reply else ()))


def plan_steps(lines: Sequence[HistoryLine]) -> tuple[list[Step], list[HistoryLine]]:
    """Group a conversation's lines into requests (rules in :mod:`benchmarks.extraction`).

    Returns:
        The requests, and the lines that cannot be sent (blank lines, and assistant lines after
        the last user line with no reply before them).
    """
    steps: list[Step] = []
    skipped: list[HistoryLine] = []
    before: list[HistoryLine] = []
    users: list[HistoryLine] = []
    for line in lines:
        if not line.text.strip():
            skipped.append(line)
        elif line.role == "user":
            users.append(line)
        elif users:
            steps.append(Step(tuple(before), tuple(users), line))
            before, users = [], []
        else:
            before.append(line)
    if users:
        steps.append(Step(tuple(before), tuple(users), None))
    else:
        skipped.extend(before)
    return steps, skipped


def replayed_part(history: History, steps: Sequence[Step]) -> History:
    """``history`` cut to the lines of ``steps``, with the questions whose evidence lies
    within them."""
    ids = {line.line_id for step in steps for line in step.lines}
    qa = tuple(q for q in history.qa if q.evidence and set(evidence_ids(q.evidence)) <= ids)
    lines = tuple(line for line in history.lines if line.line_id in ids)
    return dataclasses.replace(history, lines=lines, qa=qa)


def step_messages(step: Step, previous: Step | None) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    if step.before and previous is not None:
        # the last stored exchange exactly as stored, so the hook aligns the client's history
        for line in previous.lines:
            messages.append(message(line))
    messages.extend(message(line) for line in step.before)
    messages.extend(message(line) for line in step.users)
    return messages


def message(line: HistoryLine) -> dict[str, Any]:
    if line.role == "user":
        return {"role": "user", "content": line.text, "name": line.speaker}
    return {"role": "assistant", "content": line.text}


__all__ = ["Step", "message", "plan_steps", "replayed_part", "step_messages"]
