"""The stand-in model's default chat reply: a fixed rule, not a language model.

* A last user message that asks something (it holds a question mark, or its first word is a
  question word such as "what", "who", "where", "is", "do", "can") is answered by quoting the
  line it was given that shares the most words with it: ``"You told me: My cat is called
  Miso."``. The lines it looks at are the pinned memories (``<fixed_memories>``), the extracted
  memories (``<memories>``) and the recalled earlier lines (``<earlier_lines>``) of the memory
  block in the system message (:mod:`litellm_memory_hook.core.prompt`), then the earlier user
  messages of the request itself (newest first), so a fact still in the recent window counts
  too. Lines that are questions themselves, and recalled lines spoken by the assistant, are
  never quoted. Words are compared lowercased, without common function words and question
  words, and a word ending in "s" also matches it without the "s"; the highest count wins and,
  on a tie, the first line in the order above. A default-mode extracted memory's ``"User: "``
  label and a recalled line's ``[time]`` and speaker are left out of the quote.
* Anything else, and a question that shares no word with any line, is answered
  ``"Noted: <the first 60 characters of the last user message>"`` (``"Noted."`` when it is
  empty), so a demo shows which message the model saw last.

Same request, same reply.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any, Final

from litellm_memory_hook.core.messages import content_text

NOTED_CHARS: Final = 60
"""Characters of the last user message in a ``"Noted: "`` reply at most."""

QUOTE_CHARS: Final = 300
"""Characters of a quoted line at most (a longer one ends with "…")."""

_QUOTED_SECTIONS: Final = ("fixed_memories", "memories", "earlier_lines")
_QUESTION_TEXT: Final = (
    "what who whom whose where when why how which is are am was were do does did can could "
    "would will should shall may might have has had"
)
_FUNCTION_TEXT: Final = (
    "a an the and or but of to in on at for from with by about as into than then so if "
    "i me my mine myself you your yours we our us he him his she her it its they them their "
    "this that these those there here not no yes be been being any some again please tell "
    "remember know said say told just also still"
)
_QUESTION_WORDS: Final = frozenset(_QUESTION_TEXT.split())
_FUNCTION_WORDS: Final = _QUESTION_WORDS | frozenset(_FUNCTION_TEXT.split())
_WORD: Final = re.compile(r"\w+")
_EARLIER_HEAD: Final = re.compile(r"^\[[^\]]*\]\s*(?P<speaker>[^:]{1,80}?):\s*(?P<text>.*)$")
_USER_LABEL: Final = re.compile(r"^user:\s*", re.IGNORECASE)
_ASSISTANT_SPEAKERS: Final = frozenset({"assistant", "ai", "model"})


def _words(text: str) -> set[str]:
    """Content words of ``text``: lowercased, function words dropped, a plural's "s" dropped."""
    words: set[str] = set()
    for word in _WORD.findall(text.lower()):
        if word in _FUNCTION_WORDS or (len(word) < 2 and word.isascii()):
            continue
        words.add(word[:-1] if len(word) > 3 and word.endswith("s") else word)
    return words


def is_question(text: str) -> bool:
    """Whether ``text`` asks something: a question mark (``?``, ``？``) or a question word first."""
    if "?" in text or "？" in text:
        return True
    first = _WORD.search(text.lower())
    return first is not None and first.group() in _QUESTION_WORDS


def _section_items(text: str, name: str) -> list[str]:
    """The ``- item`` lines of every ``<name>...</name>`` section of ``text``, bullets removed."""
    items: list[str] = []
    for match in re.finditer(rf"<{name}>\n(.*?)\n</{name}>", text, re.DOTALL):
        items.extend(line[2:].strip() for line in match.group(1).split("\n") if line[:2] == "- ")
    return [item for item in items if item]


def _memory_lines(system_texts: Iterable[str]) -> list[str]:
    """Quotable lines of the memory block: pinned, extracted, then recalled (speaker removed)."""
    lines: list[str] = []
    for text in system_texts:
        for name in _QUOTED_SECTIONS:
            for item in _section_items(text, name):
                if name != "earlier_lines":
                    lines.append(_USER_LABEL.sub("", item))
                    continue
                head = _EARLIER_HEAD.match(item)
                if head is None:
                    lines.append(item)
                elif head.group("speaker").strip().lower() not in _ASSISTANT_SPEAKERS:
                    lines.append(head.group("text"))
    return lines


_TAIL_OPEN = ("<memory_context>", "<memory_reminder>")
_TAIL_CLOSE = "</memory_reminder>"


def _split_tail(text: str) -> tuple[str, str]:
    """A user message's leading memory data (the hook's cache layout puts its volatile tail
    there for providers that move system messages to the top) and the user's own words."""
    if text.startswith(_TAIL_OPEN) and _TAIL_CLOSE in text:
        end = text.index(_TAIL_CLOSE) + len(_TAIL_CLOSE)
        return text[:end], text[end:].lstrip()
    return "", text


def _user_text(message: Any) -> str | None:
    """What the user wrote in a user message (memory data before it left out)."""
    if isinstance(message, dict) and message.get("role") == "user":
        return _split_tail(content_text(message.get("content")))[1]
    return None


def best_line(question: str, lines: Sequence[str]) -> str | None:
    """The line of ``lines`` sharing the most content words with ``question`` (the first on a
    tie), skipping lines that are questions; ``None`` when none shares a word."""
    wanted = _words(question)
    best: str | None = None
    best_score = 0
    for line in lines:
        if not line or is_question(line):
            continue
        score = len(wanted & _words(line))
        if score > best_score:
            best, best_score = line, score
    return best


def _cut(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def noted(text: str) -> str:
    """``"Noted: <the first 60 characters of text, whitespace collapsed>"``, or ``"Noted."``."""
    snippet = " ".join(text.split())[:NOTED_CHARS]
    return f"Noted: {snippet}" if snippet else "Noted."


def default_reply(body: dict[str, Any]) -> str:
    """The stand-in's reply to a chat body (``{"messages": [...]}``) with nothing queued.

    Returns:
        ``"You told me: <line>"`` for a question a given line answers (module docstring), else
        ``"Noted: <start of the last user message>"``.
    """
    raw = body.get("messages")
    messages: list[Any] = raw if isinstance(raw, list) else []
    last_index = next(
        (i for i in range(len(messages) - 1, -1, -1) if _user_text(messages[i]) is not None), None
    )
    last = "" if last_index is None else (_user_text(messages[last_index]) or "")
    if last_index is None or not is_question(last):
        return noted(last)
    system_texts = [
        content_text(m.get("content"))
        for m in messages
        if isinstance(m, dict) and m.get("role") in ("system", "developer")
    ]
    system_texts += [
        tail
        for m in messages
        if isinstance(m, dict) and m.get("role") == "user"
        for tail in (_split_tail(content_text(m.get("content")))[0],)
        if tail
    ]
    earlier = [_user_text(m) for m in reversed(messages[:last_index])]
    lines = _memory_lines(system_texts) + [text for text in earlier if text]
    line = best_line(last, lines)
    return noted(last) if line is None else f"You told me: {_cut(line, QUOTE_CHARS)}"
