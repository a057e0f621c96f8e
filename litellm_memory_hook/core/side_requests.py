"""Side requests: a frontend's own tasks sent to the chat's model (titles, tags, follow-ups,
search queries, autocomplete, quiet prompts, summaries). They get no memory and are never
stored: nothing they send or receive is a turn of the conversation.

Two rules, checked in order:

1. A request that ends with system / developer messages after the chat, no user or tool message
   since the last assistant message (SillyTavern's Summarize sends the whole chat and then its
   instruction as a system message, "always positioned last"): there is no new turn, and the
   assistant message is the last stored reply, not a prefill to complete.
2. Regular expressions, case-insensitive, searched in every message that may carry the
   frontend's instruction: the last user message, and every system / developer message after
   the first conversation message (an instruction placed after the chat or inside it; the
   leading system messages are the app's rules, never matched). The defaults cover the
   default task templates of:

* Open WebUI: every background task prompt starts with ``### Task:`` (title, tags, follow-up
  questions, search queries, autocomplete, emoji, image prompt);
* LibreChat: its title prompts ("a concise, 5-word-or-less title for the conversation", "Analyze
  this conversation and provide: 1. The detected language", "Please generate a concise title
  (max 40 characters)");
* SillyTavern: quiet prompts ("[Pause your roleplay", the image-prompt and impersonation ones).

Operators replace the list with ``requests.side_request_patterns`` (an empty list turns this off); a
client can also say so itself with ``metadata.memory_mode: off``.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import regex

from litellm_memory_hook.core.messages import clean_messages, content_text, is_system

#: what :func:`side_request_pattern` returns for a request ending with a system message after
#: the chat (rule 1 of the module docstring).
AFTER_CHAT = "system or developer message after the chat"

DEFAULT_SIDE_REQUEST_PATTERNS: tuple[str, ...] = (
    r"\A\s*###\s*Task:",  # Open WebUI background tasks
    r"5-word-or-less title for the conversation",  # LibreChat
    r"Analyze this conversation and provide:\s*1\.\s*The detected language",  # LibreChat
    r"Please generate a concise title \(max 40 characters\)",  # LibreChat assistants
    r"\A\s*\[Pause your roleplay",  # SillyTavern quiet prompts (summaries)
    r"\A\s*\[In the next response I want you to provide only a detailed comma-delimited list",
    r"\A\s*\[Write your next reply from the point of view of",  # SillyTavern impersonation
)


@lru_cache(maxsize=32)
def _compiled(patterns: tuple[str, ...]) -> tuple[regex.Pattern[str], ...]:
    return tuple(regex.compile(p, regex.IGNORECASE | regex.DOTALL) for p in patterns)


def side_request_pattern(raw_messages: object, patterns: Sequence[str]) -> str | None:
    """The first pattern that marks the request as a side request, or ``None``.

    Args:
        raw_messages: the request's ``messages``.
        patterns: regular expressions (see the module docstring); matched with ``search`` on
            the text of each message that may carry the instruction.

    Returns:
        :data:`AFTER_CHAT` for a request ending with a system message after the chat, else
        the first pattern found, else ``None``.
    """
    messages = clean_messages(raw_messages)
    if not messages:
        return None
    if ends_after_chat(messages):
        return AFTER_CHAT
    if not patterns:
        return None
    compiled = _compiled(tuple(patterns))
    for text in _instruction_texts(messages):
        for pattern, rule in zip(patterns, compiled, strict=True):
            if rule.search(text):
                return pattern
    return None


def ends_after_chat(messages: Sequence[dict[str, object]]) -> bool:
    """True when clean ``messages`` end with system / developer messages that follow an
    assistant message (no user or tool message after it): the frontend's own instruction
    about the chat so far, not a new turn. A system note after a new user message, or before
    an assistant prefill, is part of a turn and does not count."""
    end = len(messages)
    while end > 0 and is_system(messages[end - 1]):
        end -= 1
    return 0 < end < len(messages) and messages[end - 1].get("role") == "assistant"


def _instruction_texts(messages: Sequence[dict[str, object]]) -> list[str]:
    """The texts that may carry a frontend's instruction: the last user message (the last
    message when there is none), then each system / developer message after the leading ones,
    newest first."""
    users = [m for m in messages if m.get("role") == "user"]
    texts = [content_text((users[-1] if users else messages[-1]).get("content"))]
    lead = 0
    while lead < len(messages) and is_system(messages[lead]):
        lead += 1
    texts.extend(content_text(m.get("content")) for m in reversed(messages[lead:]) if is_system(m))
    return texts


def temporary_pattern(conversation: str, patterns: Sequence[str]) -> str | None:
    """The first pattern (searched, case-sensitive) that marks a conversation id as a temporary
    chat (read-only: memory read, nothing stored or extracted), or ``None``."""
    if not conversation:
        return None
    for pattern in patterns:
        if regex.search(pattern, conversation):
            return pattern
    return None
