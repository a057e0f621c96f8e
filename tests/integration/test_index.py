"""The recall index under deletion, recall through the real store and hook (C12, C14), and the
recall benchmark, on fakeredis and on a real Redis.

Property tests run each example on a fresh event loop with their own clients and key prefix
(hypothesis does not mix with async fixtures), and delete their keys afterwards.
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import fakeredis
import pytest
import redis.asyncio as aioredis
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from benchmarks.recall import METHODS, load_histories, run_recall
from litellm_memory_hook.core.indexing import indexed_chain
from litellm_memory_hook.core.models import IndexedTurn, Turn
from litellm_memory_hook.proxy.hook import MemoryHook
from litellm_memory_hook.store.keys import ConversationKeys
from litellm_memory_hook.store.redis_store import MemoryStore, unpack_postings
from tests.support.hook_calls import Auth, chat_request, make_hook, model_response
from tests.support.prompt_view import memory_text, without_tail
from tests.support.redis_url import real_redis_url

BACKENDS = ["fake", "real"]
VOCAB = ("apple", "pear", "kiwi", "plum", "fig", "lime")
TTL_S = 3600
TERMS = st.frozensets(st.sampled_from(VOCAB), max_size=4).map(lambda s: tuple(sorted(s)))
CAPS = st.sampled_from([1, 2, 3, 1024])

Index = dict[str, tuple[int, list[int]]]


# -- helpers -------------------------------------------------------------------------------------


def _client(backend: str) -> aioredis.Redis:
    if backend == "fake":
        client: aioredis.Redis = fakeredis.FakeAsyncRedis(decode_responses=False)
        return client
    return aioredis.from_url(real_redis_url(), decode_responses=False)


def _conv(prefix: str, name: str = "c1") -> ConversationKeys:
    return ConversationKeys.for_ids(prefix, "master", "u-A", name)


def _turns(terms: Sequence[Sequence[str]], start: int = 0) -> list[IndexedTurn]:
    """Turns whose text names their position; terms given explicitly (not tokenized)."""
    return [
        IndexedTurn(Turn(role="user", text=f"turn {start + i}", ts_ms=1000 + start + i), tuple(t))
        for i, t in enumerate(terms)
    ]


async def _index(client: aioredis.Redis, keys: ConversationKeys) -> tuple[Index, int]:
    """The postings hash decoded as term -> (df, seqs), and meta.idx_n."""
    raw = await client.hgetall(keys.postings)
    index: Index = {}
    for field, value in raw.items():
        df, seqs = unpack_postings(value)
        index[field.decode()] = (df, [int(s) for s in seqs])
    idx_n = await client.hget(keys.meta, "idx_n")
    return index, int(idx_n or 0)


async def _assert_ttls(client: aioredis.Redis, keys: ConversationKeys) -> None:
    """Every existing key of the conversation carries the retention TTL (none is persistent)."""
    for key in keys.all():
        ttl = await client.ttl(key)
        if ttl == -2:  # the key does not exist
            continue
        assert TTL_S - 5 <= ttl <= TTL_S, (key, ttl)


async def _drop(client: aioredis.Redis, *conversations: ConversationKeys) -> None:
    for keys in conversations:
        await client.delete(*keys.all())


def _postings_model(
    terms_by_seq: dict[int, Sequence[str]], alive: Iterable[int]
) -> dict[str, list[int]]:
    """term -> seqs (ascending) of the alive turns holding it."""
    out: dict[str, list[int]] = {}
    for seq in sorted(alive):
        for term in terms_by_seq[seq]:
            out.setdefault(term, []).append(seq)
    return out


# -- delete_turns: properties --------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=40, deadline=None)
@given(terms=st.lists(TERMS, min_size=1, max_size=14), data=st.data(), cap=CAPS)
def test_deleting_a_subset_leaves_the_index_of_the_kept_turns(
    backend: str, terms: list[tuple[str, ...]], data: st.DataObject, cap: int
) -> None:
    """Adding turns then deleting a subset gives the index of a fresh conversation of the kept
    turns: same terms, exact df, exact idx_n, same stored turns; each postings list is the newest
    part of the fresh one, and exactly it for terms the cap never cut. Precisely: a list is the
    newest ``cap`` postings before the deletion minus the deleted seqs."""
    deleted = data.draw(st.sets(st.integers(0, len(terms) - 1)), label="deleted positions")

    async def run() -> None:
        client = _client(backend)
        prefix = "t" + uuid.uuid4().hex[:10]
        store = MemoryStore(client, ttl_s=TTL_S, postings_cap=cap)
        mixed, fresh = _conv(prefix, "mixed"), _conv(prefix, "fresh")
        try:
            turns = _turns(terms)
            await store.append(mixed, turns)
            stored = await store.all_turns(mixed)
            victims = [IndexedTurn(stored[p], terms[p]) for p in sorted(deleted)]
            assert await store.delete_turns(mixed, victims) == len(deleted)
            kept = [p for p in range(len(terms)) if p not in deleted]
            await store.append(fresh, [turns[p] for p in kept])

            got, got_n = await _index(client, mixed)
            want, want_n = await _index(client, fresh)
            # Positions: mixed seq s is position s - 1; fresh seq j is position kept[j - 1].
            got_pos = {t: (df, [s - 1 for s in seqs]) for t, (df, seqs) in got.items()}
            want_pos = {t: (df, [kept[j - 1] for j in seqs]) for t, (df, seqs) in want.items()}
            assert got_n == want_n == sum(1 for p in kept if terms[p])
            assert {t: df for t, (df, _) in got_pos.items()} == {
                t: df for t, (df, _) in want_pos.items()
            }
            every = _postings_model(dict(enumerate(terms)), range(len(terms)))
            for term, (_, seqs) in got_pos.items():
                fresh_list = want_pos[term][1]
                assert seqs == fresh_list[len(fresh_list) - len(seqs) :]  # the newest part
                assert seqs == [p for p in every[term][-cap:] if p not in deleted]
                if len(every[term]) <= cap:  # the cap never cut this term
                    assert seqs == fresh_list
            assert [t.text for t in await store.all_turns(mixed)] == [f"turn {p}" for p in kept]
            await _assert_ttls(client, mixed)
        finally:
            await _drop(client, mixed, fresh)
            await client.aclose()

    asyncio.run(run())


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.lists(TERMS, min_size=1, max_size=5)),
        st.tuples(st.just("delete"), st.lists(st.integers(0, 30), max_size=5)),
    ),
    min_size=1,
    max_size=8,
)


class _ScriptModel:
    """The two scripts' effect on the index, simulated step by step in Python."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.terms_by_seq: dict[int, tuple[str, ...]] = {}
        self.alive: set[int] = set()
        self.lists: dict[str, list[int]] = {}  # the stored postings lists
        self.cut: set[str] = set()  # terms that lost a posting to the cap

    def add(self, first_seq: int, terms: Sequence[tuple[str, ...]]) -> None:
        for seq, t in enumerate(terms, start=first_seq):
            self.terms_by_seq[seq] = t
            self.alive.add(seq)
            for term in t:
                stored = self.lists.setdefault(term, [])
                stored.append(seq)
                if len(stored) > self.cap:
                    del stored[: -self.cap]
                    self.cut.add(term)

    def delete(self, seqs: Sequence[int]) -> int:
        removed = 0
        for seq in dict.fromkeys(seqs):
            if seq not in self.alive:
                continue
            removed += 1
            self.alive.discard(seq)
            for term in self.terms_by_seq[seq]:
                if seq in self.lists[term]:
                    self.lists[term].remove(seq)
        truth = self.truth()
        self.lists = {t: seqs for t, seqs in self.lists.items() if t in truth}
        return removed

    def truth(self) -> dict[str, list[int]]:
        """term -> every surviving seq holding it (what an uncapped fresh index would list)."""
        return _postings_model(self.terms_by_seq, self.alive)


async def _check_guarantee(
    client: aioredis.Redis, store: MemoryStore, keys: ConversationKeys, model: _ScriptModel
) -> None:
    index, idx_n = await _index(client, keys)
    truth = model.truth()
    assert idx_n == sum(1 for s in model.alive if model.terms_by_seq[s])
    assert {t: df for t, (df, _) in index.items()} == {t: len(s) for t, s in truth.items()}
    for term, (df, seqs) in index.items():
        assert len(seqs) <= min(model.cap, df)
        assert seqs == truth[term][len(truth[term]) - len(seqs) :]  # newest, no gap
        if term not in model.cut:
            assert seqs == truth[term][-model.cap :]
        assert seqs == model.lists[term]
    assert {t.seq for t in await store.all_turns(keys)} == model.alive
    await _assert_ttls(client, keys)


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=40, deadline=None)
@given(ops=OPS, cap=CAPS)
def test_interleaved_appends_and_deletes_keep_the_guarantee(
    backend: str, ops: list[tuple[str, list[Any]]], cap: int
) -> None:
    """Under any mix of appends and deletes (repeated, unknown and never-stored seqs included):
    delete_turns returns the number of stored turns it removed; df and idx_n are exact; every
    postings list is the newest m <= min(cap, df) surviving turns of its term, with no gap and
    no deleted seq, and all min(cap, df) of them while the cap never cut the term; the index
    equals a step-by-step model of the scripts; every key keeps the retention TTL."""

    async def run() -> None:
        client = _client(backend)
        keys = _conv("t" + uuid.uuid4().hex[:10])
        store = MemoryStore(client, ttl_s=TTL_S, postings_cap=cap)
        model = _ScriptModel(cap)
        try:
            for kind, arg in ops:
                if kind == "add":
                    result = await store.append(keys, _turns(arg, start=len(model.terms_by_seq)))
                    model.add(result.first_seq, arg)
                else:
                    victims = [
                        IndexedTurn(
                            Turn(role="user", text="", ts_ms=0, seq=s),
                            model.terms_by_seq.get(s, ()),
                        )
                        for s in arg
                    ]
                    assert await store.delete_turns(keys, victims) == model.delete(arg)
                await _check_guarantee(client, store, keys, model)
        finally:
            await _drop(client, keys)
            await client.aclose()

    asyncio.run(run())


# -- delete_turns: examples ----------------------------------------------------------------------


async def test_regenerate_and_delete_then_append_give_the_same_index(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """The append script's regenerate and delete_turns share one removal routine: replacing a
    reply leaves the same turns, postings and idx_n as deleting it and appending the new one."""
    store = MemoryStore(any_redis, ttl_s=TTL_S, postings_cap=2)
    question = Turn(role="user", text="Tell me a joke about zebras?", ts_ms=1)
    old = Turn(role="assistant", text="A zebra walks into a bar, zebra stripes", ts_ms=2)
    new = Turn(role="assistant", text="A penguin pun about zebras instead", ts_ms=3)
    a, b = _conv(prefix, "a"), _conv(prefix, "b")
    for keys in (a, b):
        await store.append(keys, indexed_chain([question, old]))
    stored_old = (await store.all_turns(a))[1]
    await store.append(
        a,
        indexed_chain([new], question.text),
        replace=indexed_chain([stored_old], question.text),
        call_id="r",
    )
    assert await store.delete_turns(b, indexed_chain([stored_old], question.text)) == 1
    await store.append(b, indexed_chain([new], question.text), call_id="r")
    assert await _index(any_redis, a) == await _index(any_redis, b)
    assert [(t.seq, t.text) for t in await store.all_turns(a)] == [
        (t.seq, t.text) for t in await store.all_turns(b)
    ]
    assert "zebra" not in (await _index(any_redis, a))[0]


async def test_delete_keeps_every_key_expiring_together(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """After delete_turns every key of the conversation still has the retention TTL, refreshed
    in the same script (a key whose TTL had drifted gets it back); deleting every turn empties
    the index (no postings key, idx_n 0) and leaves no key without a TTL."""
    store = MemoryStore(any_redis, ttl_s=TTL_S)
    keys = _conv(prefix)
    chain = indexed_chain(
        [
            Turn(role="user", text="My sister Seema lives in Pune", ts_ms=1),
            Turn(role="assistant", text="Pune is lovely", ts_ms=2),
        ]
    )
    await store.append(keys, chain, call_id="c1")
    stored = await store.all_turns(keys)
    await any_redis.expire(keys.turns, 5)
    assert await store.delete_turns(keys, [IndexedTurn(stored[1], chain[1].terms)]) == 1
    await _assert_ttls(any_redis, keys)
    assert await any_redis.ttl(keys.turns) > TTL_S - 5
    assert await store.delete_turns(keys, [IndexedTurn(stored[0], chain[0].terms)]) == 1
    assert not await any_redis.exists(keys.postings)
    assert await _index(any_redis, keys) == ({}, 0)
    assert await store.count_turns(keys) == 0
    for key in keys.all():
        assert await any_redis.ttl(key) != -1, key
    assert await store.delete_turns(keys, [IndexedTurn(stored[0], chain[0].terms)]) == 0
    assert await store.delete_turns(keys, []) == 0


# -- recall through the store and the hook (C12, C14) --------------------------------------------


async def _chat(hook: MemoryHook, text: str, reply: str, call_id: str) -> None:
    out = await hook.async_pre_call_hook(
        Auth(), None, chat_request(text, call_id=call_id), "acompletion"
    )
    assert out is not None
    assert await hook.async_post_call_success_hook(out, Auth(), model_response(reply)) is None


async def _ask(hook: MemoryHook, text: str) -> dict[str, Any]:
    out = await hook.async_pre_call_hook(
        Auth(), None, chat_request(text, call_id="q-" + text), "acompletion"
    )
    assert out is not None and out["messages"][0]["role"] == "system"
    return out


def _section(system: str, name: str) -> str | None:
    found = re.search(rf"^<{name}>\n(.*?)\n</{name}>$", system, flags=re.S | re.M)
    return None if found is None else found.group(1)


def _filler(count: int, start_ts: int) -> list[Turn]:
    """Chit-chat sharing no term (plain, phonetic or context) with the test questions."""
    return [
        Turn(
            role="user" if i % 2 == 0 else "assistant",
            text=f"ok sounds good {i}",
            ts_ms=start_ts + i,
        )
        for i in range(count)
    ]


async def test_c14_chinese_line_recalled_and_vague_questions_recall_nothing(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """Case C14, through the hook's own pre- and post-call writes: "我的猫叫小米", pushed out of
    the 40-message window by 21 exchanges, is recalled into <earlier_lines> by "我的猫叫什么？"
    (CJK bigrams); "🐱?", "what is it?" and "kya hai?" have no recall terms and get no
    <earlier_lines> section at all."""
    hook = make_hook(any_redis, prefix)
    await _chat(hook, "我的猫叫小米", "好名字！", "c0")
    for i in range(21):
        await _chat(hook, f"ok sounds good {i}", f"noted {i}", f"f{i}")
    out = await _ask(hook, "我的猫叫什么？")
    earlier = _section(memory_text(out["messages"]), "earlier_lines")
    assert earlier is not None and "我的猫叫小米" in earlier
    assert all("我的猫叫小米" not in str(m["content"]) for m in without_tail(out["messages"])[1:])
    for vague in ("🐱?", "what is it?", "kya hai?"):
        system = (await _ask(hook, vague))["messages"][0]["content"]
        assert "<earlier_lines>" not in system, vague
    assert not hook.counters["precall_errors"] and not hook.counters["postcall_errors"]


async def test_c12_devanagari_and_hinglish_lines_recalled_by_a_hindi_question(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """Case C12: "मेरी बहन का नाम सीमा है और वो पुणे में रहती है" and "meri behen Seema Pune mein
    rehti hai", stored through the store's own index and pushed out of the window, are both
    recalled by "सीमा कहाँ रहती है?" (the Hinglish one by phonetic keys: Seema / सीमा, rehti /
    रहती), and the reminder asks for a reply in Devanagari."""
    store = MemoryStore(any_redis, ttl_s=TTL_S)
    keys = _conv(prefix, "demo")
    hindi = "मेरी बहन का नाम सीमा है और वो पुणे में रहती है"
    hinglish = "meri behen Seema Pune mein rehti hai"
    old = [
        Turn(role="user", text=hindi, ts_ms=1_000),
        Turn(role="assistant", text="अच्छा!", ts_ms=2_000),
        Turn(role="user", text=hinglish, ts_ms=3_000),
        Turn(role="assistant", text="Nice.", ts_ms=4_000),
    ]
    await store.append(keys, indexed_chain([*old, *_filler(40, 10_000)]))
    hook = make_hook(any_redis, prefix)
    system = memory_text((await _ask(hook, "सीमा कहाँ रहती है?"))["messages"])
    earlier = _section(system, "earlier_lines")
    assert earlier is not None and hindi in earlier and hinglish in earlier
    reminder = _section(system, "memory_reminder")
    assert reminder is not None and "Devanagari" in reminder


async def test_lines_in_the_recent_window_are_never_recalled(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """A line matching the question inside the recent window is sent in the window and never
    repeated in <earlier_lines>: with an older match outside the window only that one is
    recalled; with the only match inside the window there is no <earlier_lines> at all."""
    store = MemoryStore(any_redis, ttl_s=TTL_S)
    outside = Turn(role="user", text="My sister Seema lives in Pune near the river", ts_ms=1)
    inside = Turn(role="user", text="Seema called me about mangoes", ts_ms=90_000)
    both, only_inside = (
        _conv(prefix, "demo"),
        ConversationKeys.for_ids(prefix, "master", "u-B", "demo"),
    )
    await store.append(both, indexed_chain([outside, *_filler(40, 10), inside]))
    await store.append(only_inside, indexed_chain([*_filler(40, 10), inside]))
    hook = make_hook(any_redis, prefix)

    out = await _ask(hook, "Where does Seema live?")
    earlier = _section(memory_text(out["messages"]), "earlier_lines")
    assert earlier is not None and outside.text in earlier and inside.text not in earlier
    assert any(m["content"] == inside.text for m in without_tail(out["messages"])[1:])

    request = {**chat_request("Where does Seema live?", call_id="q2"), "user": "u-B"}
    out_b = await hook.async_pre_call_hook(Auth(), None, request, "acompletion")
    assert out_b is not None
    assert "<earlier_lines>" not in memory_text(out_b["messages"])
    assert any(m["content"] == inside.text for m in without_tail(out_b["messages"])[1:])


# -- the recall benchmark ------------------------------------------------------------------------


def tiny_locomo(path: Path) -> Path:
    """Two sessions, a blank line before the evidence of an old rare-word question."""
    session_1 = [
        {"speaker": "Asha", "dia_id": "D1:1", "text": "   "},
        {"speaker": "Asha", "dia_id": "D1:2", "text": "My axolotl is called Quibblefrond."},
        {"speaker": "Mira", "dia_id": "D1:3", "text": "What a lovely name!"},
    ] + [
        {"speaker": "Asha" if i % 2 else "Mira", "dia_id": f"D1:{i}", "text": f"ok sounds good {i}"}
        for i in range(4, 34)
    ]
    session_2 = [
        {"speaker": "Asha" if i % 2 else "Mira", "dia_id": f"D2:{i}", "text": f"sure thing {i}"}
        for i in range(1, 31)
    ] + [{"speaker": "Asha", "dia_id": "D2:31", "text": "I bought new running shoes yesterday."}]
    sample = {
        "sample_id": "tiny-1",
        "conversation": {
            "speaker_a": "Asha",
            "speaker_b": "Mira",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": session_1,
            "session_2_date_time": "10:00 am on 9 May, 2023",
            "session_2": session_2,
        },
        "qa": [
            {"question": "What is my axolotl called?", "answer": "Quibblefrond",
             "evidence": ["D1:2"], "category": 4},
            {"question": "What did I buy?", "answer": "shoes", "evidence": ["D2:31"],
             "category": 2},
            {"question": "Name the axolotl and the shoes?", "answer": "-",
             "evidence": ["D1:2; D2:31"], "category": 1, "hard": True},
            {"question": "Anything?", "answer": "-", "evidence": [], "category": 5},
        ],
    }  # fmt: skip
    file = path / "tiny.json"
    file.write_text(json.dumps([sample]), encoding="utf-8")
    return file


async def _leftover_keys(prefix: str) -> list[bytes]:
    client = aioredis.from_url(real_redis_url(), decode_responses=False)
    try:
        return [k async for k in client.scan_iter(match=f"{prefix}:*", count=1000)]
    finally:
        await client.aclose()


async def test_recall_benchmark_on_a_tiny_locomo_file(tmp_path: Path, prefix: str) -> None:
    """The benchmark on a real Redis: questions without evidence are skipped, every figure is a
    share in [0, 1], the old line with a rare word ("axolotl", after a blank line the import
    skips) is recalled and covered by the tuned recall, the newest line is covered by the
    window, and no benchmark key is left behind."""
    histories = load_histories(tiny_locomo(tmp_path))
    report = await run_recall(real_redis_url(), histories, prefix=prefix)
    assert len(report.questions) == 3 and report.stored_lines == 63
    for result in report.results.values():
        for _, tally in result.groups():
            figures = tally.as_dict()
            assert all(0.0 <= figures[name] <= 1.0 for name in ("recall@4", "cover@4", "window"))
    rows = {row.question: row for row in report.questions}
    axolotl = rows["What is my axolotl called?"]
    assert axolotl.window == () and "D1:2" in axolotl.recalled["tuned"]
    assert report.results["tuned"].by_category[4].as_dict()["cover@4"] == 1.0
    assert rows["What did I buy?"].window == ("D2:31",)
    assert report.results["tuned"].hard.as_dict()["cover@4"] == 1.0
    assert set(report.results) == set(METHODS)
    assert await _leftover_keys(prefix) == []


async def test_recall_benchmark_budget_and_curve(tmp_path: Path, prefix: str) -> None:
    """The budgeted mode labels its figures ``@budget``; the curve has tuned and plain-idf at
    each point, with medians of recalled and sent characters, and more lines give more cover."""
    from benchmarks.recall import curve_points
    from litellm_memory_hook.engine.recall_step import RecallOptions

    histories = load_histories(tiny_locomo(tmp_path))
    points = curve_points((1, 2), (100, 2000))
    report = await run_recall(
        real_redis_url(), histories, recall_options=RecallOptions(), points=points, prefix=prefix
    )
    payload = report.as_json()
    assert payload["protocol"]["k"] == "budget" and payload["protocol"]["recall"]["chars"] > 0
    assert payload["results"]["tuned"]["all"]["cover@budget"] == 1.0
    curve = {(p["point"], p["method"]): p for p in payload["curve"]}
    assert set(curve) == {
        (label, method)
        for label in ("k=1", "k=2", "100 chars", "2000 chars")
        for method in ("tuned", "plain-idf")
    }
    assert curve[("k=2", "tuned")]["cover"] >= curve[("k=1", "tuned")]["cover"]
    small, large = curve[("100 chars", "tuned")], curve[("2000 chars", "tuned")]
    assert small["recalled_chars_median"] <= large["recalled_chars_median"]
    assert small["cover"] <= large["cover"]
    assert all(p["prompt_chars_median"] > 0 for p in curve.values())
    assert report.median_prompt_chars() > 0
    assert await _leftover_keys(prefix) == []


def test_bench_recall_command_prints_and_writes_json(tmp_path: Path) -> None:
    """`litellm-memory bench recall FILE --format locomo --json OUT` prints the table and writes
    the figures of the three methods with the LoCoMo citation."""
    from litellm_memory_hook.tools.cli import app

    out = tmp_path / "out" / "recall.json"
    result = CliRunner().invoke(
        app,
        [
            "bench",
            "recall",
            str(tiny_locomo(tmp_path)),
            "--format",
            "locomo",
            "--sample-id",
            "tiny-1",
            "--mode",
            "fixed",
            "--no-curve",
            "--json",
            str(out),
            "--redis-url",
            real_redis_url(),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "tuned" in result.output
    report = json.loads(out.read_text(encoding="utf-8"))
    assert set(report["results"]) == set(METHODS) and "Maharana" in report["citation"]
    assert report["results"]["tuned"]["all"]["questions"] == 3


async def test_trimming_keeps_the_newest_and_the_index_exact(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """Case C30: a conversation over its bound loses its oldest turns, and the index is exactly
    that of the turns that remain (df, idx_n), also across two trims (meta.trim_prev)."""
    from litellm_memory_hook.core.indexing import indexed_chain
    from litellm_memory_hook.store.retention import trim_oldest

    store = MemoryStore(any_redis, ttl_s=3600)
    keys = ConversationKeys.for_ids(prefix, "master", "u-A", "trim")
    texts = [
        f"Did you see the {w} today?" if i % 2 == 0 else f"Yes, the {w} was lovely"
        for i, w in enumerate(["heron", "otter", "maple", "heron", "comet", "otter"] * 25)
    ]
    turns = [
        Turn(role="user" if i % 2 == 0 else "assistant", text=t, ts_ms=i)
        for i, t in enumerate(texts)
    ]
    await store.append(keys, indexed_chain(turns[:100]))
    assert await trim_oldest(store, keys, 60) == 40
    await store.append(keys, indexed_chain(turns[100:], turns[99].text))
    assert await trim_oldest(store, keys, 60) == 50
    assert await trim_oldest(store, keys, 60) == 0
    remaining = await store.all_turns(keys)
    assert [t.text for t in remaining] == texts[90:]
    fresh = ConversationKeys.for_ids(prefix, "master", "u-A", "fresh")
    await store.append(fresh, indexed_chain(turns[90:], turns[89].text))
    got = {k: unpack_postings(v)[0] for k, v in (await any_redis.hgetall(keys.postings)).items()}
    want = {k: unpack_postings(v)[0] for k, v in (await any_redis.hgetall(fresh.postings)).items()}
    assert got == want
    assert await any_redis.hget(keys.meta, "idx_n") == await any_redis.hget(fresh.meta, "idx_n")


async def _assert_index_exact(client: aioredis.Redis, keys: ConversationKeys) -> None:
    """The stored index (df per term, idx_n, no seq of a deleted turn in any postings list)
    equals the index of the turns that remain, by their stored terms."""
    from collections import Counter

    from litellm_memory_hook.core.indexing import stored_terms

    turns = [Turn.from_member(m) for m in await client.zrange(keys.turns, 0, -1)]
    expected: Counter[str] = Counter()
    indexed_count = 0
    for turn in turns:
        terms = stored_terms(turn).terms
        expected.update(set(terms))
        indexed_count += bool(terms)
    stored = {
        k.decode(): unpack_postings(v) for k, v in (await client.hgetall(keys.postings)).items()
    }
    assert {t: df for t, (df, _) in stored.items()} == dict(expected)
    live = {t.seq for t in turns}
    assert all(set(seqs.tolist()) <= live for _, seqs in stored.values())
    assert int(await client.hget(keys.meta, "idx_n") or 0) == indexed_count


async def test_a_regenerate_racing_a_new_message_loses_nothing(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """A regenerate whose reply lands after another request stored a new turn removes only the
    old reply: the other turns stay, and the index stays exact."""
    hook = make_hook(any_redis, prefix)
    await _chat(hook, "What is the capital of France?", "Paris, I think.", "c1")
    regen = await hook.async_pre_call_hook(
        Auth(), None, chat_request("What is the capital of France?", call_id="c2"), "acompletion"
    )
    await _chat(hook, "And the Colosseum?", "It is in Rome.", "c3")
    await hook.async_post_call_success_hook(regen, Auth(), model_response("Paris."))
    texts = [
        t.text for t in await MemoryStore(any_redis, ttl_s=TTL_S).all_turns(_conv(prefix, "demo"))
    ]
    assert texts == [
        "What is the capital of France?",
        "And the Colosseum?",
        "It is in Rome.",
        "Paris.",
    ]
    await _assert_index_exact(any_redis, _conv(prefix, "demo"))


async def test_overlapping_requests_then_trim_keep_the_index_exact(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """Two requests in flight index against the same previous turn; deletion and trimming use
    the terms each turn was stored with, so the index stays exact (no stale postings)."""
    from litellm_memory_hook.store.retention import trim_oldest

    hook = make_hook(any_redis, prefix)
    await _chat(hook, "Do you like puppies?", "Yes, a lot!", "p0")
    first = await hook.async_pre_call_hook(
        Auth(), None, chat_request("Which breed is best?", call_id="p1"), "acompletion"
    )
    second = await hook.async_pre_call_hook(
        Auth(), None, chat_request("Have you seen my kitten?", call_id="p2"), "acompletion"
    )
    await hook.async_post_call_success_hook(first, Auth(), model_response("Beagles are lovely."))
    await hook.async_post_call_success_hook(second, Auth(), model_response("Not yet, sorry."))
    keys = _conv(prefix, "demo")
    await _assert_index_exact(any_redis, keys)
    for i in range(30):
        await _chat(hook, f"Question number {i}?", f"Answer {i}.", f"q{i}")
    store = MemoryStore(any_redis, ttl_s=TTL_S)
    assert await trim_oldest(store, keys, 50) == 16
    await _assert_index_exact(any_redis, keys)


def test_bench_recall_command_curve_for_several_files(tmp_path: Path) -> None:
    """`litellm-memory bench recall A B --json OUT.json` (budgeted by default) prints the cover
    curve of each file and writes OUT-<stem>.json for each."""
    from litellm_memory_hook.tools.cli import app

    first = tiny_locomo(tmp_path)
    second = first.with_name("other.json")
    second.write_text(first.read_text(encoding="utf-8"), encoding="utf-8")
    out = tmp_path / "out" / "recall.json"
    args = ["bench", "recall", str(first), str(second), "--ks", "2", "--budgets", "500"]
    args += ["--json", str(out), "--redis-url", real_redis_url()]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "cover curve" in result.output and "500 chars" in result.output
    for stem in ("tiny", "other"):
        report = json.loads((tmp_path / "out" / f"recall-{stem}.json").read_text("utf-8"))
        assert report["protocol"]["k"] == "budget"
        assert {p["point"] for p in report["curve"]} == {"k=2", "500 chars"}
