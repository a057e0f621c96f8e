"""Pure parts of issue 8: side requests, stored message fidelity, assembly, alignment."""

from __future__ import annotations

import json
from typing import Any

import pytest

from litellm_memory_hook.core.alignment import align
from litellm_memory_hook.core.assemble import assemble, with_rules
from litellm_memory_hook.core.messages import split_request
from litellm_memory_hook.core.models import Turn
from litellm_memory_hook.core.side_requests import (
    DEFAULT_SIDE_REQUEST_PATTERNS,
    side_request_pattern,
)
from litellm_memory_hook.core.stored_messages import storable_message


@pytest.mark.parametrize(
    "text",
    [
        "### Task:\nGenerate a concise, 3-5 word title with an emoji summarizing the chat history.",
        "### Task:\nGenerate 1-3 broad tags categorizing the main themes of the chat history.",
        "### Task:\nSuggest 3-5 relevant follow-up questions or prompts that the user might ask",
        "### Task:\nAnalyze the chat history to determine the necessity of generating search "
        "queries, in the given language.",
        "### Task:\nYou are an autocompletion system. Continue the text in `<text>`",
        "Provide a concise, 5-word-or-less title for the conversation, using title case "
        "conventions. Only return the title itself.",
        "Analyze this conversation and provide:\n1. The detected language of the conversation",
        "[Pause your roleplay. Summarize the most important facts and events in the story so far.",
        "[Write your next reply from the point of view of Ana, using the chat history so far",
    ],
)
def test_default_side_request_templates_are_recognised(text: str) -> None:
    """Issue 8 item 5: the default task templates of Open WebUI, LibreChat and SillyTavern are
    side requests."""
    assert side_request_pattern([{"role": "user", "content": text}], DEFAULT_SIDE_REQUEST_PATTERNS)


@pytest.mark.parametrize(
    "text",
    [
        "What is my task for today?",
        "Please give my essay a title: it is about Kyoto.",
        "### Notes\nTask: buy milk",
        "Can you pause the roleplay for a second?",
    ],
)
def test_ordinary_messages_are_not_side_requests(text: str) -> None:
    """Messages that mention tasks or titles are ordinary chat."""
    messages = [{"role": "user", "content": text}]
    assert side_request_pattern(messages, DEFAULT_SIDE_REQUEST_PATTERNS) is None
    assert side_request_pattern(messages, ()) is None


def test_storable_message_keeps_fields_and_bounds_sizes() -> None:
    """Every field is kept but the client's per-request cache_control marks; base64 media
    becomes a placeholder part; a URL image stays; long names and fields are cut; the argument
    is not changed (C25, issue 9 item 5)."""
    message: dict[str, Any] = {
        "role": "user",
        "name": "n" * 100_000,
        "content": [
            {"type": "text", "text": "look", "cache_control": {"type": "ephemeral"}},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "A" * 50_000}},
            {"type": "image_url", "image_url": {"url": "https://example.invalid/cat.jpg"}},
            {"type": "input_audio", "input_audio": {"data": "B" * 10_000, "format": "wav"}},
        ],
        "x_custom": {"deep": ["v" * 20_000]},
    }
    before = json.dumps(message)
    stored = storable_message(message)
    assert json.dumps(message) == before
    assert len(stored["name"]) <= 128
    assert stored["content"][0] == {"type": "text", "text": "look"}
    assert stored["content"][1] == {"type": "text", "text": "[image]"}
    assert stored["content"][2] == message["content"][2]
    assert stored["content"][3] == {"type": "text", "text": "[audio]"}
    assert len(stored["x_custom"]["deep"][0]) <= 8000
    assert "AAAA" not in json.dumps(stored) and len(json.dumps(stored)) < 20_000


def test_split_keeps_order_prefill_and_trailing_system() -> None:
    """Issue 8 items 2-3: only leading system / developer messages are the lead; a later system
    message stays in place; a final assistant message after a user one is a prefill."""
    messages = [
        {"role": "developer", "content": "rules"},
        {"role": "user", "content": "a"},
        {"role": "system", "content": "mid"},
        {"role": "assistant", "content": "b"},
        {"role": "user", "content": "c"},
        {"role": "assistant", "content": "Mira says:"},
        {"role": "system", "content": "be brief"},
    ]
    split = split_request(messages)
    assert [m["content"] for m in split.lead] == ["rules"]
    assert [m["content"] for m in split.earlier] == ["a", "mid", "b"]
    assert [m["content"] for m in split.new] == ["c", "Mira says:", "be brief"]
    assert split.prefill_text == "Mira says:"
    assert [m["content"] for m in split.new_conversation] == ["c"]
    # the frontend's instructions between the user message and the prefill, and after it
    tail = [
        {"role": "user", "content": "c"},
        {"role": "system", "content": "[Be poetic]"},
        {"role": "developer", "content": "[Stay in character]"},
        {"role": "assistant", "content": "Mira says:"},
        {"role": "system", "content": "be brief"},
    ]
    split = split_request([*messages[:4], *tail])
    assert [m["content"] for m in split.new] == [m["content"] for m in tail]
    assert split.prefill == 3 and split.prefill_text == "Mira says:"
    assert [m["content"] for m in split.new_conversation] == ["c"]
    # an assistant message after a system message with no user message before: no prefill
    split = split_request(
        [{"role": "system", "content": "s"}, {"role": "assistant", "content": "x"}]
    )
    assert split.prefill is None and split.new == ()


def test_assemble_joins_rules_and_memory_to_the_first_system_message() -> None:
    """The client's first system message keeps its form and fields: a string gets the rules
    before and the memory after; parts get one part each; with none, ours comes first."""
    lead = [{"role": "system", "content": "client rules", "name": "app"}]
    out = assemble(
        lead,
        [{"role": "user", "content": "hi"}],
        rules="R",
        memory_block="<memory_reminder>x</memory_reminder>",
    )
    assert out[0] == {
        "role": "system",
        "content": "R\n\nclient rules\n\n<memory_reminder>x</memory_reminder>",
        "name": "app",
    }
    parts = [{"type": "text", "text": "p", "cache_control": {"type": "ephemeral"}}]
    out = assemble([{"role": "system", "content": parts}], [], rules="R", memory_block="M")
    assert out[0]["content"] == [
        {"type": "text", "text": "R"},
        *parts,
        {"type": "text", "text": "M"},
    ]
    assert assemble([], [{"role": "user", "content": "hi"}], rules="", memory_block="M")[0] == {
        "role": "system",
        "content": "M",
    }


def test_with_rules_leaves_malformed_bodies_alone() -> None:
    """A body the proxy would judge as malformed is passed on exactly as sent."""
    bad = [{"role": "user", "content": 42}]
    assert with_rules(bad, "R") is bad
    assert with_rules("junk", "R") == "junk"
    assert with_rules([{"role": "user", "content": "hi"}], "R") == [
        {"role": "system", "content": "R"},
        {"role": "user", "content": "hi"},
    ]


def _turns(*texts: str) -> list[Turn]:
    return [
        Turn(role="user" if i % 2 == 0 else "assistant", text=t, ts_ms=1, seq=i + 1)
        for i, t in enumerate(texts)
    ]


def _messages(*texts: str) -> list[dict[str, Any]]:
    return [
        {"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(texts)
    ]


def test_alignment_finds_edits_trims_and_unrelated_histories() -> None:
    """align: a full match, an edit (first difference), a client that trimmed its history, and
    an unrelated history (None)."""
    stored = _turns("a", "b", "c", "d")
    full = align(_messages("a", "b", "c", "d"), stored, 32_000)
    assert full is not None and (full.client_at, full.stored_at) == (4, 4)
    edit = align(_messages("a", "B!", "c", "d"), stored, 32_000)
    assert edit is not None and (edit.client_at, edit.stored_at) == (1, 1)
    trimmed = align(
        [{"role": "user", "content": "c"}, {"role": "assistant", "content": "d"}], stored, 32_000
    )
    assert trimmed is not None and (trimmed.client_at, trimmed.stored_at) == (2, 4)
    assert trimmed.seqs == (3, 4)
    assert align(_messages("x", "y"), stored, 32_000) is None
