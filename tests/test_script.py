"""Tests of :mod:`litellm_memory_hook.core.script` (field cases C12 and C15)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from litellm_memory_hook.core.script import (
    ENGLISH,
    HINGLISH,
    SCRIPTS,
    ScriptGuess,
    detect_script,
    reminder_language_clause,
)

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
    from litellm_memory_hook.core.script import _letter_counts, _letter_counts_by_runs

    assert _letter_counts(text) == _letter_counts_by_runs(text)
