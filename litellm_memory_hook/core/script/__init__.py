"""Script (and, for Latin letters, Hinglish versus English) of the user's messages, and the
reminder's clause about the language and script of the reply. Pure functions.

The final reminder of the system message names the script the reply must be written in: "Their
last message is in Devanagari, so write your reply in Devanagari."

Modules:

* :mod:`.words`: the word lists (marker words of 13 languages, the English lexicon), read once
  from the data files in ``core/script_words/``.
* :mod:`.latin`: the language of Latin text (English, Hinglish, unknown), and
  :func:`has_hinglish_marker` for recall.
* :mod:`.detect`: :func:`detect_script`, the script of one message (:class:`ScriptGuess`).
* :mod:`.conversation`: :func:`conversation_script`, the script of the reply when the last
  message tells too little.
* :mod:`.clause`: :func:`reminder_language_clause`, the reminder's sentence.
"""

from __future__ import annotations

from litellm_memory_hook.core.script.clause import (
    CLAUSE_EARLIER,
    CLAUSE_HINGLISH,
    CLAUSE_KNOWN,
    CLAUSE_LATIN_OTHER,
    CLAUSE_UNCLEAR,
    reminder_language_clause,
)
from litellm_memory_hook.core.script.conversation import (
    EARLIER_MESSAGES,
    SHORT_MESSAGE_LETTERS,
    conversation_script,
)
from litellm_memory_hook.core.script.detect import (
    FRAME_LETTERS,
    FRAME_SYLLABLES,
    MAJORITY,
    MIN_LETTERS,
    SCRIPTS,
    ScriptGuess,
    detect_script,
)
from litellm_memory_hook.core.script.latin import (
    ENGLISH,
    HINGLISH,
    HINGLISH_WEIGHT,
    MARKER_SHARE,
    has_hinglish_marker,
)
from litellm_memory_hook.core.script.words import (
    ENGLISH_LEXICON,
    ENGLISH_WORDS,
    HINGLISH_WEAK_WORDS,
    HINGLISH_WORDS,
    OTHER_LATIN_WORDS,
)

__all__ = [
    "CLAUSE_EARLIER",
    "CLAUSE_HINGLISH",
    "CLAUSE_KNOWN",
    "CLAUSE_LATIN_OTHER",
    "CLAUSE_UNCLEAR",
    "EARLIER_MESSAGES",
    "ENGLISH",
    "ENGLISH_LEXICON",
    "ENGLISH_WORDS",
    "FRAME_LETTERS",
    "FRAME_SYLLABLES",
    "HINGLISH",
    "HINGLISH_WEAK_WORDS",
    "HINGLISH_WEIGHT",
    "HINGLISH_WORDS",
    "MAJORITY",
    "MARKER_SHARE",
    "MIN_LETTERS",
    "OTHER_LATIN_WORDS",
    "SCRIPTS",
    "SHORT_MESSAGE_LETTERS",
    "ScriptGuess",
    "conversation_script",
    "detect_script",
    "has_hinglish_marker",
    "reminder_language_clause",
]
