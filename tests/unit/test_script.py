"""Tests of :mod:`litellm_memory_hook.core.script` (field cases C12 and C15)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from litellm_memory_hook.core.script import (
    EARLIER_MESSAGES,
    ENGLISH,
    ENGLISH_LEXICON,
    ENGLISH_WORDS,
    HINGLISH,
    HINGLISH_WEAK_WORDS,
    HINGLISH_WORDS,
    OTHER_LATIN_WORDS,
    SCRIPTS,
    ScriptGuess,
    conversation_script,
    detect_script,
    reminder_language_clause,
)
from tests.support.paths import DATA

SCRIPT_SENTENCES: list[tuple[str, str]] = [
    ("मेरी बहन का नाम सीमा है और वो पुणे में रहती है", "Devanagari"),
    ("আমার বোনের নাম সীমা, সে পুনেতে থাকে।", "Bengali"),
    ("ਮੈਂ ਕੱਲ੍ਹ ਤੁਹਾਨੂੰ ਮਿਲਣ ਆਵਾਂਗਾ।", "Gurmukhi"),
    ("મારી બહેન પુણેમાં રહે છે.", "Gujarati"),
    ("என் சகோதரி புனேவில் வசிக்கிறாள்.", "Tamil"),
    ("నా చెల్లెలు పూణేలో ఉంటుంది.", "Telugu"),
    ("ನನ್ನ ತಂಗಿ ಪುಣೆಯಲ್ಲಿ ವಾಸಿಸುತ್ತಾಳೆ.", "Kannada"),
    ("എന്റെ സഹോദരി പൂനെയിൽ താമസിക്കുന്നു.", "Malayalam"),
    ("أختي تعيش في بونه منذ سنتين.", "Arabic"),
    ("Моя сестра живёт в Пуне.", "Cyrillic"),
    ("Η αδερφή μου μένει στην Πούνε.", "Greek"),
    ("אחותי גרה בפונה כבר שנתיים.", "Hebrew"),
    ("พี่สาวของฉันอาศัยอยู่ที่ปูเน่", "Thai"),
    ("我的猫叫小米，它很可爱。", "Han"),
    ("明天去北京开会", "Han"),
    ("私の猫の名前はミケです。", "Japanese"),
    ("コーヒーをください", "Japanese"),
    ("제 여동생은 푸네에 살아요.", "Hangul"),
]


@pytest.mark.parametrize(("sentence", "script"), SCRIPT_SENTENCES)
def test_detects_script_of_real_sentences(sentence: str, script: str) -> None:
    """A real sentence in each supported script is detected as that script, with no language."""
    assert detect_script(sentence) == ScriptGuess(script, None)


def test_every_script_is_covered() -> None:
    """The table above covers every script the module can return besides Latin."""
    assert {script for _, script in SCRIPT_SENTENCES} | {"Latin"} == set(SCRIPTS)


@pytest.mark.parametrize(
    "sentence",
    [
        "Where does my sister live?",
        "I am going to the market tomorrow.",
        "Thanks, that was really helpful!",
        "Can you remind me what we talked about yesterday?",
    ],
)
def test_english_lines(sentence: str) -> None:
    """Ordinary English lines are Latin script, language English."""
    assert detect_script(sentence) == ScriptGuess("Latin", ENGLISH)


@pytest.mark.parametrize(
    "sentence",
    [
        "kya tum kal aa rahe ho?",
        "mujhe nahi pata yaar",
        "meri behen Seema Pune mein rehti hai",
        "acha theek hai, kal milte hain",
        "yaar mera phone kharab ho gaya",
    ],
)
def test_hinglish_lines(sentence: str) -> None:
    """Romanised Hindi (Hinglish) lines are Latin script, language Hinglish."""
    assert detect_script(sentence) == ScriptGuess("Latin", HINGLISH)


def test_latin_other_language_has_no_language() -> None:
    """Latin text without English or Hinglish marker words keeps the script, not a language."""
    assert detect_script("Me gusta mucho la pizza") == ScriptGuess("Latin", None)


@pytest.mark.parametrize(
    "text",
    ["🐱🎉", "12345", "?!... ;-)", "", "   \n ", "a", "🐱?", "١٢٣ ४५६"],
)
def test_no_letters_is_unclear(text: str) -> None:
    """Emoji, digits (of any script), punctuation, whitespace or a single letter give no guess."""
    guess = detect_script(text)
    assert guess == ScriptGuess(None, None)
    assert guess.label == ""


@pytest.mark.parametrize(
    "text",
    ["hello नमस्ते दोस्त how are", "Привет hello", "東京 Seoul 서울"],
)
def test_mixed_scripts_are_unclear(text: str) -> None:
    """Text where no script has a 70 % share of the letters gives no guess."""
    assert detect_script(text).script is None


def test_emoji_and_digits_are_ignored() -> None:
    """Emoji, digits and punctuation do not dilute the script's share."""
    assert detect_script("🎉🎉🎉 12345 सीमा!!! 🎉") == ScriptGuess("Devanagari", None)


@pytest.mark.parametrize(
    ("text", "script"),
    [
        ("このコードを説明してください: `for i in range(10): print(i)`", "Japanese"),
        ("Объясни этот код:\n```python\ndef add(a, b):\n    return a + b\n```", "Cyrillic"),
        ("Объясни, почему падает:\n```\nTraceback (most recent call last): KeyError", "Cyrillic"),
        ("मेरा नया पता है https://example.com/profile/raj-kumar देख लो", "Devanagari"),
        ("Напиши мне на ivan.petrov@example.com завтра утром", "Cyrillic"),
        ("اقرأ المقال على www.example.com/news/article-about-things", "Arabic"),
    ],
)
def test_code_and_addresses_are_not_the_language(text: str, script: str) -> None:
    """Code, web and e-mail addresses are Latin letters in any language: a Japanese question
    about a Python line was English ("write your reply in English"), a Russian one about a code
    block or with an e-mail address unclear or Latin letters ("in the same language, in Latin
    letters")."""
    assert detect_script(text) == ScriptGuess(script, None)
    assert detect_script("```\nls -la\n```").script is None  # nothing but code: unclear
    assert detect_script("What does `ls -la` do?") == ScriptGuess("Latin", "English")


def test_c12_devanagari_query_and_clause() -> None:
    """Case C12: the Hindi query is Devanagari and the clause names Devanagari explicitly."""
    guess = detect_script("सीमा कहाँ रहती है?")
    assert guess == ScriptGuess("Devanagari", None)
    assert guess.label == "Devanagari"
    assert reminder_language_clause(guess) == (
        "Their last message is in Devanagari, so write your reply in Devanagari."
    )


def test_clause_wording_per_case() -> None:
    """Hinglish, English, other Latin and unclear guesses each get their own sentence."""
    hinglish = ScriptGuess("Latin", HINGLISH)
    assert hinglish.label == "Hinglish (romanised Hindi, in Latin letters)"
    assert reminder_language_clause(hinglish) == (
        "Their last message is in Hinglish (romanised Hindi, in Latin letters), "
        "so write your reply in Hinglish in Latin letters."
    )
    assert reminder_language_clause(ScriptGuess("Latin", ENGLISH)) == (
        "Their last message is in English, so write your reply in English."
    )
    assert reminder_language_clause(ScriptGuess("Latin", None)) == (
        "Their last message is in Latin letters, so write your reply in the same language, "
        "in Latin letters."
    )
    assert reminder_language_clause(ScriptGuess(None)) == (
        "Write your reply in the language the user writes in."
    )


def test_clause_templates_can_be_overridden() -> None:
    """Operator templates replace the defaults, with {label} filled in."""
    guess = ScriptGuess("Tamil")
    assert reminder_language_clause(guess, known="Reply in {label}.") == "Reply in Tamil."
    assert reminder_language_clause(ScriptGuess(None), unclear="Mirror them.") == "Mirror them."


@settings(max_examples=200)
@given(st.text())
def test_any_text_gives_a_valid_guess(text: str) -> None:
    """Arbitrary Unicode never raises and always gives a known script (or None) and a clause."""
    guess = detect_script(text)
    assert guess.script is None or guess.script in SCRIPTS
    assert guess.language is None or guess.script == "Latin"
    assert reminder_language_clause(guess)


@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=300))
def test_ascii_fast_path_counts_like_the_script_regex(text: str) -> None:
    """The ASCII fast path of the letter count gives what the full script regex gives."""
    from litellm_memory_hook.core.script.detect import _letter_counts_by_runs, letter_counts

    assert letter_counts(text) == _letter_counts_by_runs(text)


@pytest.mark.parametrize(
    "sentence",
    [
        "Wie alt ist mein Hund?",
        "Mi perro se llama Toby.",
        "Was ist dein Lieblingsessen?",
        "Was frisst Bello gern?",
        "Was ist das?",
        "Ist es so?",
        "Is het goed?",
        "Wo bist du?",
        "Ich bin müde.",
        "Ho fame.",
        "Hai tempo domani?",
        "Kumain ka na ba?",
        "Rapatnya dipindah ke hari Senin.",
        "C'est vrai ?",
    ],
)
def test_other_latin_languages_are_not_english_or_hinglish(sentence: str) -> None:
    """Marker words shared with German, Spanish, Dutch, Italian, Tagalog, Indonesian or French
    (``mein``, ``se``, ``was``, ``is``, ``wo``, ``ho``, ``na``, ``ke``) do not make the text
    English or Hinglish: the reminder asks for the same language."""
    guess = detect_script(sentence)
    assert guess == ScriptGuess("Latin", None)
    assert reminder_language_clause(guess) == (
        "Their last message is in Latin letters, so write your reply in the same language, "
        "in Latin letters."
    )


@pytest.mark.parametrize(
    "sentence",
    [
        "My boss Jürgen wants the report by Monday.",
        "We're flying to São Paulo next week.",
        "The café near my office closed down.",
        "I went to Café de Flore and ordered a crème brûlée.",
        "My name is José María García",
        "Was the pasta at Trattoria da Mario any good?",
        'How do you say "Ich liebe dich" in German?',
        "Tell me a joke",
    ],
)
def test_english_with_foreign_names_and_words_stays_english(sentence: str) -> None:
    """A foreign name, dish or quoted phrase (accented or not) in an English line keeps it
    English."""
    assert detect_script(sentence) == ScriptGuess("Latin", ENGLISH)


@pytest.mark.parametrize(
    "sentence",
    [
        "isko English mein translate karo",
        "Bangalore mein traffic bahut hai",
        "mujhe ek email draft karna hai boss ke liye",
        "Seema ki shaadi next month hai",
        "kal mera interview hai, tips do na",
        "ghar me hoon",
    ],
)
def test_hinglish_with_english_words_stays_hinglish(sentence: str) -> None:
    """English words mixed into a Hinglish line keep it Hinglish."""
    assert detect_script(sentence) == ScriptGuess("Latin", HINGLISH)


@pytest.mark.parametrize(
    "sentence",
    [
        "Mera kutta bahut cute hai, what do you think?",
        "Ok bhai, see you tomorrow",
        "Sorry yaar, I forgot",
        "Arre yaar, what happened?",
        "Tu kaisa hai",
        "tu pagal hai kya",
        "tu kahan hai",
        "Tu mera best friend hai",
        "kal milte hain bro",
        "yaar ye kaam nahi ho raha",
    ],
)
def test_code_switched_and_short_hinglish_is_hinglish(sentence: str) -> None:
    """Hindi markers win against a few more English words (tester report: these were called
    English or nothing), and ``tu`` with ``hai`` is Hinglish, not an Italian/Spanish tie."""
    assert detect_script(sentence) == ScriptGuess("Latin", HINGLISH)


@pytest.mark.parametrize(
    "sentence",
    [
        "I love chai",
        "namaste everyone",
        "Thanks bhai, that was really helpful!",
        "Sharma ji is my neighbour",
        "I ate pani puri with my dost",
        "Please send me the updated file for the meeting jaldi",
    ],
)
def test_english_with_a_hindi_loanword_stays_english(sentence: str) -> None:
    """One Hindi word (a dish, a greeting, an honorific, a borrowed noun) in an English line that
    clearly outweighs it keeps the line English."""
    assert detect_script(sentence) == ScriptGuess("Latin", ENGLISH)


@pytest.mark.parametrize(
    "sentence",
    ["Join the beta", "Beta version please", "Mummy and me", "Me and Jo", "Jo Malone perfume"],
)
def test_weak_hinglish_words_alone_never_make_hinglish(sentence: str) -> None:
    """Words Hinglish shares with English (``beta``, ``mummy``, ``me``, the name ``Jo``) are not
    Hinglish evidence on their own (review: these English lines were told to get a Hinglish
    reply)."""
    assert detect_script(sentence).language != HINGLISH


@pytest.mark.parametrize(
    "sentence",
    ["Tu casa es bonita", "Tu sei pazzo", "Se me hizo tarde.", "Tu vais hoje?", "Ciao, come stai?"],
)
def test_tu_and_shared_words_in_other_languages_are_not_hinglish(sentence: str) -> None:
    """``tu``, ``se``, ``me`` and ``hai`` are Hinglish markers but also Spanish, Italian or
    Portuguese words: in those languages' lines they do not make Hinglish."""
    assert detect_script(sentence) == ScriptGuess("Latin", None)


def test_weak_hinglish_words_are_hinglish_words() -> None:
    """Every weak Hinglish word is a Hinglish marker word."""
    assert HINGLISH_WEAK_WORDS <= HINGLISH_WORDS


EVALUATION_SET = DATA / "latin_languages.jsonl"
"""Short chat messages (2-15 words), one JSON object a line: ``language`` (ISO 639-1 code, or
``hi-Latn`` for Hinglish), ``split``, ``text`` and for some a ``category``. Split ``heldout`` was
written before the marker lists of other languages and not tuned on; ``dev`` was tuned on;
``fresh`` (with Tagalog, Polish, Swedish, Swahili and Romanian) was written after them and not
tuned on. Category ``hi-Latn-mixed`` (code-switched and very short Hinglish) and
``en-loanwords`` (English with one or two Hindi words or Indian names) were added for the
Hinglish weighting; their ``heldout`` rows were written before it and not tuned on. A row is
scored under its category, else its language."""

EXPECTED_LANGUAGE: dict[str, str | None] = {"en": ENGLISH, "hi-Latn": HINGLISH}
"""The :attr:`ScriptGuess.language` wanted per code; every other language wants ``None``."""

MIN_ACCURACY: dict[str, float] = {
    **dict.fromkeys(["en", "hi-Latn", "de", "es", "fr", "pt", "it", "nl", "id", "tr"], 0.95),
    **dict.fromkeys(["tl", "pl", "sv", "sw", "ro"], 0.9),
    **dict.fromkeys(["hi-Latn-mixed", "en-loanwords"], 0.9),
}
"""Share of a category's messages that must get the expected guess (0-1); ``tl`` to ``ro`` have
10 messages each."""


def _accuracy(split: str | None) -> dict[str, tuple[int, int]]:
    """Per category (else language): messages guessed right, messages in all (of ``split``, or
    all splits)."""
    scores: dict[str, tuple[int, int]] = {}
    with EVALUATION_SET.open(encoding="utf-8") as lines:
        for line in lines:
            row = json.loads(line)
            if split is not None and row["split"] != split:
                continue
            want = ScriptGuess("Latin", EXPECTED_LANGUAGE.get(row["language"]))
            category = row.get("category", row["language"])
            right, total = scores.get(category, (0, 0))
            scores[category] = (right + (detect_script(row["text"]) == want), total + 1)
    return scores


def test_evaluation_set_shape() -> None:
    """At least 40 messages for each of the ten main languages, half of them held out; at
    least 60 code-switched or short Hinglish messages and 30 English ones with Hindi loanwords,
    about half of them held out."""
    scores = _accuracy(None)
    held_out = _accuracy("heldout")
    assert set(scores) == set(MIN_ACCURACY)
    for language, threshold in MIN_ACCURACY.items():
        if threshold == 0.95:
            assert scores[language][1] >= 40
            assert held_out[language][1] >= 20
    assert scores["hi-Latn-mixed"][1] >= 60
    assert held_out["hi-Latn-mixed"][1] >= 30
    assert scores["en-loanwords"][1] >= 30
    assert held_out["en-loanwords"][1] >= 15


@pytest.mark.parametrize("split", [None, "heldout", "fresh"])
def test_accuracy_per_language_on_evaluation_set(split: str | None) -> None:
    """English, Hinglish and 13 other Latin-script languages are told apart on short chat
    messages: each language reaches its :data:`MIN_ACCURACY`, on all messages and on the
    splits that were not tuned on."""
    scores = _accuracy(split)
    below = {
        language: f"{right}/{total}"
        for language, (right, total) in scores.items()
        if right < MIN_ACCURACY[language] * total
    }
    assert not below, f"below threshold: {below}; all: {scores}"


def test_other_languages_are_never_called_english_or_hinglish() -> None:
    """On the evaluation set no message of another language is labelled English or Hinglish (the
    harmful mistake: the reminder would tell the model to switch language)."""
    with EVALUATION_SET.open(encoding="utf-8") as lines:
        rows = [json.loads(line) for line in lines]
    wrong = [
        row["text"]
        for row in rows
        if row["language"] not in EXPECTED_LANGUAGE
        and detect_script(row["text"]).language is not None
    ]
    assert wrong == []


@pytest.mark.parametrize(
    "sentence",
    [
        "Please summarize the report Abhi sent yesterday",
        "Remind me to call Kal tomorrow",
    ],
)
def test_english_with_a_name_that_is_a_hindi_word_is_not_hinglish(sentence: str) -> None:
    """Plain English naming a person (Abhi, Kal) is told to the model as Hinglish ("write your
    reply in Hinglish in Latin letters"): a capitalised word after the first is a name, as the
    accent rule already assumes, and should not count as a strong Hinglish marker."""
    assert detect_script(sentence).language != HINGLISH


@pytest.mark.parametrize(
    "sentence",
    [
        "My sister Ana plays cello.",
        "Jenny adopted a beagle.",
        "Nick works at Nike.",
        "My mom loves Zara.",
        "Is Berlin cold in March?",
        "Amy teaches art in Leeds.",
        "Eva cooks paella on Sundays.",
        "Los Angeles traffic is awful.",
    ],
)
def test_short_english_with_names_is_english(sentence: str) -> None:
    """Short English lines whose few marker words tie with another language's (``my`` Polish,
    ``a`` Spanish, ``at`` Tagalog, ``is``/``in`` Dutch, ``los`` Spanish) are English through their
    ordinary English words (``sister``, ``adopted``, ``cold``) (fresh-user run: "My sister Ana
    plays cello." got the Latin-letters clause)."""
    guess = detect_script(sentence)
    assert guess == ScriptGuess("Latin", ENGLISH)
    assert reminder_language_clause(guess) == (
        "Their last message is in English, so write your reply in English."
    )


@pytest.mark.parametrize(
    "sentence",
    [
        "Invite Ana, Marco, Lena, Sofia, Tom and Kai",
        "Paris, Rome, Berlin, Vienna or Prague?",
        "Flights to Lisbon, Porto, Madrid, Seville and Malaga",
    ],
)
def test_names_do_not_count_towards_the_marker_share(sentence: str) -> None:
    """Names inside a sentence are not words of any language: a line that is mostly names is
    English on its few English words."""
    assert detect_script(sentence) == ScriptGuess("Latin", ENGLISH)


def test_a_name_keeps_its_english_count() -> None:
    """A capitalised English word inside a sentence (the month ``May``) still counts for English:
    without it "Is Paris nice in May?" ties with Dutch (``is``, ``in``)."""
    assert detect_script("Is Paris nice in May?") == ScriptGuess("Latin", ENGLISH)


@pytest.mark.parametrize(
    "sentence",
    [
        "Meeting jam sembilan",
        "Domani ho un meeting importante",
        "Morgen habe ich ein Meeting",
        "Noted! Gas connection transfer. Main yaad dila dungi",
        "Ich schaue gerade Breaking Bad",
    ],
)
def test_borrowed_english_words_do_not_make_english(sentence: str) -> None:
    """English words borrowed into another language or into Hinglish (``meeting``,
    ``connection``, a show's title) do not make the line English: one lexicon word alone is not
    enough, lexicon words do not count against Hinglish, and names count for no lexicon."""
    assert detect_script(sentence).language != ENGLISH


def test_english_lexicon_is_packaged_and_holds_no_marker_word() -> None:
    """The packaged lexicon loads, holds ordinary English words and none that a language lists
    (those keep their marker role) nor words common in other languages."""
    assert len(ENGLISH_LEXICON) > 5000
    assert {"sister", "plays", "birthday", "yellow"} <= ENGLISH_LEXICON
    assert not ENGLISH_LEXICON & (ENGLISH_WORDS | HINGLISH_WORDS)
    for words in OTHER_LATIN_WORDS.values():
        assert not ENGLISH_LEXICON & words
    assert not ENGLISH_LEXICON & {"met", "come", "pan", "party", "weekend", "nice", "john"}


NAMES_SET = DATA / "latin_names.jsonl"
"""Short chat messages with proper names (people, places, brands, numbers), one JSON object a
line: ``language`` (ISO 639-1, or ``hi-Latn``), ``split``, ``text``. 120 English (35 ``dev``:
the fresh-user run's five and lines written while tuning; 85 ``heldout``, written before the
change and not tuned on), 109 in 12 other Latin-script languages (some translate English lines;
23 ``dev``, 86 ``heldout``) and 12 Hinglish (``heldout``)."""


def _names_accuracy(split: str | None) -> dict[str, tuple[int, int]]:
    """Per language: messages guessed right, messages in all (of ``split``, or all splits)."""
    scores: dict[str, tuple[int, int]] = {}
    with NAMES_SET.open(encoding="utf-8") as lines:
        for line in lines:
            row = json.loads(line)
            if split is not None and row["split"] != split:
                continue
            want = ScriptGuess("Latin", EXPECTED_LANGUAGE.get(row["language"]))
            right, total = scores.get(row["language"], (0, 0))
            scores[row["language"]] = (right + (detect_script(row["text"]) == want), total + 1)
    return scores


@pytest.mark.parametrize("split", [None, "heldout"])
def test_accuracy_on_lines_with_names(split: str | None) -> None:
    """At least 85 % of the short English lines with names are English (65 % held out before
    the lexicon), 90 % of the Hinglish ones Hinglish, and every line of another language is
    unknown (a wrong English or Hinglish label is the harmful mistake)."""
    scores = _names_accuracy(split)
    english_right, english_total = scores["en"]
    assert english_right >= 0.85 * english_total, scores
    hinglish_right, hinglish_total = scores["hi-Latn"]
    assert hinglish_right >= 0.9 * hinglish_total, scores
    others = {
        language: score for language, score in scores.items() if language not in ("en", "hi-Latn")
    }
    assert all(right == total for right, total in others.values()), others


def test_lines_with_names_set_shape() -> None:
    """At least 80 held-out English lines and 80 held-out lines of other languages."""
    held_out = _names_accuracy("heldout")
    assert held_out["en"][1] >= 80
    assert sum(total for language, (_, total) in held_out.items() if language != "en") >= 80


RUSSIAN = "Привет, как у тебя дела сегодня?"
HINDI = "मुझे कल दिल्ली जाना है, ट्रेन कब है?"
JAPANESE = "明日は東京に行きます。よろしくお願いします。"
ENGLISH_LINE = "I will be there tomorrow at noon."


@pytest.mark.parametrize(
    ("last", "earlier", "script", "language"),
    [
        ("ok", [RUSSIAN], "Cyrillic", None),  # was "the same language, in Latin letters"
        ("thanks", [HINDI], "Devanagari", None),  # was "English"
        ("👍", [RUSSIAN], "Cyrillic", None),  # was unclear
        ("了解", [JAPANESE], "Japanese", None),  # was "Chinese characters (Han)"
        ("ok", ["", "???", ENGLISH_LINE], "Latin", ENGLISH),  # the newest clear one decides
        ("haha", ["Mera kutta bahut cute hai yaar"], "Latin", HINGLISH),
    ],
)
def test_a_short_or_ambiguous_last_message_takes_the_conversations_script(
    last: str, earlier: list[str], script: str, language: str | None
) -> None:
    guess, from_earlier = conversation_script(last, earlier)
    assert (guess.script, guess.language, from_earlier) == (script, language, True)
    clause = reminder_language_clause(guess, from_earlier=True)
    assert clause.startswith("Their last message is too short to tell; before it they wrote in")


@pytest.mark.parametrize(
    ("last", "earlier"),
    [
        ("да", [ENGLISH_LINE]),  # a short message in another script was typed on purpose
        ("東京", ["我明天去北京"]),  # Han after Chinese stays Han
        ("thanks", [ENGLISH_LINE]),  # English after English: its own guess
        ("Merci beaucoup mon ami", [RUSSIAN]),  # long enough to stand
        ("Я буду там завтра", [ENGLISH_LINE]),
        ("ok", []),
        ("ok", [f"👍 {i}" for i in range(EARLIER_MESSAGES)] + [RUSSIAN]),  # only the newest few
    ],
)
def test_a_message_that_tells_enough_keeps_its_own_script(last: str, earlier: list[str]) -> None:
    assert conversation_script(last, earlier) == (detect_script(last), False)


@pytest.mark.parametrize(
    ("last", "earlier", "script", "language"),
    [
        ("ok", ["ok", RUSSIAN], "Cyrillic", None),  # was "the same language, in Latin letters"
        ("thanks", ["ok", HINDI], "Devanagari", None),  # was "English"
        ("了解", ["了解", JAPANESE], "Japanese", None),  # was "Chinese characters (Han)"
        ("ok", ["👍", "ok", "thanks", RUSSIAN], "Cyrillic", None),
        ("了解", ["ok", "了解", JAPANESE], "Japanese", None),
        ("ok", ["東京", JAPANESE], "Japanese", None),
        ("ok", ["thanks"], "Latin", ENGLISH),  # a short one with nothing before it tells itself
    ],
)
def test_an_earlier_message_too_short_to_tell_takes_the_script_before_it(
    last: str, earlier: list[str], script: str, language: str | None
) -> None:
    """A second short reply after a message in another script kept the first short reply's own
    guess ("ok" is Latin letters, "thanks" English, "了解" Han): an earlier message that tells
    too little is read as the last one is, from the messages before it."""
    guess, from_earlier = conversation_script(last, earlier)
    assert (guess.script, guess.language, from_earlier) == (script, language, True)


def test_the_window_still_bounds_short_earlier_messages() -> None:
    """Short earlier messages are read from the messages before them only within the newest
    :data:`EARLIER_MESSAGES`: a Russian message further back does not decide."""
    earlier = ["ok"] * EARLIER_MESSAGES + [RUSSIAN]
    assert conversation_script("ok", earlier) == (detect_script("ok"), False)
    assert conversation_script("ok", earlier[1:]) == (detect_script(RUSSIAN), True)


@pytest.mark.parametrize(
    ("text", "script"),
    [
        (
            "このエラーは何ですか: TypeError: Cannot read properties of undefined (reading 'map')",
            "Japanese",
        ),
        ("このエラーは何ですか\nTypeError: Cannot read properties of undefined", "Japanese"),
        ("Ошибка: ModuleNotFoundError: No module named 'numpy'", "Cyrillic"),
        ("यह error क्या है：Connection refused by the remote host", "Devanagari"),
        ("Я использую Python и Django", "Cyrillic"),
        ("я использую python и django", "Cyrillic"),
        ("Как установить Docker на Ubuntu 22.04?", "Cyrillic"),
        ("मुझे Python सीखना है", "Devanagari"),
        ("Kal मैं Delhi जा रहा हूँ", "Devanagari"),
        ("أستخدم Python و Django في عملي", "Arabic"),
        ("저는 Python과 Django를 사용해요", "Hangul"),
        ("我在用 Python 和 Django 写网站", "Han"),
        ("Reactの使い方を教えて", "Japanese"),
        # a two-character label before a pasted line (kana, Han, Hangul: a word each)
        ("エラー: TypeError: Cannot read properties of undefined", "Japanese"),
        ("エラー: No module named numpy", "Japanese"),
        ("错误: TypeError: x is not a function", "Han"),
        ("오류: Connection refused by the remote host", "Hangul"),
    ],
)
def test_latin_embedded_in_a_sentence_of_another_script_is_that_script(
    text: str, script: str
) -> None:
    """A sentence in another script with an English error pasted after a colon, or with names
    of products and tools in it, was called English ("このエラーは何ですか: TypeError: ...") or
    unclear ("Я использую Python и Django"): the script of the sentence is the user's."""
    guess = detect_script(text)
    assert guess == ScriptGuess(script, None)
    assert reminder_language_clause(guess).startswith(f"Their last message is in {guess.label}")


@pytest.mark.parametrize(
    ("text", "script", "language"),
    [
        ("What does спасибо mean?", None, None),
        ("How do you pronounce Здравствуйте?", None, None),
        ("I love Tokyo! 東京は最高です", None, None),
        ("Translate to English please: Я люблю тебя", "Latin", None),
        ("Python да", "Latin", None),  # too few letters of Cyrillic to be a sentence
        ("Tokyo 東京", "Latin", None),
        ("yaar मस्त movie thi", "Latin", HINGLISH),
        ("The error was: ошибка", None, None),  # the colon follows Latin text only
    ],
)
def test_words_of_a_latin_language_are_not_embedded_terms(
    text: str, script: str | None, language: str | None
) -> None:
    """An English (or Hinglish) sentence about a word of another script keeps its guess: only
    Latin words no language lists (names, products, identifiers) and Latin text pasted after a
    colon that follows another script are left out of the count."""
    assert detect_script(text) == ScriptGuess(script, language)
