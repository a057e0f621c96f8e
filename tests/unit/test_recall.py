"""Tests of litellm_memory_hook.core.recall: tokenizer, term scheme, IDF and scoring (pure)."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from litellm_memory_hook.core import recall
from litellm_memory_hook.core.recall import (
    DEFAULT_TERM_OPTIONS,
    MAX_TERM_CHARS,
    MAX_TERMS_PER_MESSAGE,
    idf,
    index_terms,
    phonetic_key,
    query_terms,
    score,
    term_kind,
    tokenize,
    tokens,
)


def build_index(
    texts: Sequence[str], *, with_context: bool = True
) -> tuple[dict[str, list[int]], dict[str, int]]:
    """Index texts as the store does (seq = position, previous message as context)."""
    postings: dict[str, list[int]] = defaultdict(list)
    for seq, text in enumerate(texts):
        previous = texts[seq - 1] if seq > 0 and with_context else ""
        for term in index_terms(text, previous=previous):
            postings[term].append(seq)
    return dict(postings), {term: len(seqs) for term, seqs in postings.items()}


def recall_seqs(texts: Sequence[str], question: str) -> list[int]:
    """Seqs recalled (top 4, no window) for a question over an index of texts."""
    postings, df = build_index(texts)
    return [seq for seq, _ in score(query_terms(question), postings, df, len(texts))]


def assert_one(found: list[tuple[int, float]], seq: int, value: float) -> None:
    """The result is exactly one message, ``seq``, scoring ``value`` (to float precision)."""
    assert [s for s, _ in found] == [seq]
    assert found[0][1] == pytest.approx(value)


# C14: scripts without spaces, and queries that yield zero tokens


def test_c14_cjk_line_recalled_through_whole_words() -> None:
    """A Chinese query recalls the Chinese line it shares a word with (C14); words come from
    ICU's dictionary segmentation, function words go by the packaged zh list."""
    texts = ["我的猫叫小米", "明天去北京开会"]
    assert tokenize("我的猫叫小米") == ["猫叫", "小米"]
    assert recall_seqs(texts, "小米是谁？") == [0]
    assert recall_seqs(texts, "北京的会议怎么样？") == [1]


@pytest.mark.parametrize("query", ["🐱?", "what is it?", "kya hai?", "", "  ...!!  ", "है कि"])
def test_c14_zero_token_queries_recall_nothing(query: str) -> None:
    """Emoji-only and stopword-only queries give no terms, and no terms recall nothing (C14)."""
    postings, df = build_index(["我的猫叫小米", "明天去北京开会", "what is it? kya hai?"])
    assert query_terms(query) == []
    assert score(query_terms(query), postings, df, 3) == []


def test_lone_cjk_character_is_its_own_term() -> None:
    """A single character between non-CJK text is kept as itself, not dropped."""
    assert tokenize("猫!") == ["猫"]


def test_japanese_and_thai_runs_become_words() -> None:
    """Kana and Thai runs are segmented into words; particles and short kana go, and Thai
    vowel signs stay with their consonant."""
    assert tokenize("ネコが好き") == ["ネコ", "好き"]
    assert tokenize("ミケとトムはパソコンで遊ぶ") == ["ミケ", "トム", "パソコン", "遊ぶ"]
    assert tokenize("แมวของฉัน") == ["แมว"]


# C12: the same fact in two scripts


def test_c12_fact_recalled_in_both_scripts() -> None:
    """A Devanagari query recalls the Devanagari line and its romanised twin (C12)."""
    texts = [
        "मेरी बहन का नाम सीमा है और वो पुणे में रहती है",
        "meri behen Seema Pune mein rehti hai",
        "aaj office mein meeting thi",
        "I had pasta for dinner",
    ]
    assert recall_seqs(texts, "सीमा कहाँ रहती है?") == [0, 1]


def test_c12_romanised_line_meets_only_through_phonetic_keys() -> None:
    """The romanised line shares no plain word with the Devanagari query, only ``~`` keys."""
    shared = set(query_terms("सीमा कहाँ रहती है?")) & set(
        index_terms("meri behen Seema Pune mein rehti hai")
    )
    assert shared == {"~sm", "~rht"}
    assert {term_kind(t) for t in shared} == {"~"}


# Tokenizer


def test_devanagari_vowel_signs_stay_inside_words() -> None:
    """Combining vowel signs belong to the word (Python's \\w would cut सीमा and इंटरव्यू)."""
    assert tokenize("सीमा का इंटरव्यू") == ["सीमा", "इंटरव्यू"]


def test_short_devanagari_function_words_dropped_by_syllable_count() -> None:
    """One-akshara words go by length (है, कि, में); two-akshara content words stay (घर)."""
    assert tokenize("है कि में घर") == ["घर"]
    assert recall.MIN_WORD_SYLLABLES == 2


def test_devanagari_conjunct_counts_as_one_syllable() -> None:
    """A conjunct (consonant + virama + consonant) is one akshara: क्या is one syllable."""
    assert tokens._syllables("क्या") == 1
    assert tokens._syllables("सीमा") == 2


def test_latin_words_casefolded_and_short_ones_dropped() -> None:
    """Words are NFKC + casefolded; words under 3 letters and stopwords go."""
    assert tokenize("Ｐａｒｉｓ is SO big, ok? STRASSE Straße") == [
        "paris",
        "big",
        "strasse",
        "strasse",
    ]


def test_invisible_joiners_do_not_split_words() -> None:
    """Zero-width joiners and soft hyphens inside a word are dropped, not word breaks."""
    assert tokenize("mem\u200dory in\u00adterview") == ["memory", "interview"]


def test_mixed_script_line_keeps_both_scripts() -> None:
    """A line switching scripts keeps Latin and Devanagari words, each whole."""
    line = "haan, सीमा दीदी की एक friend HSR Layout में रहती है"
    assert tokenize(line) == ["सीमा", "दीदी", "friend", "hsr", "layout", "रहती"]


def test_mixed_script_line_recalled_by_romanised_query() -> None:
    """A Hinglish query finds a mixed-script line through plain and phonetic keys."""
    texts = [
        "haan, सीमा दीदी की एक friend HSR Layout में रहती है",
        "kal movie dekhi, boring thi",
        "office mein naya manager aaya",
    ]
    assert recall_seqs(texts, "Seema didi ki friend kahan rehti hai?") == [0]


def test_hinglish_spelling_variants_meet() -> None:
    """nahi / nhi / नहीं, mujhe / mjhe / मुझे, rehti / rahti give one phonetic key each."""
    assert phonetic_key("nahi") == phonetic_key("nhi") == phonetic_key("नहीं") == "~nh"
    assert phonetic_key("mujhe") == phonetic_key("mjhe") == phonetic_key("मुझे") == "~mj"
    assert phonetic_key("rehti") == phonetic_key("rahti") == phonetic_key("रहती") == "~rht"
    assert phonetic_key("bahut") == phonetic_key("bohot") == phonetic_key("bahot")


def test_nahin_meets_nahi_only_with_the_final_nasal_rule() -> None:
    """A written final "n" stays by default (it cut English words); the option drops it."""
    assert phonetic_key("nahin") == "~nhn"
    with_rule = replace(DEFAULT_TERM_OPTIONS, final_nasal=True)
    assert phonetic_key("nahin", with_rule) == phonetic_key("nahi", with_rule) == "~nh"


def test_hinglish_variant_recalls_line() -> None:
    """A query spelled differently from the stored Hinglish line still recalls it."""
    texts = ["mjhe peanut allergy hai", "kal movie dekhi", "bohot thak gayi aaj"]
    assert recall_seqs(texts, "mujhe peanuts se kya hota hai?") == [0]
    assert recall_seqs(texts, "bahut thaki hui ho?") == [2]


def test_english_inflections_meet_through_phonetic_key() -> None:
    """paint / paints / painting share a key; the plain words stay distinct."""
    assert phonetic_key("paint") == phonetic_key("paints") == phonetic_key("painting") == "~pnt"
    assert "painting" in index_terms("I love painting") and "paint" not in index_terms("painting")


def test_short_skeletons_give_no_key() -> None:
    """Skeletons under MIN_SKELETON_CHARS would join unrelated words: no key."""
    assert phonetic_key("boo") is None
    assert phonetic_key("view") is None
    assert phonetic_key("2023") is None
    assert phonetic_key("strasse", replace(DEFAULT_TERM_OPTIONS, phonetic=False)) is None


# Term scheme and bounds


def test_index_terms_sorted_distinct_and_namespaced() -> None:
    """Terms are sorted and distinct; extra keys carry a prefix no plain word starts with."""
    terms = index_terms("Seema Seema seema Pune")
    assert terms == sorted(set(terms))
    assert terms == ["pune", "seema", "~pn", "~sm"]
    assert [term_kind(t) for t in terms] == ["", "", "~", "~"]


def test_plain_options_give_plain_words_only() -> None:
    """PLAIN_TERM_OPTIONS (the benchmark's baseline) adds no extra keys."""
    options = recall.PLAIN_TERM_OPTIONS
    assert index_terms("Seema rehti Pune", previous="kahan?", options=options) == [
        "pune",
        "rehti",
        "seema",
    ]


def test_context_keys_only_after_a_question() -> None:
    """A reply is indexed under the words of the question before it, not of a statement."""
    reply = "A lot about ecosystems."
    assert "^books" in index_terms(reply, previous="What did you learn from those books?")
    assert not any(t.startswith("^") for t in index_terms(reply, previous="I read books."))


def test_reply_recalled_through_the_question_it_answers() -> None:
    """A query about the question's topic finds the reply that never names it."""
    texts = [
        "I read some books about our ecological systems.",
        "Cool! What did you learn from reading those books?",
        "A lot about animals, plants and how it all works together.",
        "Let's go hiking on Sunday.",
    ]
    assert 2 in recall_seqs(texts, "What did Andrew learn from the books on ecology?")


def test_bounded_terms_per_message_plain_words_first() -> None:
    """A huge message stores at most MAX_TERMS_PER_MESSAGE terms, its plain words first."""
    words = [f"word{chr(97 + i % 26)}{chr(97 + i // 26)}" for i in range(100)]
    terms = index_terms(" ".join(words))
    assert len(terms) == MAX_TERMS_PER_MESSAGE
    assert set(terms) == set(words[:MAX_TERMS_PER_MESSAGE])
    few = index_terms(" ".join(words[:40]))
    assert len(few) <= MAX_TERMS_PER_MESSAGE and set(words[:40]) <= set(few)


def test_long_words_cut_to_max_term_chars() -> None:
    """A word longer than MAX_TERM_CHARS is cut, on both sides, so it still meets itself."""
    long_word = "a" * 30 + "b" * 30
    assert tokenize(long_word) == [long_word[:MAX_TERM_CHARS]]
    assert all(len(t) <= MAX_TERM_CHARS for t in index_terms(long_word, previous=long_word + "?"))
    assert recall_seqs([long_word, "other text here"], long_word) == [0]


def test_speaker_is_accepted_and_not_indexed() -> None:
    """The speaker argument is accepted (store convenience) and adds no term."""
    assert index_terms("dinner tonight", "Caroline") == index_terms("dinner tonight")


def test_packaged_stopwords_and_extra_files(tmp_path: Path) -> None:
    """Packaged lists load (en, hi-latn, hi); deployments add files; unknown lists fail."""
    default = recall.default_stopwords()
    assert {"what", "kya", "hai", "nahi", "नहीं", "और"} <= default
    extra = tmp_path / "de.txt"
    extra.write_text("# German\nUND\nnicht  # negation\n\n", encoding="utf-8")
    loaded = recall.load_stopwords([extra])
    assert {"und", "nicht"} <= loaded and default <= loaded
    assert tokenize("Hund und Katze", stopwords=loaded) == ["hund", "katze"]
    assert "kya" not in recall.load_stopwords(lists=["en"])
    with pytest.raises(ValueError, match="no packaged stopword list"):
        recall.load_stopwords(lists=["xx"])


# IDF and scoring


def test_idf_formula_and_edge_cases() -> None:
    """idf = log(1 + N / (1 + df)); N=0 gives 0; df > N and negative df stay finite."""
    assert idf(10, 1) == pytest.approx(math.log(1 + 10 / 2))
    assert idf(0, 0) == 0.0
    assert idf(-5, 3) == 0.0
    assert 0.0 < idf(10, 50) < idf(10, 5)
    assert idf(10, -3) == idf(10, 0)


def test_score_empty_query_or_empty_index_gives_nothing() -> None:
    """No query terms, N=0, or k=0 return [] (never everything, never a division by zero)."""
    postings = {"cat": [0, 1]}
    assert score([], postings, {"cat": 2}, 2) == []
    assert score(["cat"], postings, {"cat": 2}, 0) == []
    assert score(["cat"], postings, {"cat": 2}, 2, k=0) == []
    assert score(["dog"], postings, {"cat": 2}, 2) == []


def test_score_sums_idf_of_distinct_shared_terms() -> None:
    """A candidate scores the IDF sum of its distinct shared terms; repeats count once."""
    postings = {"rare": [0], "common": [0, 1, 2, 3], "~key": [1]}
    df = {"rare": 1, "common": 4, "~key": 1}
    found = dict(score(["rare", "common", "rare", "~key"], postings, df, 4))
    assert found[0] == pytest.approx(idf(4, 1) + idf(4, 4))
    assert found[1] == pytest.approx(idf(4, 4) + 0.5 * idf(4, 1))  # phonetic keys weigh 0.5
    override = dict(score(["~key"], postings, df, 4, term_weights={"~": 2.0}))
    assert override[1] == pytest.approx(2.0 * idf(4, 1))


def test_score_duplicate_postings_count_once() -> None:
    """A seq listed twice in one posting list (a repeated append) counts once."""
    assert_one(score(["cat"], {"cat": [3, 3, 3]}, {"cat": 1}, 5), 3, idf(5, 1))


def test_score_ties_go_to_the_newer_line() -> None:
    """Equal scores: the newer (higher seq) message wins the last place."""
    postings, df = build_index(["paneer tikka", "paneer tikka", "paneer tikka"])
    found = score(query_terms("paneer tikka"), postings, df, 3, k=2)
    assert [seq for seq, _ in found] == [1, 2]


def test_score_results_in_time_order() -> None:
    """Results come back by ascending seq, whatever their score order."""
    postings = {"rare": [0], "common": [0, 1, 2, 3, 4, 5]}
    df = {"rare": 1, "common": 6}
    found = score(["rare", "common"], postings, df, 6, k=3)
    assert [seq for seq, _ in found] == [0, 4, 5]
    assert found[0][1] > found[1][1] == found[2][1]


def test_score_respects_exclude_from_seq() -> None:
    """Messages at or after exclude_from_seq (the recent window) are never returned."""
    postings = {"goa": [1, 5, 6, 7]}
    found = score(["goa"], postings, {"goa": 4}, 8, exclude_from_seq=6)
    assert [seq for seq, _ in found] == [1, 5]
    assert score(["goa"], postings, {"goa": 4}, 8, exclude_from_seq=0) == []


def test_score_uses_df_beyond_kept_postings() -> None:
    """A store keeping only the newest postings reports the exact df: the IDF uses it."""
    assert_one(score(["cat"], {"cat": [9]}, {"cat": 40}, 50), 9, idf(50, 40))
    assert_one(score(["cat"], {"cat": [9]}, {}, 50), 9, idf(50, 1))


def test_score_df_larger_than_n_is_safe() -> None:
    """A df above N (a double count) still gives a small positive weight, not an error."""
    assert_one(score(["cat"], {"cat": [0]}, {"cat": 99}, 3), 0, math.log1p(3 / 100))


# Properties

_WORDS = st.sampled_from(
    [
        "Seema",
        "सीमा",
        "इंटरव्यू",
        "nahi",
        "nhi",
        "mujhe",
        "kya",
        "hai",
        "我的猫",
        "ネコ",
        "แมว",
        "Straße",
        "ＡＢＣ",
        "🐱",
        "?",
        "x" * 50,
        "क्या",
        "e\u0301cole",
        "\u200d",
        "2023",
    ]
)
_MESSAGES = st.one_of(st.text(max_size=200), st.lists(_WORDS, max_size=30).map(" ".join))


@settings(max_examples=200, deadline=None)
@given(_MESSAGES)
def test_tokenize_never_raises_and_terms_are_clean(text: str) -> None:
    """Any Unicode gives casefolded terms of at most MAX_TERM_CHARS without whitespace."""
    for term in tokenize(text):
        assert term
        assert len(term) <= MAX_TERM_CHARS
        assert term == term.casefold()
        assert not any(char.isspace() for char in term)


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.text(max_size=20), _WORDS))
def test_phonetic_key_never_raises(word: str) -> None:
    """phonetic_key takes any string and gives None or a short ``~`` key."""
    key = phonetic_key(word)
    assert key is None or (key.startswith("~") and 2 < len(key) <= MAX_TERM_CHARS)
    assert phonetic_key("\u0902") is None


@settings(max_examples=200, deadline=None)
@given(_MESSAGES, _MESSAGES)
def test_index_terms_bounded(text: str, previous: str) -> None:
    """index_terms is sorted, distinct, bounded in count and term length."""
    terms = index_terms(text, previous=previous + "?")
    assert terms == sorted(set(terms))
    assert len(terms) <= MAX_TERMS_PER_MESSAGE
    assert all(0 < len(t) <= MAX_TERM_CHARS for t in terms)
    assert len(query_terms(text)) <= MAX_TERMS_PER_MESSAGE


@settings(max_examples=200, deadline=None)
@given(_MESSAGES)
def test_query_plain_and_phonetic_terms_are_index_terms(text: str) -> None:
    """Every plain word and phonetic key of query_terms(x) is in index_terms(x)."""
    indexed = set(index_terms(text))
    assert {t for t in query_terms(text) if term_kind(t) != "^"} <= indexed


@settings(max_examples=100, deadline=None)
@given(st.lists(_WORDS, max_size=10).map(" ".join))
def test_query_context_terms_meet_replies(question: str) -> None:
    """For a short question x, the ``^`` terms of query_terms(x) are in any reply's index."""
    context = {t for t in query_terms(question) if term_kind(t) == "^"}
    assert context <= set(index_terms("ok", previous=question + "?"))


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["a", "b", "c", "~d", "^e"]),
        st.lists(st.integers(min_value=0, max_value=40), min_size=1, max_size=30, unique=True).map(
            sorted
        ),
        min_size=1,
    ),
    st.integers(min_value=1, max_value=12),
)
def test_rank_top_k_is_the_head_of_the_full_ranking(postings: dict[str, list[int]], k: int) -> None:
    """rank(k) is exactly the first k of the whole ranking (best score, ties to the newer line),
    also when many lines tie at the k-th score."""
    terms = sorted(postings)
    full = recall.rank(terms, postings, {}, 41, k=1000)
    assert recall.rank(terms, postings, {}, 41, k=k) == full[:k]


_POSTING_LISTS = st.lists(
    st.tuples(
        st.lists(st.integers(min_value=0, max_value=60), max_size=12),
        st.floats(min_value=0.01, max_value=5.0, allow_nan=False),
    ),
    min_size=1,
    max_size=8,
)


@settings(max_examples=300, deadline=None)
@given(
    main=_POSTING_LISTS,
    boost=st.lists(
        st.tuples(
            st.lists(st.integers(min_value=0, max_value=60), max_size=12),
            st.floats(min_value=0.01, max_value=2.0, allow_nan=False),
        ),
        max_size=3,
    ),
    exclude=st.one_of(st.none(), st.integers(min_value=0, max_value=70)),
    k=st.integers(min_value=1, max_value=20),
    ordered=st.booleans(),
)
def test_small_rank_equals_the_numpy_rank(
    main: list[tuple[list[int], float]],
    boost: list[tuple[list[int], float]],
    exclude: int | None,
    k: int,
    ordered: bool,
) -> None:
    """The plain-Python sums of small inputs choose the same lines with the same scores as the
    numpy path: same order of additions, repeats within a term once, boosts only where a word
    matched, exclusion, ties to the newer line."""
    from litellm_memory_hook.core.recall.ranking import _rank_arrays, _rank_small, _Terms

    def terms(pairs: list[tuple[list[int], float]]) -> _Terms:
        lists: list[Sequence[int]] = [sorted(set(p)) if ordered else p for p, _ in pairs]
        keep = [i for i, p in enumerate(lists) if p]
        return [lists[i] for i in keep], [pairs[i][1] for i in keep]  # type: ignore[return-value]

    main_terms, boost_terms = terms(main), terms(boost)
    if not main_terms[0]:
        return
    assert _rank_small(main_terms, boost_terms, exclude, k) == _rank_arrays(
        main_terms, boost_terms, exclude, k
    )


# Content-free repeats (fresh-user run): every assistant reply was "Got it, thanks for telling
# me.", and "Can you tell me about the bedroom?" recalled 8 copies of it around the one line
# about the bedroom; "Tell me something." recalled 8 copies and nothing else.


@pytest.mark.parametrize(
    "word",
    ["tell", "tells", "told", "telling", "say", "said", "ask", "asked", "know", "knew",
     "remember", "remembered", "remind", "recall"],
)  # fmt: skip
def test_request_verbs_are_not_content(word: str) -> None:
    """Verbs with which a message asks for what the assistant remembers are stopwords, in
    every form, like the question words: they recall nothing by themselves."""
    assert word in recall.default_stopwords() and word in recall.load_stopwords(lists=["en"])
    assert word not in recall.load_stopwords(lists=["hi-latn"])
    assert tokenize(f"Can you {word} me about the bedroom?") == ["bedroom"]
    assert query_terms(f"{word.capitalize()} me something.") == []


def test_a_stock_reply_is_not_recalled_by_a_request_verb() -> None:
    texts = [
        "The bedroom walls are painted sage green.",
        "Got it, thanks for telling me.",
        "Our parrot Kiwi sleeps in the kitchen.",
        "Got it, thanks for telling me.",
    ]
    assert recall_seqs(texts, "Can you tell me about the bedroom?") == [0]
    assert recall_seqs(texts, "Tell me about the parrot.") == [2]
    assert recall_seqs(texts, "Tell me something.") == []
    assert recall_seqs(texts, "What did I tell you?") == []


def test_distinct_texts_keeps_the_first_of_each_text() -> None:
    texts = {1: "Got it, thanks!", 2: "got it,  THANKS! ", 3: "The bedroom", 4: "Got it, thanks!"}
    ranked = [(4, 3.0), (2, 3.0), (3, 2.0), (1, 1.0)]
    assert recall.distinct_texts(ranked, texts.__getitem__) == [(4, 3.0), (3, 2.0)]
    assert recall.same_text(" Got\tit,\nTHANKS! ") == "got it, thanks!"
    assert recall.distinct_texts([], texts.__getitem__) == []


def test_one_icu_pass_over_a_texts_runs_segments_each_run_as_alone() -> None:
    """The runs of a text written without spaces are segmented in one ICU pass (a break
    iterator costs ~10 us to make; a 24,000-character Chinese text has ~1,400 runs): each run's
    words are those it has alone, katakana joined within a run and never across two."""
    from icu4py.breakers import WordBreaker

    from litellm_memory_hook.core.recall.segment import (
        spaceless_words,
        spaceless_words_of_runs,
    )

    runs = [
        "我的猫叫小米",
        "ミ",  # a lone katakana character: dropped, never joined to the next run's
        "ケ",
        "ミケは猫です",
        "แมวของฉันชื่อมิโซะ",
        "ឆ្មារបស់ខ្ញុំ",
        "东京",
        "ひらがなだけのことば",
        "ကြောင်",
    ]
    assert spaceless_words_of_runs(runs) == [spaceless_words(r) for r in runs]
    assert spaceless_words_of_runs([]) == []
    for run in runs:  # and the same as ICU run by run
        assert [p for p in WordBreaker(" ".join([run, run]), "und") if p != " "] == 2 * list(
            WordBreaker(run, "und")
        )


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.text(
            alphabet=st.sampled_from("我的猫叫小米东京ミケはですแมวชื่อឆ្មាひらがなカタ"),
            min_size=1,
            max_size=12,
        ),
        max_size=8,
    )
)
def test_segmenting_runs_together_equals_one_by_one(runs: list[str]) -> None:
    """Property: any runs of these scripts segment alike in one pass and one by one."""
    from litellm_memory_hook.core.recall.segment import (
        spaceless_words,
        spaceless_words_of_runs,
    )

    assert spaceless_words_of_runs(runs) == [spaceless_words(r) for r in runs]
