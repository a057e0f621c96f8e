"""Side requests: a frontend's own tasks sent to the chat's model (titles, tags, follow-ups,
search queries, autocomplete, quiet prompts). They get no memory and are never stored.

Recognised by regular expressions on the last user message (or, when there is none, the last
message), case-insensitive. The defaults cover the default task templates of:

* Open WebUI: every background task prompt starts with ``### Task:`` (title, tags, follow-up
  questions, search queries, autocomplete, emoji, image prompt);
* LibreChat: its title prompts ("a concise, 5-word-or-less title for the conversation", "Analyze
  this conversation and provide: 1. The detected language", "Please generate a concise title
  (max 40 characters)");
* SillyTavern: quiet prompts ("[Pause your roleplay", the image-prompt and impersonation ones).

Operators replace the list with ``side_request_patterns`` (an empty list turns this off); a
client can also say so itself with ``metadata.memory_mode: off``.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import regex

from litellm_memory_hook.core.messages import clean_messages, content_text

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
            the last user message's text.
    """
    messages = clean_messages(raw_messages)
    if not messages or not patterns:
        return None
    users = [m for m in messages if m.get("role") == "user"]
    text = content_text((users[-1] if users else messages[-1]).get("content"))
    for pattern, compiled in zip(patterns, _compiled(tuple(patterns)), strict=True):
        if compiled.search(text):
            return pattern
    return None
