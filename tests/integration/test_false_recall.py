"""The false-recall set: in each script written without spaces, unrelated queries recall nothing,
and related ones recall the line they share a word with (issue 11 item 2).

Stored lines are indexed as the store indexes them (:func:`recall.index_terms`, each line keyed
by the one before it) and scored by the product's scorer; one set also runs through the real
request path (:func:`prepare` on fakeredis and on a real Redis). Character bigrams made these
fail: "说明天气" (explain the weather) shared "明天" (tomorrow) with a line about tomorrow, and two
Thai lines shared fragments such as "ที่ช" across word boundaries. Words now come from ICU's
dictionary segmentation and the packaged function-word lists.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import pytest
import redis.asyncio as aioredis

from litellm_memory_hook.core import recall
from litellm_memory_hook.core.indexing import indexed_chain
from litellm_memory_hook.core.models import Turn
from litellm_memory_hook.engine.options import ContextOptions
from litellm_memory_hook.engine.rebuild import prepare
from litellm_memory_hook.store.keys import ConversationKeys, user_scope
from litellm_memory_hook.store.redis_store import MemoryStore

# script -> (stored lines, unrelated queries, (related query, line it must recall))
SETS: dict[str, tuple[list[str], list[str], list[tuple[str, int]]]] = {
    "thai": (
        [
            "แมวของฉันชื่อมะลิ ชอบนอนบนโซฟา",  # my cat is called Mali, likes sleeping on the sofa
            "พรุ่งนี้ฉันจะไปเชียงใหม่กับพี่สาว",  # tomorrow I go to Chiang Mai with my sister
            "ฉันชอบดื่มกาแฟตอนเช้า",  # I like coffee in the morning
        ],
        [
            "วันนี้ฝนตกหนักมาก",  # it rains hard today
            "คุณอ่านหนังสือเล่มไหนอยู่",  # which book are you reading
            "รถไฟเที่ยวสุดท้ายออกกี่โมง",  # when does the last train leave
        ],
        [("มะลิเป็นแมวพันธุ์อะไร", 0), ("เชียงใหม่หนาวไหม", 1)],
    ),
    "lao": (
        [
            "ແມວຂອງຂ້ອຍຊື່ມະລິ",  # my cat is called Mali
            "ມື້ອື່ນຂ້ອຍຈະໄປຫຼວງພະບາງ",  # tomorrow I go to Luang Prabang
            "ຂ້ອຍມັກດື່ມກາເຟຕອນເຊົ້າ",  # I like coffee in the morning
        ],
        [
            "ມື້ນີ້ຝົນຕົກໜັກ",  # it rains hard today
            "ເຈົ້າອ່ານປຶ້ມຫົວໃດ",  # which book are you reading
            "ລົດໄຟອອກຈັກໂມງ",  # when does the train leave
        ],
        [("ຫຼວງພະບາງງາມບໍ", 1), ("ກາເຟຢູ່ໃສແຊບ", 2)],
    ),
    "khmer": (
        [
            "ឆ្មារបស់ខ្ញុំឈ្មោះម៉ាលី",  # my cat is called Mali
            "ថ្ងៃស្អែកខ្ញុំនឹងទៅសៀមរាប",  # tomorrow I go to Siem Reap
            "ខ្ញុំចូលចិត្តផឹកកាហ្វេពេលព្រឹក",  # I like coffee in the morning
        ],
        [
            "តើអ្នកអានសៀវភៅអ្វី",  # what book do you read
            "រថភ្លើងចេញម៉ោងប៉ុន្មាន",  # when does the train leave
            "ភ្លៀងធ្លាក់ខ្លាំងណាស់",  # it rains very hard
        ],
        [("សៀមរាបក្តៅទេ", 1), ("កាហ្វេនៅឯណាឆ្ងាញ់", 2), ("ឆ្មាស៊ីអ្វី", 0)],
    ),
    "myanmar": (
        [
            "ကျွန်တော့်ကြောင်နာမည်မာလီ",  # my cat is called Mali
            "မနက်ဖြန်ကျွန်တော်မန္တလေးကိုသွားမယ်",  # tomorrow I go to Mandalay
            "ကျွန်တော်မနက်တိုင်းကော်ဖီသောက်တယ်",  # I drink coffee every morning
        ],
        [
            "မိုးအရမ်းရွာတယ်",  # it rains a lot
            "ဘယ်စာအုပ်ဖတ်နေလဲ",  # which book are you reading
            "ရထားဘယ်အချိန်ထွက်မလဲ",  # when does the train leave
        ],
        [("မန္တလေးမှာရာသီဥတုဘယ်လိုလဲ", 1), ("ကော်ဖီဘယ်မှာကောင်းလဲ", 2)],
    ),
    "han": (
        [
            "我的猫叫小米，喜欢睡在沙发上",  # my cat Xiaomi likes sleeping on the sofa
            "明天我要和姐姐去北京开会",  # tomorrow I go to Beijing with my sister for a meeting
            "我每天早上都喝咖啡",  # I drink coffee every morning
        ],
        [
            "说明天气预报的来源",  # explain where the weather forecast comes from (not 明天)
            "你在看什么书？",  # what book are you reading
            "最后一班火车几点开？",  # when does the last train leave
            "今天下大雨了",  # it rains hard today
        ],
        [("小米喜欢吃什么？", 0), ("北京冷不冷？", 1), ("你喜欢哪种咖啡？", 2)],
    ),
    "kana": (
        [
            "私の猫はミケという名前で、ソファで寝るのが好きです",  # my cat Mike sleeps on the sofa
            "明日、姉と一緒に京都へ行きます",  # tomorrow I go to Kyoto with my sister
            "毎朝コーヒーを飲みます",  # I drink coffee every morning
        ],
        [
            "今日は雨がひどいですね",  # it rains hard today
            "どんな本を読んでいますか",  # what kind of book are you reading
            "最終電車は何時に出ますか",  # when does the last train leave
        ],
        [("ミケは元気ですか", 0), ("京都は寒いですか", 1), ("コーヒーはブラックですか", 2)],
    ),
}


def _index(texts: Sequence[str]) -> tuple[dict[str, list[int]], dict[str, int]]:
    postings: dict[str, list[int]] = defaultdict(list)
    for seq, text in enumerate(texts):
        for term in recall.index_terms(text, previous=texts[seq - 1] if seq else ""):
            postings[term].append(seq)
    return dict(postings), {t: len(s) for t, s in postings.items()}


def _recalled(texts: Sequence[str], query: str) -> list[int]:
    postings, df = _index(texts)
    found = recall.rank(recall.query_terms(query), postings, df, len(texts), k=16)
    return sorted(seq for seq, _ in found)


@pytest.mark.parametrize("script", sorted(SETS))
def test_unrelated_queries_recall_nothing(script: str) -> None:
    """Every unrelated query of the script recalls no line at all (no word in common)."""
    lines, unrelated, _ = SETS[script]
    for query in unrelated:
        assert recall.query_terms(query), f"{query!r} should still have words"
        assert _recalled(lines, query) == [], query


@pytest.mark.parametrize("script", sorted(SETS))
def test_related_queries_recall_their_line(script: str) -> None:
    """A query sharing a word with a line recalls that line first (segmentation keeps the
    content words: the set is not passed by dropping everything)."""
    lines, _, related = SETS[script]
    postings, df = _index(lines)
    for query, line in related:
        found = recall.rank(recall.query_terms(query), postings, df, len(lines), k=16)
        assert found and found[0][0] == line, (query, found)


def test_fragments_across_words_do_not_meet() -> None:
    """The bigram "明天" straddles 说明 | 天气 in the query: it is no term any more."""
    assert "明天" not in recall.tokenize("说明天气预报")
    assert recall.tokenize("说明天气预报") == ["说明", "天气", "预报"]
    assert "明天" in recall.tokenize("明天我要去北京")


def test_scripts_do_not_meet_each_other() -> None:
    """All lines of every script in one conversation: each unrelated query still recalls
    nothing, each related query still finds its own line first."""
    every = [line for lines, _, _ in SETS.values() for line in lines]
    offset = 0
    for lines, unrelated, related in SETS.values():
        for query in unrelated:
            assert _recalled(every, query) == [], query
        postings, df = _index(every)
        for query, line in related:
            found = recall.rank(recall.query_terms(query), postings, df, len(every), k=16)
            assert found[0][0] == offset + line, query
        offset += len(lines)


@pytest.mark.parametrize("script", ["thai", "han", "kana"])
async def test_false_recall_through_the_request_path(
    any_redis: aioredis.Redis, prefix: str, script: str
) -> None:
    """The same set through :func:`prepare` on a real store (budgeted recall, the default):
    unrelated queries put no ``<earlier_lines>`` in the prompt, related ones put their line."""
    lines, unrelated, related = SETS[script]
    store = MemoryStore(any_redis, ttl_s=3600)
    keys = ConversationKeys.for_ids(prefix, "master", "u-A", script)
    memory = keys.user_keys.memory_set(user_scope("demo"))
    filler = [f"ok {i}" for i in range(60)]  # pushes the lines out of the recent window
    turns = [
        Turn(role="user" if i % 2 == 0 else "assistant", text=text, ts_ms=1_000_000 + i)
        for i, text in enumerate([*lines, *filler])
    ]
    await store.append(keys, indexed_chain(turns))
    for query in unrelated:
        prepared = await prepare(
            store, keys, memory, [{"role": "user", "content": query}], ContextOptions()
        )
        assert prepared is not None and prepared.recalled == []
        assert "<earlier_lines>" not in prepared.messages[0]["content"]
    for query, line in related:
        prepared = await prepare(
            store, keys, memory, [{"role": "user", "content": query}], ContextOptions()
        )
        assert prepared is not None
        assert [t.text for t in prepared.recalled][:1] == [lines[line]] or lines[line] in [
            t.text for t in prepared.recalled
        ]
