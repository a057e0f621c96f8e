r"""Recall of older conversation lines by rare shared words. Pure functions.

For every new user message the hook recalls lines of the conversation that lie before the recent
window: the lines sharing the rarest terms with the message, scored by the sum of
``weight(kind) * log(1 + N / (1 + df))`` over the distinct shared terms (:func:`rank`, the one
scorer of the package: recall of lines, recall across a user's chats (:func:`rank_collections`)
and the choice of stored memories (:func:`rank_texts`) all use it), then shown in time order.
How many: by default as many of the best as fit in a character budget (:func:`fill_budget`:
``recall.max_chars``, at most ``recall.max_k`` lines, each scoring at least ``recall.min_share`` of
the best), or a fixed ``recall.k`` (the seed's top 4).

Terms:

* Plain words (:func:`tokenize`): runs of letters, combining marks and digits (``regex``'s
  ``[\p{L}\p{M}\p{N}]+``, so a Devanagari vowel sign stays inside its word: सीमा, इंटरव्यू),
  after NFKC and case folding, without short words and without the stopwords of the packaged
  lists (``stopwords/en.txt`` and the request verbs :data:`REQUEST_WORDS`, tell / say / ask /
  know / remember; ``hi-latn.txt``, romanised Hindi / Hinglish; ``hi.txt``, Hindi in
  Devanagari; ``th``, ``lo``, ``km``, ``my``, ``zh``, ``ja``). Scripts written without spaces
  (Han, Hiragana, Katakana, Thai, Lao, Khmer, Myanmar) are split into words by ICU's
  dictionary-based word segmentation (``icu4py``), so lines meet on whole words only: character
  bigrams made fragments that straddle two words match unrelated lines (the false-recall set,
  ``test_false_recall.py``, holds unrelated queries in each of these scripts that must recall
  nothing).
* Extra keys (:func:`index_terms`, :func:`query_terms`), namespaced by a first character that
  no plain word can start with (plain words start with a letter, mark or digit):

  - ``~`` phonetic keys (:func:`phonetic_key`): a consonant skeleton of every Latin-script word
    (after light English suffix stripping) and of every Devanagari word (romanised with
    ``indic_transliteration``). Spelling variants of romanised Hindi meet (nahi / nhi / नहीं,
    mujhe / mjhe, rehti / रहती), so do a name in both scripts (Seema / सीमा) and English
    inflections (paint / painting). Weight 0.5. In English the skeleton also joins different
    words (parrot / party, team / time): :func:`sound_alike` tells a spelling or form of one
    word from another word, and recall (:class:`SoundAlikes`, used by
    :mod:`litellm_memory_hook.engine.recall_step`) and :func:`rank_texts` take the weight of such
    a false key off again. In romanised Hindi (a query or line holding a Hinglish marker word)
    two words that are neither English words nor names meet on the key alone (rehti / rahti);
    English words are checked there too (party / parrot in "Kal raat dost ki party thi").
  - ``^`` context keys: a message that follows a question is also indexed under the plain words
    of that question (the store passes the previous message's text as ``previous``), and a query
    looks for each of its words there too, so a reply that answers a question without repeating
    it is found. Weight 1.0.
  - ``@`` date terms, query side only (:func:`litellm_memory_hook.core.dates.query_dates`): a
    day, week, month or year the message names ("8 May 2023", "May 2023", "yesterday", "last
    week"), in the user's zone; the store finds the lines said then by time
    and :func:`date_postings` makes them postings. Weight 2.0. Usually they only lift lines
    that words matched (``BOOST_KINDS``): a message that merely contains a date recalls
    nothing by it. They lead instead (date-led recall, :func:`dates_lead`) when the message
    asks something (:func:`asks_about_time`: a question mark, or an English question word
    first) and a date is at least as rare as each of its plain words that an older line
    shares (no more lines said then than lines holding the word; the date's own words, "May",
    "2023", "yesterday", left out: :func:`litellm_memory_hook.core.dates.without_dates`): "What
    did we talk about on 2 May 2023?" when "talk" is in more lines than that day holds, or in
    none. Then :func:`rank` takes the lines said within the named spans as its candidates and
    the words only lift them (``main_kinds``): the lines of that day that the words match come
    first, then the day's other lines, those with more content words first
    (:func:`date_led_order`, :func:`content_words`; lines under ``MIN_CONTENT_WORDS`` that no
    word matched, greetings and one-word replies, left out while others remain), at most
    ``DATE_LED_K_MAX`` of them (:mod:`litellm_memory_hook.engine.recall_step`).

Every key and weight was kept because it raised evidence cover in ``bench/recall_quality.py`` or
``litellm-memory bench recall`` (LoCoMo, Maharana et al., ACL 2024, and the project's
multilingual chats). On LoCoMo dev, window + top 4 holds 64.4% of the evidence lines (plain IDF:
53.6%), window + the default budget of 2,500 characters 74.3% (plain IDF: 63.0%) in a median
prompt of 7,509 characters (64.7% and 74.4% before the window began to start with a user
message); on the multilingual chats 87.8% (plain: 69.4%), 68.4% of the hard
ones (plain: 21.0%). Date terms: +1.2 points of LoCoMo cover at 4 lines and +1.5 at 2,500
characters (123 of the 1,155 questions name a date); date-led recall then 74.25% -> 74.37% at
2,500 characters (two questions gained, none lost; the multilingual chats unchanged). Weighing
the date against the words by ``weight x IDF`` instead (the date counted twice) made dates lead
far more often and lost 3 questions against 4 gained (74.28%; 74.19% with the 8-line cap).

Bounds, so that the store's work per message is bounded: at most ``MAX_TERMS_PER_MESSAGE`` terms
per message or query (plain words first), each at most ``MAX_TERM_CHARS`` code points; at most
``MAX_DATES_PER_QUERY`` dates (:mod:`litellm_memory_hook.core.dates`).

Modules:

* :mod:`.scheme`: the kinds of terms (prefixes), their weights, :class:`TermOptions`, bounds.
* :mod:`.stopwords`: the packaged stopword lists and the folding of every term.
* :mod:`.segment`: words of scripts written without spaces (ICU).
* :mod:`.tokens`: :func:`tokenize`, a message's plain words.
* :mod:`.phonetic`: :func:`phonetic_key`, the consonant skeleton of a word.
* :mod:`.soundalike`: :func:`sound_alike`, :func:`false_sound_alikes`, :class:`SoundAlikes`.
* :mod:`.questions`: :func:`is_question`, :func:`asks_about_time`.
* :mod:`.terms`: :func:`index_terms`, :func:`query_terms`.
* :mod:`.ranking`: :func:`rank`, :func:`rank_collections`, :func:`rank_texts` (the one scorer).
* :mod:`.dated`: date-led recall (:func:`dates_lead`, :func:`date_led_order`).
* :mod:`.budget`: :func:`distinct_texts`, :func:`fill_budget`.
"""

from __future__ import annotations

from litellm_memory_hook.core.dates import DATE_PREFIX
from litellm_memory_hook.core.recall.budget import (
    distinct_texts,
    fill_budget,
    same_text,
)
from litellm_memory_hook.core.recall.dated import (
    DATE_LED_K_MAX,
    MIN_CONTENT_WORDS,
    content_words,
    date_led_order,
    date_postings,
    dates_lead,
    holders,
    matched_seqs,
)
from litellm_memory_hook.core.recall.phonetic import (
    MIN_SKELETON_CHARS,
    english_stem,
    phonetic_key,
)
from litellm_memory_hook.core.recall.questions import (
    asks_about_time,
    is_question,
)
from litellm_memory_hook.core.recall.ranking import (
    SCORE_EPSILON,
    SMALL_RANK_POSTINGS,
    Collection,
    Postings,
    idf,
    rank,
    rank_collections,
    rank_texts,
    score,
    term_weight,
)
from litellm_memory_hook.core.recall.scheme import (
    BOOST_KINDS,
    CONTEXT_PREFIX,
    DEFAULT_TERM_OPTIONS,
    DEFAULT_TERM_WEIGHTS,
    MAX_TERM_CHARS,
    MAX_TERMS_PER_MESSAGE,
    PHONETIC_PREFIX,
    PLAIN_TERM_OPTIONS,
    TermOptions,
    term_kind,
)
from litellm_memory_hook.core.recall.segment import (
    MIN_KANA_CHARS,
    MIN_SPACELESS_LETTERS,
)
from litellm_memory_hook.core.recall.soundalike import (
    INFLECTION_PREFIX,
    SoundAlikes,
    capitalised_words,
    false_sound_alikes,
    inner_names,
    is_english_word,
    load_lemmas,
    query_sound_alikes,
    sound_alike,
)
from litellm_memory_hook.core.recall.stopwords import (
    PACKAGED_STOPWORD_LISTS,
    REQUEST_WORDS,
    default_stopwords,
    load_stopwords,
)
from litellm_memory_hook.core.recall.terms import (
    index_terms,
    query_terms,
    query_terms_cached,
)
from litellm_memory_hook.core.recall.tokens import (
    MIN_WORD_CHARS,
    MIN_WORD_SYLLABLES,
    tokenize,
)

__all__ = [
    "BOOST_KINDS",
    "CONTEXT_PREFIX",
    "DATE_LED_K_MAX",
    "DATE_PREFIX",
    "DEFAULT_TERM_OPTIONS",
    "DEFAULT_TERM_WEIGHTS",
    "INFLECTION_PREFIX",
    "MAX_TERMS_PER_MESSAGE",
    "MAX_TERM_CHARS",
    "MIN_CONTENT_WORDS",
    "MIN_KANA_CHARS",
    "MIN_SKELETON_CHARS",
    "MIN_SPACELESS_LETTERS",
    "MIN_WORD_CHARS",
    "MIN_WORD_SYLLABLES",
    "PACKAGED_STOPWORD_LISTS",
    "PHONETIC_PREFIX",
    "PLAIN_TERM_OPTIONS",
    "REQUEST_WORDS",
    "SCORE_EPSILON",
    "SMALL_RANK_POSTINGS",
    "Collection",
    "Postings",
    "SoundAlikes",
    "TermOptions",
    "asks_about_time",
    "capitalised_words",
    "content_words",
    "date_led_order",
    "date_postings",
    "dates_lead",
    "default_stopwords",
    "distinct_texts",
    "english_stem",
    "false_sound_alikes",
    "fill_budget",
    "holders",
    "idf",
    "index_terms",
    "inner_names",
    "is_english_word",
    "is_question",
    "load_lemmas",
    "load_stopwords",
    "matched_seqs",
    "phonetic_key",
    "query_sound_alikes",
    "query_terms",
    "query_terms_cached",
    "rank",
    "rank_collections",
    "rank_texts",
    "same_text",
    "score",
    "sound_alike",
    "term_kind",
    "term_weight",
    "tokenize",
]
