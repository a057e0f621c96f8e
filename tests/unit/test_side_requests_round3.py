"""E04 and E05 (../shared/cases/field-cases.md, third round), the whole kind of fault: a request
that ends with a system / developer message after the chat is a side request, wherever the
frontend's instruction is the patterns find it, and conversation-id patterns mark temporary
chats (table-driven and property tests on the pure functions)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from litellm_memory_hook.core.side_requests import (
    AFTER_CHAT,
    DEFAULT_SIDE_REQUEST_PATTERNS,
    side_request_pattern,
    temporary_pattern,
)
from litellm_memory_hook.settings import MemorySettings


def m(role: str, content: str = "x") -> dict[str, Any]:
    return {"role": role, "content": content}


SYS = m("system", "You are Mira.")
CASES: list[tuple[str, list[dict[str, Any]], bool]] = [
    ("summarize after the chat", [SYS, m("user"), m("assistant"), m("system", "Sum up.")], True),
    ("developer after the chat", [m("user"), m("assistant"), m("developer", "Tags?")], True),
    ("two notes after the chat", [SYS, m("user"), m("assistant"), SYS, SYS], True),
    ("after a tool call answer", [m("user"), m("assistant"), m("system", "Title?")], True),
    ("task in a user message", [SYS, m("user", "### Task: Generate a title")], True),
    ("task in a system note mid-chat", [m("user"), m("system", "### Task: tags"), m("user")], True),
    (
        "SillyTavern quiet prompt as system after the last user message",
        [SYS, m("user"), m("assistant"), m("user"), m("system", "[Pause your roleplay. Sum")],
        True,
    ),
    ("a plain new turn", [SYS, m("user")], False),
    ("a note after a new user message", [SYS, m("user"), m("assistant"), m("user"), SYS], False),
    ("a note before a prefill", [SYS, m("user"), SYS, m("assistant", "Mira says:")], False),
    ("only system messages", [SYS, SYS], False),
    ("app rules that look like a task", [m("system", "### Task: be kind"), m("user")], False),
    ("a tool result turn", [m("user"), m("assistant"), m("tool")], False),
]


@pytest.mark.parametrize(("name", "messages", "side"), CASES, ids=[c[0] for c in CASES])
def test_side_requests_by_where_the_instruction_is(
    name: str, messages: list[dict[str, Any]], side: bool
) -> None:
    got = side_request_pattern(messages, DEFAULT_SIDE_REQUEST_PATTERNS)
    assert (got is not None) == side, (name, got)


ROLES = st.sampled_from(["user", "assistant"])
NOTES = st.lists(st.sampled_from(["system", "developer"]), min_size=1, max_size=3)


@given(
    chat=st.lists(ROLES, min_size=0, max_size=6),
    notes=NOTES,
    lead=st.booleans(),
)
def test_any_chat_ending_with_notes_after_a_reply_is_a_side_request(
    chat: list[str], notes: list[str], lead: bool
) -> None:
    """For any chat, with any patterns (none at all included): trailing system / developer
    messages right after an assistant message make a side request; after a user message they
    do not (they belong to the new turn)."""
    messages = ([SYS] if lead else []) + [m(r, "hello") for r in chat] + [m(r) for r in notes]
    got = side_request_pattern(messages, ())
    assert (got == AFTER_CHAT) == (bool(chat) and chat[-1] == "assistant")


@pytest.mark.parametrize(
    ("conversation", "patterns", "temporary"),
    [
        ("local:3f2a9c", None, True),  # Open WebUI's temporary chat (the default pattern)
        ("local:", None, True),
        ("3f2a9c", None, False),
        ("chat-local:1", None, False),
        ("LOCAL:1", None, False),  # ids are compared as sent
        ("", None, False),
        ("local:3f2a9c", [], False),  # the check turned off
        ("tmp-42", [r"\Atmp-", r"\Alocal:"], True),
        ("incognito/9", [r"\Atmp-", r"incognito"], True),
    ],
)
def test_temporary_conversation_patterns(
    conversation: str, patterns: list[str] | None, temporary: bool
) -> None:
    settings = (
        MemorySettings()
        if patterns is None
        else MemorySettings(temporary_conversation_patterns=patterns)
    )
    got = temporary_pattern(conversation, settings.requests.temporary_conversation_patterns)
    assert (got is not None) == temporary


def test_a_bad_temporary_pattern_is_a_setting_error() -> None:
    with pytest.raises(ValueError, match="bad pattern"):
        MemorySettings(temporary_conversation_patterns=["("])
