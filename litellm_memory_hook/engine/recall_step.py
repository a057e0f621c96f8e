"""Recall of older lines for one request: the I/O around :mod:`litellm_memory_hook.core.recall`
(the scoring and its figures: docs/recall.md).

:func:`prepare <litellm_memory_hook.engine.rebuild.prepare>` reads the conversation and the
postings of the new message's terms in one round trip (:meth:`MemoryStore.load`, given
:func:`recall_query`); :func:`recall_lines` then ranks, fetches and chooses the lines:

* ``recall.mode: budget`` (the default): the best lines, best first, while they fit in
  ``recall.max_chars`` characters as shown in the prompt (label, speaker and text), at most
  ``recall.max_k`` of them, each scoring at least ``recall.min_share`` of the best score;
* ``recall.mode: fixed``: the best ``recall.k`` lines whatever their size (the seed's top 4).

In both modes a text said several times (the same words, case and spacing aside, such as a
stock reply "Got it, thanks for telling me.") is recalled once, its best-ranked copy
(:func:`~litellm_memory_hook.core.recall.distinct_texts`).

``recall.scope: user`` also ranks the lines of the user's other conversations in the same alias
namespace (at most ``recall.max_user_chats``, the most recently updated), as one collection with
this one: one more round trip for their postings (:meth:`MemoryStore.load_chats`), then one fetch of
the chosen lines of every conversation. Only the postings of the query's own terms are read, so the
cost does not grow with the length of the history. Lines of another chat are labelled with it.

Dates the message names (:func:`litellm_memory_hook.core.dates.query_dates`) lift the lines of
that day, week, month or year ("yesterday", "last week") among those the words matched. In a
question about that time (date-led recall: :func:`litellm_memory_hook.core.recall.asks_about_time`
and :func:`~litellm_memory_hook.core.recall.dates_lead`: a date at least as rare as each word of
the question that an older line shares, the date's own words left out) the lines
said then are recalled without any shared word: ranked with the date as the main term and the
words lifting the lines they match (those come first), then, among lines of equal score, those
with more content words (:func:`~litellm_memory_hook.core.recall.content_words`; greetings and
one-word replies that no word matched are left out while other lines remain:
:func:`~litellm_memory_hook.core.recall.date_led_order`); at most ``DATE_LED_K_MAX`` lines (8),
within the same character budget,
shown in time order with their dates. To choose among the day's lines, ``DATE_LED_POOL`` more
lines than usual are ranked and fetched (only for such questions). A message that is no
question ("remind me on 3 May 2023 to call Bob") keeps its dates as a lift only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from litellm_memory_hook.core import recall
from litellm_memory_hook.core.dates import DATE_PREFIX, DateSpan, query_dates, without_dates
from litellm_memory_hook.core.excerpt import excerpt
from litellm_memory_hook.core.indexing import indexed
from litellm_memory_hook.core.models import ConversationState, Turn
from litellm_memory_hook.core.plan import speaker_label
from litellm_memory_hook.core.prompt import EarlierLine, earlier_line_chars
from litellm_memory_hook.errors import InvalidIdError
from litellm_memory_hook.settings import AliasMemoryConfig, MemorySettings, RecallSettings
from litellm_memory_hook.slices import Slicer
from litellm_memory_hook.store.chats import ChatPostings
from litellm_memory_hook.store.keys import ConversationKeys, MemoryKeys, key_id
from litellm_memory_hook.store.redis_store import MemoryStore, Postings

#: lines ranked and fetched beyond the usual candidates for a date-led question, among which the
#: lines with more content words are chosen: a day of chat (LoCoMo sessions: 18-47 lines).
DATE_LED_POOL = 48

_DATE_KINDS = frozenset({DATE_PREFIX})
Key = tuple[int, int]  # (collection index, seq)

RecallMode = Literal["budget", "fixed"]
RecallScope = Literal["conversation", "user"]
_DEFAULTS = RecallSettings.model_fields  # one source of the defaults: the settings model


@dataclass(frozen=True)
class RecallOptions:
    """How many old lines a request recalls, and from where (see the module docstring). The
    defaults are those of :class:`~litellm_memory_hook.settings.RecallSettings`.

    Attributes:
        mode: ``budget`` or ``fixed``.
        k: lines of the fixed mode; 0 turns recall off in both modes.
        chars: characters of the budgeted mode (lines as shown); 0 turns recall off there.
        k_max: most lines of the budgeted mode.
        min_share: a budgeted line scores at least this share of the best score.
        scope: ``conversation``, or ``user``: the user's other chats too.
        user_chats: most other chats read with ``scope: user``.
    """

    mode: RecallMode = _DEFAULTS["mode"].default
    k: int = _DEFAULTS["k"].default
    chars: int = _DEFAULTS["max_chars"].default
    k_max: int = _DEFAULTS["max_k"].default
    min_share: float = _DEFAULTS["min_share"].default
    scope: RecallScope = _DEFAULTS["scope"].default
    user_chats: int = _DEFAULTS["max_user_chats"].default

    @classmethod
    def for_alias(cls, settings: MemorySettings, alias: AliasMemoryConfig) -> RecallOptions:
        """The alias's own values, else the global settings."""

        return cls(
            mode=settings.recall.mode if alias.recall.mode is None else alias.recall.mode,
            k=settings.recall.k if alias.recall.k is None else alias.recall.k,
            chars=settings.recall.max_chars
            if alias.recall.max_chars is None
            else alias.recall.max_chars,
            k_max=settings.recall.max_k if alias.recall.max_k is None else alias.recall.max_k,
            min_share=(
                settings.recall.min_share
                if alias.recall.min_share is None
                else alias.recall.min_share
            ),
            scope=settings.recall.scope if alias.recall.scope is None else alias.recall.scope,
            user_chats=(
                settings.recall.max_user_chats
                if alias.recall.max_user_chats is None
                else alias.recall.max_user_chats
            ),
        )

    @property
    def enabled(self) -> bool:
        """Whether the request recalls at all (off: no postings are read)."""
        return self.k > 0 and (self.mode == "fixed" or (self.chars > 0 and self.k_max > 0))

    @property
    def candidates(self) -> int:
        """How many of the best lines are ranked and fetched."""
        return self.k if self.mode == "fixed" else self.k_max


@dataclass(frozen=True)
class RecallQuery:
    """What the store reads for recall: the message's terms and the dates it names.

    Attributes:
        terms: the message's terms (:func:`recall.query_terms`).
        dates: the dates it names.
        user_scope: the user's other chats are read too.
        asks: the message asks something while naming a date (:func:`recall.asks_about_time`),
            so its dates may lead (:func:`recall.dates_lead`).
        other_words: its plain words besides its dates' own, weighed against the dates (those
            of ``terms`` in :func:`dates.without_dates`); only when ``asks``.
        sound_alikes: the check of the lines its phonetic keys matched
            (:class:`recall.SoundAlikes`).
    """

    terms: tuple[str, ...] = ()
    dates: tuple[DateSpan, ...] = ()
    user_scope: bool = False
    asks: bool = False
    other_words: tuple[str, ...] = ()
    sound_alikes: recall.SoundAlikes = field(default_factory=recall.SoundAlikes)

    @property
    def spans(self) -> list[tuple[int, int]]:
        """``(start ms, end ms)`` of each date, for :meth:`MemoryStore.load`."""
        return [(d.start_ms, d.end_ms) for d in self.dates]


def recall_query(
    text: str, options: RecallOptions, timezone: str | None, now_ms: int | None = None
) -> RecallQuery:
    """The terms and dates of a new message (module docstring); empty when recall is off or it
    has no terms (every date form has some: "2023", "yesterday", "week"). ``now_ms``: the
    request's time, for relative dates ("yesterday"; :func:`dates.query_dates`)."""
    if not text or not options.enabled:
        return RecallQuery()
    text = excerpt(text)
    terms = recall.query_terms_cached(text)
    if not terms:
        return RecallQuery()
    dates = tuple(query_dates(text, timezone, now_ms))
    asks = bool(dates) and recall.asks_about_time(text)
    other: tuple[str, ...] = ()
    if asks:
        own = set(terms)
        other = tuple(
            w for w in dict.fromkeys(recall.tokenize(without_dates(text, now_ms))) if w in own
        )
    return RecallQuery(
        terms, dates, options.scope == "user", asks, other, recall.query_sound_alikes(text)
    )


@dataclass(frozen=True)
class Recalled:
    """The recalled lines of a request.

    Attributes:
        turns: the recalled turns of this conversation, time order.
        lines: every recalled line as shown (this chat's and other chats'), time order.
    """

    turns: tuple[Turn, ...] = ()
    lines: tuple[EarlierLine, ...] = ()


def _collection(
    postings: Postings,
    query: RecallQuery,
    exclude_from: int | None,
    recallable: Sequence[int] = (),
) -> recall.Collection:
    seqs: dict[str, Sequence[int] | npt.NDArray[Any]] = dict(postings.seqs)
    df: dict[str, int] = dict(postings.df)
    for date, found in zip(query.dates, postings.spans, strict=False):
        if found.df > 0 and found.runs:
            seqs[date.term] = recall.date_postings(found.runs)
            df[date.term] = found.df
    if exclude_from is not None and any(s >= exclude_from for s in recallable):
        # lines the window passes over among the excluded seqs: the exclusion is made here,
        # seq by seq, instead of by the ranking's threshold
        allowed = np.asarray(recallable, dtype=np.int64)
        for term, found_seqs in seqs.items():
            array = np.asarray(found_seqs, dtype=np.int64)
            seqs[term] = array[(array < exclude_from) | np.isin(array, allowed)]
        exclude_from = None
    return recall.Collection(seqs, df, postings.n_docs, exclude_from)


async def _unstored_collection(turns: Sequence[Turn], query: RecallQuery) -> recall.Collection:
    """The client's own older lines that the store does not hold yet, indexed here as the store
    indexes them (:func:`~litellm_memory_hook.core.indexing.indexed`, each keyed by the text of
    the one before it), ``seq`` = their position from 1: the query's terms only, no date terms
    (they have no stored time).

    On the event loop, in slices (:class:`~litellm_memory_hook.slices.Slicer`): segmenting
    24,000 characters of Chinese costs ~30 ms. In a thread it took 150-320 ms while other users'
    requests kept the loop busy: ICU gives up the GIL at each call, and every call then waited
    for the loop's thread to give it back.
    """
    wanted = set(query.terms)
    seqs: dict[str, list[int]] = {}
    n_docs = 0
    previous = ""
    slicer = Slicer()
    for number, turn in enumerate(turns, start=1):
        item = indexed(turn, previous)
        previous = turn.text
        if item.terms:
            n_docs += 1
        for term in wanted.intersection(item.terms):
            seqs.setdefault(term, []).append(number)
        await slicer.step()
    return recall.Collection(seqs, {t: len(v) for t, v in seqs.items()}, n_docs, None)


def _namespace_filter(
    state: ConversationState, memory: MemoryKeys
) -> Callable[[Mapping[str, str]], bool]:
    """Which other conversations share this one's alias namespace: by the raw namespace in
    this conversation's meta, else (a new conversation) by the memory set's ``ns:`` scope."""
    own = state.meta.get("namespace")

    def accept(meta: Mapping[str, str]) -> bool:
        other = meta.get("namespace", "")
        if own:
            return other == own
        if memory.scope.startswith("ns:"):
            try:
                return f"ns:{key_id(other)}" == memory.scope
            except InvalidIdError:
                return False
        return True

    return accept


@dataclass(frozen=True)
class Stored:
    """The conversation as the request's one read found it, and where to read more.

    Attributes:
        store: the store.
        keys / memory: the conversation and its memory set.
        state / postings: what :meth:`MemoryStore.load` read for ``query``.
        query: :func:`recall_query` of the new message.
        last_text: what the user typed in the request's last user message
            (:func:`~litellm_memory_hook.engine.layers.last_user_words`), the recall query's
            text.
    """

    store: MemoryStore
    keys: ConversationKeys
    memory: MemoryKeys
    state: ConversationState
    postings: Postings
    query: RecallQuery
    last_text: str


@dataclass(frozen=True)
class Shown:
    """What the request shows already or holds apart, which recall leaves out or adds.

    Attributes:
        exclude_from: the first seq of the recent window (never recalled); ``None`` for none.
        in_window: ``(role, stripped text)`` of the window's messages that have no known seq:
            a line that says the same is never recalled (a whole-history client's messages
            older than the stored tail read; ``exclude_from`` covers the others).
        extra_candidates: lines ranked beyond ``options.candidates`` (as many as such window
            messages), so that leaving them out does not leave recall short.
        unstored: the client's own messages older than the window that the store does not
            hold yet (a whole-history client's first request, which seeds an empty
            conversation), oldest first: ranked with the stored lines as one collection.
        recallable: seqs from ``exclude_from`` on that may still be recalled: the imported
            lines the recent window passes over (:func:`~litellm_memory_hook.core.plan.
            passed_over`).
    """

    exclude_from: int | None
    in_window: frozenset[tuple[str, str]] = frozenset()
    extra_candidates: int = 0
    unstored: Sequence[Turn] = ()
    recallable: Sequence[int] = ()


async def recall_lines(
    stored: Stored, options: RecallOptions, shown: Shown, *, timezone: str | None
) -> Recalled:
    """Rank, fetch and choose the recalled lines (see the module docstring).

    Args:
        stored: the conversation as the request's read found it, and the query.
        options: the alias's recall options.
        shown: what the window shows already (left out) and the client's unstored messages.
        timezone: the user's zone (the size of a line's date label).

    Raises:
        StoreError: Redis failed.
    """
    store, keys, memory = stored.store, stored.keys, stored.memory
    state, postings, query = stored.state, stored.postings, stored.query
    unstored = shown.unstored
    if not query.terms:
        return Recalled()
    chats = await _other_chats(store, keys, memory, state, postings, query, options)
    # This conversation last: ties between chats go to it (then to its lines not stored yet).
    collections = [_collection(c.postings, query, None) for c in reversed(chats)]
    labels = [c.meta.get("conversation") or c.keys.conversation for c in reversed(chats)]
    local = -1
    if unstored:
        local = len(collections)
        collections.append(await _unstored_collection(unstored, query))
        labels.append("")
    collections.append(_collection(postings, query, shown.exclude_from, shown.recallable))
    if not any(c.n_docs for c in collections):
        return Recalled()
    date_terms = [d.term for d in query.dates]
    led = query.asks and recall.dates_lead(query.other_words, date_terms, collections)
    ranked = recall.rank_collections(
        [*query.terms, *date_terms],
        collections,
        k=options.candidates + shown.extra_candidates + (DATE_LED_POOL if led else 0),
        main_kinds=_DATE_KINDS if led else None,
    )
    if not ranked:
        return Recalled()
    own = len(collections) - 1
    sources = {i: c.keys for i, c in enumerate(reversed(chats))}
    sources[own] = keys
    fetched = await _fetch_ranked(store, ranked, sources, own, local, unstored)
    found, turns = _found_lines(fetched, own, labels, shown.in_window)
    present = _without_false_sound_alikes(
        [(key, value) for key, value in ranked if key in found], found, collections, query
    )
    if led:
        present = _date_led(present, found, collections, query)
    present = recall.distinct_texts(present, lambda key: found[key].text)
    chosen = _choose(present, found, options, timezone=timezone, date_led=led)
    by_time = sorted(chosen, key=lambda key: (found[key].ts_ms, key[0], key[1]))
    return Recalled(
        turns=tuple(turns[key] for key in by_time if key[0] == own),
        lines=tuple(found[key] for key in by_time),
    )


async def _other_chats(
    store: MemoryStore,
    keys: ConversationKeys,
    memory: MemoryKeys,
    state: ConversationState,
    postings: Postings,
    query: RecallQuery,
    options: RecallOptions,
) -> list[ChatPostings]:
    """The user's other conversations read for recall (``recall.scope: user``), else none."""
    if not (query.user_scope and postings.chats):
        return []
    others = [m for m in postings.chats if m != keys.index_member]
    return await store.load_chats(
        keys.user_keys,
        others,
        query_terms=query.terms,
        date_spans=query.spans,
        max_chats=options.user_chats,
        accept=_namespace_filter(state, memory),
    )


async def _fetch_ranked(
    store: MemoryStore,
    ranked: Sequence[tuple[Key, float]],
    sources: Mapping[int, ConversationKeys],
    own: int,
    local: int,
    unstored: Sequence[Turn],
) -> dict[int, list[Turn]]:
    """The ranked lines' turns by collection: this conversation's in one read, other chats' in
    one batched read, the client's unstored messages (collection ``local``) from ``unstored``
    (seq ``n`` is its ``n``-th message)."""
    wanted: dict[int, list[int]] = {}
    for (index, seq), _ in ranked:
        wanted.setdefault(index, []).append(seq)
    fetched: dict[int, list[Turn]] = {}
    if local in wanted:
        fetched[local] = [replace(unstored[seq - 1], seq=seq) for seq in sorted(wanted.pop(local))]
    if list(wanted) == [own]:
        fetched[own] = await store.fetch_turns(sources[own], wanted[own])
    elif wanted:
        order = sorted(wanted)
        groups = await store.fetch_many([(sources[i], wanted[i]) for i in order])
        fetched.update(zip(order, groups, strict=True))
    return fetched


def _found_lines(
    fetched: Mapping[int, Sequence[Turn]],
    own: int,
    labels: Sequence[str],
    in_window: frozenset[tuple[str, str]],
) -> tuple[dict[Key, EarlierLine], dict[Key, Turn]]:
    """The fetched turns as recalled lines (labelled with their chat when not this one), by
    ``(collection, seq)``; this conversation's lines that say what a window message says are
    left out."""
    found: dict[Key, EarlierLine] = {}
    turns: dict[Key, Turn] = {}
    for index, group in fetched.items():
        for turn in group:
            if index == own and (turn.role, turn.text.strip()) in in_window:
                continue
            chat = "" if index == own else labels[index]
            found[(index, turn.seq)] = EarlierLine(
                ts_ms=turn.ts_ms, speaker=speaker_label(turn), text=turn.text, chat=chat
            )
            turns[(index, turn.seq)] = turn
    return found, turns


def _date_led(
    present: list[tuple[Key, float]],
    found: Mapping[Key, EarlierLine],
    collections: Sequence[recall.Collection],
    query: RecallQuery,
) -> list[tuple[Key, float]]:
    """A question led by its dates: the lines in date order of relevance
    (:func:`recall.date_led_order`), those that also match a word of the question first."""
    matched = {
        index: recall.matched_seqs(query.terms, collections[index].postings, seqs)
        for index, seqs in _seqs_by_collection(present).items()
    }
    return recall.date_led_order(
        present,
        lambda key: recall.content_words(found[key].text),
        lambda key: key[1] in matched[key[0]],
    )


def _without_false_sound_alikes(
    ranked: list[tuple[Key, float]],
    found: Mapping[Key, EarlierLine],
    collections: Sequence[recall.Collection],
    query: RecallQuery,
) -> list[tuple[Key, float]]:
    """The fetched lines with the weight of the phonetic keys they matched only through words
    that do not sound alike taken off their scores (:meth:`recall.SoundAlikes.false_keys`),
    best first again; a line that such keys alone matched is left out. Unchanged for a message
    in romanised Hindi.

    Only the keys that can be false are checked (:meth:`recall.SoundAlikes.risky`), and only in
    the lines scoring no more than all of them together: a line that scores more shares
    another term with the query, and keeps its score. Checking every line cost ~10% more
    instructions per pre-call hook at 100,000 stored messages, for no change in evidence cover
    (``litellm-memory bench recall``). Which line holds which key is read off the postings, a
    binary search per term and collection."""
    check = query.sound_alikes
    risky = check.risky(collections) if ranked else []
    if not risky:
        return ranked
    weights = {k: recall.term_weight(k, collections) for k in risky}
    ceiling = sum(weights.values()) + recall.SCORE_EPSILON
    weak = [key for key, value in ranked if value <= ceiling]
    if not weak:
        return ranked
    terms = list(dict.fromkeys([*risky, *(w for k in risky for w in check.key_words[k])]))
    # per collection and key, the weak lines its postings hold without any of its query words
    suspects: dict[tuple[int, str], frozenset[int]] = {}
    for index, seqs in _seqs_by_collection([(key, 0.0) for key in weak]).items():
        held = recall.holders(terms, collections[index].postings, seqs)
        for sound in risky:
            lines = held[sound].difference(*(held[w] for w in check.key_words[sound]))
            if lines:
                suspects[(index, sound)] = lines
    if not suspects:
        return ranked
    out: list[tuple[Key, float]] = []
    changed = False
    for key, value in ranked:
        index, seq = key
        open_keys = [k for k in risky if seq in suspects.get((index, k), ())]
        for term in check.false_keys(found[key].text, open_keys):
            value -= weights[term]
            changed = True
        if value > recall.SCORE_EPSILON:
            out.append((key, value))
    if not changed:
        return ranked
    out.sort(key=lambda item: -item[1])  # stable: equal scores keep the ranking's order
    return out


def _seqs_by_collection(ranked: Sequence[tuple[Key, float]]) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for (index, seq), _ in ranked:
        out.setdefault(index, []).append(seq)
    return out


def _choose(
    ranked: list[tuple[Key, float]],
    found: Mapping[Key, EarlierLine],
    options: RecallOptions,
    *,
    timezone: str | None,
    date_led: bool,
) -> list[Key]:
    """The recalled lines among the ranked ones that were fetched (best first), by the recall
    mode; a date-led recall keeps at most ``DATE_LED_K_MAX``."""
    most = options.candidates if options.mode == "fixed" else options.k_max
    if date_led:
        most = min(most, recall.DATE_LED_K_MAX)
    if options.mode == "fixed":
        return [key for key, _ in ranked][:most]
    return recall.fill_budget(
        ranked,
        lambda key: earlier_line_chars(found[key], timezone),
        chars=options.chars,
        k_max=most,
        min_share=options.min_share,
    )


def exclusion_start(window_seqs: Sequence[int], last_seq: int) -> int:
    """The first seq that recall never returns: the oldest stored message of the recent window,
    else (nothing stored in it) the next seq."""
    return min(window_seqs) if window_seqs else last_seq + 1
