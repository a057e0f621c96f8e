"""How an extraction job's reply becomes bounded changes of the memory set (pure functions).

The rules, whatever the reply's shape (:func:`plan_changes`):

* A memory is removed only by an explicit change: an update (its new text replaces it) or a
  delete that gives the fact contradicting it, in the operations shape; in the list shape
  (``{"memories": [...]}``, the model's whole updated list), a new text that rewrites a shown
  memory the list left out (:func:`rewrites`: it holds at least half of that memory's words)
  is an update of it. A memory the reply leaves out, or names in a delete without a reason, is
  kept: an empty or short list deletes nothing.
* One job removes at most ``extraction.max_removed_share`` of the set it read (rounded down),
  and at least 1 when the reply explicitly updates or deletes a fact
  (:func:`removal_budget`); updates come first, then deletes, then the oldest memories that
  make room past ``memories.max_items`` for new ones. What is over the bound is kept (an update over
  it is dropped whole: its new text is not added beside the old one), and counted.
* Every removed memory becomes a history entry (:func:`history_entries`), restorable.

The summary (:func:`summary_refusal`): a new summary that reads as an instruction to the
assistant (:func:`~litellm_memory_hook.extraction.instructions.is_instruction`), or that keeps
less than ``summary.min_kept_share`` of the old one's facts (:func:`kept_share`), is not
taken: the old one stays.

Counters (``mem:stats``): ``deletes_refused`` (removals asked for, or left out of a list, and
not done), ``summaries_refused``, ``dropped_over_cap`` (new memories with no room within the
bound).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from litellm_memory_hook.core.recall import capitalised_words, inner_names, tokenize
from litellm_memory_hook.extraction.instructions import is_instruction
from litellm_memory_hook.extraction.parse import (
    ExtractionResult,
    MemoryUpdate,
    fact_hash,
    fact_key,
    repeats_pinned,
)
from litellm_memory_hook.settings import MemorySettings
from litellm_memory_hook.store.memory_history import BY_CHARS, HistoryEntry, new_entry_id
from litellm_memory_hook.store.memory_sets import MemoryItem, MemorySetState

logger = logging.getLogger("litellm_memory_hook")

#: words nearly every memory holds ("User's sister ..."): a rewrite is never found on them.
GENERIC_WORDS = frozenset({"user", "users"})
#: an old summary with fewer facts than this (weighted, see :func:`summary_facts`) may be
#: replaced by any summary.
MIN_SUMMARY_FACTS = 5


@dataclass(frozen=True)
class Removal:
    """A memory one job removes: ``reason`` is ``update``, ``delete`` or ``cap``; ``by`` is
    the new text, the contradicting fact, or the new memory it made room for."""

    item: MemoryItem
    reason: str
    by: str


@dataclass(frozen=True)
class ChangePlan:
    """What a job writes to the memory set.

    Attributes:
        delete_ids: ids of the removed memories, in the order of ``removed``.
        add: new memory texts, in reply order (updates' new texts first).
        removed: every removed memory, why and by what.
        refused: removals the reply asked for (or, in the list shape, memories it left out)
            that are not done.
        over_cap: new memories not added: the set was full and the bound left no room.
    """

    delete_ids: list[str]
    add: list[str]
    removed: list[Removal]
    refused: int = 0
    over_cap: int = 0


@dataclass(frozen=True)
class _Request:
    item: MemoryItem
    reason: str
    by: str
    add: str | None  # the text that replaces it (None: a delete, or merged into a stored one)


def removal_budget(set_size: int, share: float, *, explicit: bool) -> int:
    """Most memories one job may remove from a set of ``set_size``: ``share`` of it rounded
    down, at least 1 when the reply explicitly updates or deletes a fact."""
    allowed = math.floor(set_size * share + 1e-9)
    return max(allowed, 1) if explicit else allowed


def _words(text: str) -> frozenset[str]:
    return frozenset(tokenize(text)) - GENERIC_WORDS


def rewrites(new: str, old: str) -> float:
    """How much of ``old`` a new text keeps: the share of ``old``'s words (recall's words:
    stopwords and "user" left out) that ``new`` holds; 0.0 when ``old`` has none."""
    old_words = _words(old)
    if not old_words:
        return 0.0
    return len(old_words & _words(new)) / len(old_words)


def _listed(
    shown: Sequence[MemoryItem], stored: dict[str, MemoryItem], memories: Sequence[str]
) -> tuple[list[_Request], list[str], int]:
    """The list shape: kept, rewritten (an update) and new memories; the left-out ones stay."""
    kept = {stored[k].id for k in (fact_key(t) for t in memories) if k in stored}
    left_out = [m for m in shown if m.id not in kept]
    requests: list[_Request] = []
    adds: list[str] = []
    for text in memories:
        if fact_key(text) in stored:
            continue
        scored = [(rewrites(text, m.text), -i) for i, m in enumerate(left_out)]
        best = max(scored, default=(0.0, 0))
        if best[0] >= 0.5:
            old = left_out.pop(-best[1])
            requests.append(_Request(old, "update", text, text))
        else:
            adds.append(text)
    return requests, adds, len(left_out)


def _operations(
    stored: dict[str, MemoryItem], result: ExtractionResult
) -> tuple[list[_Request], list[str], int]:
    """The operations shape: updates and deletes of stored memories, and adds."""
    requests: list[_Request] = []
    adds: list[str] = []
    refused = 0
    taken: set[str] = set()
    for update in result.updates:
        item = stored.get(fact_key(update.old))
        new_key = fact_key(update.new)
        if item is None or item.id in taken:  # names no stored memory: a new fact
            if new_key not in stored:
                adds.append(update.new)
            continue
        if new_key == fact_key(item.text):
            continue  # unchanged
        taken.add(item.id)
        # merged into a stored memory: the old one goes, nothing is added
        requests.append(
            _Request(item, "update", update.new, None if new_key in stored else update.new)
        )
    adds.extend(t for t in result.memories if fact_key(t) not in stored)
    for delete in result.deletes:
        item = stored.get(fact_key(delete.old))
        if item is None or item.id in taken:
            continue
        if not delete.because:
            refused += 1  # a delete must give the fact that contradicts the memory
            continue
        taken.add(item.id)
        requests.append(_Request(item, "delete", delete.because, None))
    return requests, adds, refused


def plan_changes(
    shown: Sequence[MemoryItem],
    others: Sequence[MemoryItem],
    result: ExtractionResult,
    *,
    max_memories: int,
    max_removed_share: float,
) -> ChangePlan:
    """The bounded changes of the memory set that a job's cleaned reply asks for.

    Args:
        shown: the stored memories the model was shown (oldest first).
        others: the set's other stored memories (kept as they are unless room is made).
        result: the cleaned reply (:func:`~litellm_memory_hook.extraction.parse.parse_extraction`).
        max_memories: most memories the set keeps.
        max_removed_share: most of the set one job removes (0 to 1), see
            :func:`removal_budget`.

    Returns:
        The plan (see the module docstring for the rules). A text equal (by :func:`fact_key`)
        to a stored memory is never added again, and an unchanged fact keeps its id.
    """
    stored: dict[str, MemoryItem] = {}
    for item in (*shown, *others):
        stored.setdefault(fact_key(item.text), item)
    if result.listed:
        requests, adds, refused = _listed(shown, stored, result.memories)
    else:
        requests, adds, refused = _operations(stored, result)
    size = len(shown) + len(others)
    budget = removal_budget(size, max_removed_share, explicit=bool(requests))
    removed: list[Removal] = []
    add: list[str] = []
    for request in requests:
        if len(removed) >= budget:
            refused += 1
            continue
        removed.append(Removal(request.item, request.reason, request.by))
        if request.add is not None:
            add.append(request.add)
    gone = {r.item.id for r in removed}
    oldest = sorted(i.id for i in (*shown, *others) if i.id not in gone)
    by_id = {i.id: i for i in (*shown, *others)}
    over_cap = 0
    for text in adds:
        if size - len(removed) + len(add) < max_memories:
            add.append(text)
        elif oldest and len(removed) < budget:
            removed.append(Removal(by_id[oldest.pop(0)], "cap", text))
            add.append(text)
        else:
            over_cap += 1
    return ChangePlan([r.item.id for r in removed], add, removed, refused, over_cap)


def filter_again(result: ExtractionResult, state: MemorySetState) -> ExtractionResult:
    """The reply without the new texts the user pinned (by the rule of
    :func:`~litellm_memory_hook.extraction.parse.repeats_pinned`, as the parser drops them) or
    deleted since the job read; an update whose new text goes is dropped whole."""
    pinned = frozenset(k for k in (fact_key(p.text) for p in state.pinned) if k)

    def keeps(text: str) -> bool:
        return fact_hash(text) not in state.tombs and not repeats_pinned(fact_key(text), pinned)

    updates: tuple[MemoryUpdate, ...] = tuple(u for u in result.updates if keeps(u.new))
    return replace(result, memories=tuple(m for m in result.memories if keeps(m)), updates=updates)


# -- the summary ---------------------------------------------------------------------------------


def summary_facts(text: str) -> dict[str, int]:
    """The facts of a summary as weighted words: its distinct words as recall finds them
    (stopwords left out), each weighing 1, and its names (words capitalised inside a sentence)
    weighing 2."""
    names = {n for n in inner_names(text) if len(n) >= 2}
    facts = dict.fromkeys(tokenize(text), 1)
    facts.update(dict.fromkeys(names, 2))
    return facts


def kept_share(old: str, new: str) -> float:
    """The weighted share of the old summary's facts (:func:`summary_facts`) that the new one
    holds (as a word, or a capitalised word anywhere); 1.0 when the old one has none."""
    facts = summary_facts(old)
    total = sum(facts.values())
    if not total:
        return 1.0
    present = set(tokenize(new)) | capitalised_words(new)
    return sum(w for word, w in facts.items() if word in present) / total


def summary_refusal(old: str, new: str | None, *, min_kept: float) -> str | None:
    """Why a job's new summary is not taken, or ``None`` when it is.

    Returns:
        ``"instruction"`` when it reads as an instruction to the assistant (as a memory that
        does is dropped); ``"lost_facts"`` when the old summary holds at least
        :data:`MIN_SUMMARY_FACTS` weighted facts and the new one keeps less than ``min_kept``
        of them (:func:`kept_share`; 0 turns this off). ``None`` for ``new`` ``None`` (the
        stored summary stays anyway) or equal to ``old``.
    """
    if new is None or new == old:
        return None
    if new and is_instruction(new):
        return "instruction"
    weighed = min_kept > 0 and sum(summary_facts(old).values()) >= MIN_SUMMARY_FACTS
    return "lost_facts" if weighed and kept_share(old, new) < min_kept else None


# -- one job's changes ---------------------------------------------------------------------------


@dataclass(frozen=True)
class JobChanges:
    """A job's bounded changes: the plan, the summary to write (``None``: keep the stored one)
    and why the reply's summary was refused (``None`` when it was not)."""

    plan: ChangePlan
    summary: str | None
    summary_refused: str | None

    def counters(self) -> dict[str, int]:
        """The ``mem:stats`` counters of the job once it is committed."""
        return {
            "deletes_refused": self.plan.refused,
            "summaries_refused": int(self.summary_refused is not None),
            "dropped_over_cap": self.plan.over_cap,
            "memories_removed": len(self.plan.removed),
        }

    def log(self, ref: str) -> None:
        """One info line when the job's reply asked for more than it was given."""
        if self.plan.refused or self.summary_refused:
            logger.info(
                "memory worker: %s kept %d memories the reply would have removed (bound or no "
                "explicit change)%s",
                ref,
                self.plan.refused,
                f"; its summary was refused ({self.summary_refused})"
                if self.summary_refused
                else "",
            )


def guarded_changes(
    shown: Sequence[MemoryItem],
    others: Sequence[MemoryItem],
    result: ExtractionResult,
    *,
    old_summary: str,
    settings: MemorySettings,
) -> JobChanges:
    """:func:`plan_changes` and :func:`summary_refusal` with the settings' bounds (CPU work
    linear in the shown memories and the summaries: the worker runs it off the event loop)."""
    plan = plan_changes(
        shown,
        others,
        result,
        max_memories=settings.memories.max_items,
        max_removed_share=settings.extraction.max_removed_share,
    )
    refusal = summary_refusal(old_summary, result.summary, min_kept=settings.summary.min_kept_share)
    return JobChanges(plan, None if refusal else result.summary, refusal)


def history_entries(
    plan: ChangePlan, *, conversation: str, from_seq: int, through_seq: int, now_ms: int
) -> list[str]:
    """The stored history entries of a plan's removed memories, in removal order
    (:class:`~litellm_memory_hook.store.memory_history.HistoryEntry`)."""
    return [
        HistoryEntry(
            id=new_entry_id(now_ms + offset),
            memory_id=removal.item.id,
            text=removal.item.text,
            removed_ms=now_ms,
            reason=removal.reason,
            by=removal.by[:BY_CHARS],
            conversation=conversation,
            from_seq=from_seq,
            through_seq=through_seq,
        ).encode()
        for offset, removal in enumerate(plan.removed)
    ]
