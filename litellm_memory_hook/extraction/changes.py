"""How an extraction job's reply becomes changes of the memory set (pure functions)."""

from __future__ import annotations

from collections.abc import Sequence

from litellm_memory_hook.extraction.parse import (
    ExtractionResult,
    fact_hash,
    fact_key,
    repeats_pinned,
)
from litellm_memory_hook.store.memory_sets import MemoryItem, MemorySetState


def plan_commit(
    shown: Sequence[MemoryItem],
    others: Sequence[MemoryItem],
    result_memories: Sequence[str],
    *,
    max_memories: int,
) -> tuple[list[str], list[str]]:
    """The ids to delete and the texts to add so that the shown memories become the model's list.

    Rules: a returned text equal (by :func:`fact_key`) to a shown memory keeps that memory (its
    id and creation time; an unchanged fact is a no-op, case C18); a shown memory the model did
    not return is deleted (changed or merged); a returned text equal to a memory that was not
    shown is not added again; the rest is added. Past ``max_memories`` the oldest memories are
    deleted.

    Returns:
        (ids to delete, texts to add), both in stored / reply order.
    """
    shown_by_key: dict[str, MemoryItem] = {}
    for item in shown:
        shown_by_key.setdefault(fact_key(item.text), item)
    other_keys = {fact_key(item.text) for item in others}
    kept: set[str] = set()
    add: list[str] = []
    for text in result_memories:
        key = fact_key(text)
        if key in shown_by_key:
            kept.add(shown_by_key[key].id)
        elif key not in other_keys:
            add.append(text)
            other_keys.add(key)
    delete = [item.id for item in shown if item.id not in kept]
    remaining = sorted([i.id for i in shown if i.id in kept] + [i.id for i in others])
    excess = len(remaining) + len(add) - max_memories
    if excess > 0:
        delete.extend(remaining[:excess])
        if excess > len(remaining):
            add = add[: max(0, max_memories)]
    return delete, add


def filter_again(result: ExtractionResult, state: MemorySetState) -> list[str]:
    """The model's memories without those the user pinned (by the rule of
    :func:`~litellm_memory_hook.extraction.parse.repeats_pinned`, as the parser drops them) or
    deleted since the job read."""
    pinned = frozenset(k for k in (fact_key(p.text) for p in state.pinned) if k)
    return [
        m
        for m in result.memories
        if fact_hash(m) not in state.tombs and not repeats_pinned(fact_key(m), pinned)
    ]
