"""The character budgets of one request's prompt sections, and fitting text into them (pure).

:class:`Budget` holds the budgets (characters, and messages for the recent window);
:func:`fit_items` keeps the first items of a list that fit a section's budget, :func:`cut_start`
keeps the start of one text. A section never exceeds its budget: memory never grows without bound.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from litellm_memory_hook.core.messages import keep_head


@dataclass(frozen=True)
class Budget:
    """Budgets of one request, in characters unless named otherwise.

    Attributes:
        chars / messages: the recent window (8000 characters, 40 messages).
        pinned_chars: the ``<fixed_memories>`` section. Pinned memories come first and are never
            displaced by extracted ones; past this budget the newest pinned items are left out.
        memory_chars: the ``<memories>`` section (memory never grows without bound).
        summary_chars: the ``<summary>`` section (a longer summary keeps its start).
        persona_chars: each of ``<persona>`` and ``<custom_instructions>``.
    """

    chars: int = 8000
    messages: int = 40
    pinned_chars: int = 2000
    memory_chars: int = 3000
    summary_chars: int = 2000
    persona_chars: int = 2000


def fit_items(items: Sequence[str], budget: int, max_items: int = 100) -> tuple[str, ...]:
    """The first items, in order, whose characters add up to at most ``budget``.

    Blank items are skipped. An item longer than the whole budget is cut to it (keeping its
    start, with ``…``) when it is the first one; otherwise the walk stops at the first item that
    does not fit, so the section never exceeds its budget.
    """
    kept: list[str] = []
    used = 0
    for item in items:
        text = item.strip()
        if not text:
            continue
        if len(kept) >= max_items:
            break
        if used + len(text) > budget:
            if not kept and budget > 1:
                kept.append(keep_head(text, budget))
            break
        kept.append(text)
        used += len(text)
    return tuple(kept)


def cut_start(text: str, budget: int) -> str:
    """``text`` within ``budget`` characters: itself when it fits, else its start ending with
    ``…`` (:func:`~litellm_memory_hook.core.messages.keep_head`), or ``""`` for a budget under 2."""
    if len(text) <= budget:
        return text
    return keep_head(text, budget) if budget >= 2 else ""
