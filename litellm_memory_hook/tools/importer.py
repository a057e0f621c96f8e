"""Bulk-loading an existing chat history into a conversation, with its real timestamps."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from itertools import pairwise

from redis.exceptions import RedisError

from litellm_memory_hook.core.indexing import indexed_chain
from litellm_memory_hook.core.models import Turn
from litellm_memory_hook.engine.identity import Identity
from litellm_memory_hook.errors import StoreError
from litellm_memory_hook.settings import WriteBufferSettings
from litellm_memory_hook.store.forgets import forget_token_ttl_s, refuse_earlier_writes
from litellm_memory_hook.store.queue import ExtractionQueue
from litellm_memory_hook.store.redis_store import MemoryStore, now_ms
from litellm_memory_hook.store.retention import trim_oldest
from litellm_memory_hook.tools.histories import History, HistoryLine, SkippedLine

BATCH_TURNS = 250


#: how long the forget token of a fresh import is kept (the default outage buffer's age limit
#: plus the margin: :func:`~litellm_memory_hook.store.forgets.forget_token_ttl_s`).
DEFAULT_TOKEN_TTL_S = forget_token_ttl_s(WriteBufferSettings.model_fields["max_age_s"].default)


@dataclass(frozen=True)
class ImportResult:
    """Turns written by this import and the seq range they got (0, 0 when none), and how many
    of the oldest stored turns were deleted after it to keep ``storage.max_messages``."""

    turns: int
    first_seq: int
    last_seq: int
    trimmed: int = 0
    #: the file's oldest lines left out to keep ``storage.max_messages``
    left_out: int = 0


def line_to_turn(line: HistoryLine, max_chars: int = 32_000) -> Turn | None:
    """The stored turn of an imported line (``None`` for blank text)."""
    from litellm_memory_hook.core.messages import is_blank, keep_tail

    if is_blank(line.text):
        return None
    return Turn(
        role=line.role,
        text=keep_tail(line.text, max_chars),
        ts_ms=line.ts_ms,
        name=line.speaker,
    )


def importable(history: History) -> tuple[list[HistoryLine], tuple[SkippedLine, ...]]:
    """The lines of ``history`` that give a turn, and every line left out: those the reader
    skipped, then those whose text is blank (``no text``; kept by the LoCoMo reader for the
    benchmarks)."""
    from litellm_memory_hook.core.messages import is_blank

    lines = [line for line in history.lines if not is_blank(line.text)]
    blank = tuple(
        SkippedLine(line.line_id or "?", "no text") for line in history.lines if is_blank(line.text)
    )
    return lines, history.skipped + blank


async def delete_conversation(
    store: MemoryStore, who: Identity, *, token_ttl_s: int = DEFAULT_TOKEN_TTL_S
) -> None:
    """Remove every key of a conversation and its entry in the user index (``import
    --fresh``), after a forget token for it (:func:`~litellm_memory_hook.store.forgets.
    refuse_earlier_writes`, kept ``token_ttl_s``): a request that read the conversation before
    writes nothing into the imported one.

    Raises:
        StoreError: Redis failed.
    """
    await refuse_earlier_writes(store.redis, who.keys.user_keys, who.keys, ttl_s=token_ttl_s)
    try:
        await store.redis.delete(*who.keys.all())
        await store.redis.srem(who.keys.user_keys.index, who.keys.index_member)
    except RedisError as exc:
        raise StoreError(f"delete {who.keys.ref}: {exc}") from exc


def unstored_turns(
    lines: Sequence[HistoryLine],
    stored: Iterable[Turn],
    *,
    max_chars: int = 32_000,
    trimmed: bool = False,
) -> list[Turn]:
    """The turns of ``lines`` that are not stored yet, in the lines' order.

    Matching rule (on the turn as it would be stored: text cut to ``max_chars``, blank lines
    dropped). Each stored turn accounts for at most one line, so the same turn twice in a file
    needs two stored turns to count as stored:

    1. Dated lines (the source gave the time: every LoCoMo line, a jsonl line with ``ts``), in
       file order: a line is stored when a stored turn not yet taken has the same role,
       timestamp and text; it takes that turn.
    2. Undated lines (a jsonl line without ``ts``, whose time the reader makes up anew on each
       read), in file order: a line is stored when a stored turn not taken in step 1 or by an
       earlier undated line has the same role and text, whatever its timestamp; it takes that
       turn. So the first *n* undated lines with a given role and text count as stored, *n* being
       how many such turns are left: a file holding "ok" twice writes both on the first import
       and neither on the second, and a third "ok" appended to the file later is written.

    Dated lines go first so that an undated line never takes the stored turn of a dated one.
    Re-importing a file, or the same file with lines appended (a growing chat log exported
    again), therefore writes only the lines not stored yet, and an import that failed part-way
    writes the rest. Limit: an undated line also counts as stored when a turn with the same role
    and text reached the conversation some other way (a chat through the proxy, another file).

    ``trimmed`` (the conversation's oldest turns were deleted to keep ``storage.max_messages``):
    the lines before the first line still stored are not new either.
    """
    exact = Counter((t.role, t.ts_ms, t.text) for t in stored)
    loose = Counter((role, text) for role, _, text in exact.elements())
    candidates = [
        (line.dated, turn) for line in lines if (turn := line_to_turn(line, max_chars)) is not None
    ]
    known = [False] * len(candidates)
    for i, (dated, turn) in enumerate(candidates):
        key = (turn.role, turn.ts_ms, turn.text)
        if dated and exact[key] > 0:
            exact[key] -= 1
            loose[turn.role, turn.text] -= 1
            known[i] = True
    for i, (dated, turn) in enumerate(candidates):
        if not dated and loose[turn.role, turn.text] > 0:
            loose[turn.role, turn.text] -= 1
            known[i] = True
    # the conversation's oldest turns were trimmed: the file's lines before the first one still
    # stored went that way, and are not new
    start = known.index(True) if trimmed and True in known else 0
    return [
        turn
        for i, ((_, turn), done) in enumerate(zip(candidates, known, strict=True))
        if not done and i >= start
    ]


def in_time_order(lines: Sequence[HistoryLine]) -> list[HistoryLine]:
    """The lines in time order when their dated times go back (a merged or re-sorted log),
    else as they are. Only dated lines give the order: an undated line keeps its place after
    the dated line before it, and takes that line's time (so the stored times never go back);
    lines of one time stay as written (a stable sort)."""
    dated = [line.ts_ms for line in lines if line.dated]
    if all(a <= b for a, b in pairwise(dated)):
        return list(lines)
    keyed: list[tuple[int, int, HistoryLine]] = []
    key = -1
    for index, line in enumerate(lines):
        if line.dated:
            key = line.ts_ms
        elif key >= 0:
            line = replace(line, ts_ms=key)
        keyed.append((key, index, line))
    return [line for _, _, line in sorted(keyed, key=lambda item: (item[0], item[1]))]


async def import_lines(
    store: MemoryStore,
    who: Identity,
    lines: Sequence[HistoryLine],
    *,
    max_chars: int = 32_000,
    max_messages: int | None = None,
) -> ImportResult:
    """Append lines to the conversation in batches of 250 turns, indexed for recall.

    The caller schedules extraction over the imported lines (:func:`schedule_import`): the
    worker works through the backlog in jobs of ``extraction.max_messages_chars`` each.

    Lines are written in time order (:func:`in_time_order`: a file whose dated times go back, a
    merged log, is put in order), so that seq order is time order within the import (the recent
    window and the recalled lines follow seq order). Dates find their lines whatever order the
    stored times are in (the conversation's time index, ``store/lua/seq_spans.lua``), older lines
    imported after newer chat included. Lines already
    stored are skipped (matched as :func:`unstored_turns` says: dated lines on role, timestamp
    and text; undated ones on role and text, each stored turn counting once), so importing a
    file again into the same conversation, or the same file with lines appended, writes only
    its new lines, after the stored ones. Lines imported into a conversation where chat requests
    stored turns are marked :attr:`~litellm_memory_hook.core.models.Turn.joined`: the recent
    window passes over them and a whole-history client's requests never replace them
    (:func:`~litellm_memory_hook.core.plan.chat_turns`); recall finds them. An import that
    failed part-way resumes where it stopped. ``turns`` of the result counts the turns this
    call wrote. With ``max_messages``
    (``storage.max_messages``), only the file's newest ``max_messages`` lines are imported, lines
    before the first one still stored in a conversation trimmed earlier are not new, and the
    oldest stored turns past the bound are deleted after the write
    (:func:`~litellm_memory_hook.store.retention.trim_oldest`), as a chat request's write does.

    Raises:
        StoreError: Redis failed (lines before the failing batch stay written).
    """
    # stored in time order: seq order is time order within the import (and a conversation
    # stored before the time index existed still finds dates by a binary search over the times)
    lines = in_time_order(lines)
    left_out = 0
    if max_messages is not None and len(lines) > max_messages:
        # only the newest lines a conversation may hold: matched and written alike, so that
        # importing the same file again still writes nothing (trimmed lines are not "new")
        left_out = len(lines) - max_messages
        lines = lines[-max_messages:]
    stored = await store.all_turns(who.keys)
    trimmed_before = max_messages is not None and bool(stored) and stored[0].seq > 1
    turns = unstored_turns(lines, stored, max_chars=max_chars, trimmed=trimmed_before)
    if any(t.call_id for t in stored):
        # chat requests stored turns here: the chatting client never sent these lines
        turns = [replace(t, joined=True) for t in turns]
    first = last = written = 0
    meta = {**who.meta_fields(), "created_ms": str(now_ms())}
    state, _ = await store.load(who.keys, who.memory, tail=1)
    # A turn's context keys come from the turn said just before it: the newest stored turn only
    # when the import goes on from it in time; lines older than it (an import after newer chat)
    # were not said after it.
    newest = state.tail[-1] if state.tail else None
    follows = newest is not None and bool(turns) and newest.ts_ms <= turns[0].ts_ms
    previous = newest.text if newest is not None and follows else ""
    for start in range(0, len(turns), BATCH_TURNS):
        batch = turns[start : start + BATCH_TURNS]
        result = await store.append(
            who.keys,
            indexed_chain(batch, previous),
            meta_if_new=meta,
        )
        previous = batch[-1].text
        if result.written:
            written += len(batch)
            first = first or result.first_seq
            last = result.last_seq
    trimmed = 0
    if turns:
        await store.touch_user_index(who.keys, who.memory)
        if max_messages is not None:
            trimmed = await trim_oldest(store, who.keys, max_messages)
    return ImportResult(
        turns=written, first_seq=first, last_seq=last, trimmed=trimmed, left_out=left_out
    )


async def schedule_import(queue: ExtractionQueue, who: Identity, result: ImportResult) -> bool:
    """Make the conversation due for extraction now when the import wrote turns.

    Returns:
        True when it was scheduled.

    Raises:
        StoreError: Redis failed.
    """
    if not result.turns:
        return False
    await queue.schedule(who.keys, now_ms(), earlier_only=True)
    return True
