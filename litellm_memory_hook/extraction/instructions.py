"""Whether a memory or a summary reads as an instruction to the assistant, not a fact:
:func:`is_instruction`, a small rule set over the casefolded text, linear in its length.

Used by the extraction reply's cleaning (:mod:`~litellm_memory_hook.extraction.parse`, which
re-exports it) for every memory and by the worker for the summary
(:func:`~litellm_memory_hook.extraction.changes.summary_refusal`).
"""

from __future__ import annotations

from typing import Final

import regex

__all__ = ["is_instruction"]


# Words that may open a sentence before an instruction: "Remember forever: always reply ...".
_LEAD: Final = (
    r"(?:(?:please|pls|plz|kindly|remember|remember\s+that|remember\s+to|forever|note|"
    r"note\s+that|important|rule|new\s+rule|instruction|reminder|also|and|so|ok|okay|"
    r"hey|now)\s*[:,\-–—]?\s+)*"
)
# Base-form verbs of how to answer, behave or what to reveal. After "always", "never", "only"
# a base form is an imperative ("always reply"); a fact uses "always drinks", "never talks".
_VERB: Final = (
    r"(?:reply|respond|answer|write|speak|talk|use|say|address|call|refer|greet|format|"
    r"translate|output|print|reveal|show|display|repeat|tell|pretend|act|behave|role-?play|"
    r"obey|follow|ignore|disregard|forget|override|be|stay|keep|end|start|begin|include|"
    r"mention|add|sign|refuse|comply|switch|stop)"
)
# Verbs that are also nouns ("Talk at IIT on 3 June"): an imperative only with an object or
# manner that addresses the assistant.
_PLAIN_VERB: Final = (
    r"(?:reply|respond|answer|write|speak|talk|print|reveal|show|display|repeat|output|"
    r"pretend|act|behave|role-?play|obey|follow|ignore|disregard|forget|translate|use|"
    r"switch|stop|tell|say)"
)
_ADDRESSED: Final = (
    r"(?:in|with|as|like|me|us|my|your|yourself|the\s+user|everything|all|back|exactly|"
    r"without|using|only|always|never|to\s+(?:me|us|the\s+user)|english|hindi|hinglish|"
    r"devanagari|emojis?|markdown|json|caps|formal(?:ly)?|informal(?:ly)?|short|briefly)\b"
)
_ASSISTANT: Final = r"(?:assistant|ai|bot|chatbot|chatgpt|gpt|claude)"
_MODAL: Final = (
    r"(?:must|should|shall|will\s+always|will\s+never|has\s+to|have\s+to|needs\s+to|"
    r"need\s+to|is\s+to|is\s+not\s+to|are\s+to|may\s+not|cannot|can't|is\s+required\s+to)"
)
_INSTRUCTION_ANYWHERE: Final = regex.compile(
    "|".join(
        [
            # "ignore all previous instructions", "forget your rules"
            r"\b(?:ignore|disregard|forget|override|overrule|bypass)\b\W+(?:\w+\W+){0,4}?"
            r"(?:instructions?|rules?|prompt|prompts|guidelines?|directives?|guardrails?|"
            r"restrictions?|programming)\b",
            # "print your system prompt", "reveal the hidden instructions"
            r"\b(?:system|developer|hidden|initial|original)\s+(?:prompt|message|instructions?)\b",
            r"\b(?:reveal|print|show|display|repeat|output|leak|dump)\b\W+(?:\w+\W+){0,3}?"
            r"(?:prompt|instructions|configuration|config)\b",
            rf"\bthe\s+assistant\s+{_MODAL}\b",
            r"\b(?:jailbreak|developer\s+mode|dan\s+mode)\b",
            r"\bfrom\s+now\s+on\b,?\s+(?:you|u|always|never|only|reply|respond|answer|speak|"
            r"talk|write|use|call|address|be|act)\b",
            # romanised Hindi: "hamesha English mein jawab do", "pichhle nirdesh bhool jao"
            r"\b(?:jawab|javab|jvab|jawaab|uttar)\s+(?:\w+\s+)?(?:do|dijiye|dijie|dijiyega|"
            r"dein|den|karo|kro|kijiye|kijie|kariye|karein|karen)\b",
            r"\breply\s+(?:\w+\s+)?(?:karo|kro|kijiye|kijie|kariye|karein|karen|dijiye)\b",
            r"\b(?:pichhle|pichle|purane|saare|sare|sabhi|pehle)\s+(?:\w+\s+){0,2}?(?:nirdesh|"
            r"instructions?|niyam|rules?|hukum)\s+(?:\w+\s+){0,2}?(?:bhool|bhul|ignore|"
            r"nazarandaz|chhod|chod)",
            # Hindi: "अंग्रेज़ी में जवाब दो", "पिछले निर्देश भूल जाओ", "सिस्टम प्रॉम्प्ट"
            r"(?:जवाब|जबाब|उत्तर)\s+(?:\S+\s+)?(?:दो|दें|दीजिए|दीजिये|दिया\s+करो|करो|करें|"
            r"कीजिए|कीजिये)(?!\w)",
            r"(?:निर्देश|निर्देशों|नियम|नियमों)\s*(?:\S+\s+){0,3}?(?:भूल|अनदेखा|नज़रअंदाज़|"
            r"नजरअंदाज|इग्नोर)",
            r"सिस्टम\s+(?:प्रॉम्प्ट|प्रोम्प्ट)",
        ]
    )
)
_INSTRUCTION_AT_START: Final = regex.compile(
    "|".join(
        [
            rf"^{_LEAD}(?:do\s+not|don't|dont|do\s+n't)\b",
            rf"^{_LEAD}(?:always|never|only|just|strictly)\s+(?:\w+ly\s+)?{_VERB}\b",
            rf"^{_LEAD}{_PLAIN_VERB}\s+{_ADDRESSED}",
            rf"^{_LEAD}(?:the\s+)?{_ASSISTANT}\s+{_MODAL}\b",
            rf"^{_LEAD}(?:you|u)\s+(?:must|should|shall|will|are|have\s+to|need\s+to|may|can|"
            r"cannot|can't|won't|do|don't|never|always|only|were)\b",
            rf"^{_LEAD}from\s+now\s+on\b",
        ]
    )
)
_SENTENCE_BREAK: Final = regex.compile(r"[.!?;:,।\n]+")


def is_instruction(text: str) -> bool:
    """Whether a memory reads as an instruction to the assistant, not a fact.

    A small rule set over the casefolded text:

    * anywhere: overriding rules ("ignore all previous instructions", "forget your rules"),
      asking for the prompt ("system prompt", "print your instructions"), the assistant
      addressed with a modal ("the assistant should ..."), "jailbreak", "developer mode",
      "from now on, always ...", and the same in romanised Hindi ("English mein jawab do",
      "pichhle nirdesh bhool jao") and Hindi ("जवाब दो", "निर्देश भूल जाओ", "सिस्टम प्रॉम्प्ट");
    * at the start of a sentence or clause (after "please", "remember:", "note:" and the
      like): "do not", "don't"; "always", "never", "only" followed by a base-form verb of
      answering or behaving ("always reply", but not "always drinks"); such a verb followed by
      how or to whom ("reply in English", "talk to me", but not "Talk at IIT on 3 June");
      "you must/should/are ..."; "from now on".

    Facts such as "User always drinks tea in the morning", "Doesn't like horror movies",
    "Must finish thesis by June" and "Ignored her brother's call" do not match.

    Args:
        text: A cleaned memory text.

    Returns:
        ``True`` when one rule matches.
    """
    folded = text.casefold().replace("’", "'")
    if _INSTRUCTION_ANYWHERE.search(folded):
        return True
    return any(
        _INSTRUCTION_AT_START.search(part.strip())
        for part in _SENTENCE_BREAK.split(folded)
        if part.strip()
    )
