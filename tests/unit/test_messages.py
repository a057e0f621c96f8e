"""Message shapes: parts, blanks, grapheme-safe cuts, the new turn."""

from __future__ import annotations

import regex
from hypothesis import given
from hypothesis import strategies as st

from litellm_memory_hook.core.message_text import content_text, is_blank, keep_tail, typed_text
from litellm_memory_hook.core.messages import is_valid_request, split_request
from litellm_memory_hook.core.stored_messages import message_to_turn

C25_CONTENT = [
    {"type": "text", "text": "Remember: my locker is 42."},
    {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KG" + "A" * 5000}},
    {"type": "input_audio", "input_audio": {"data": "UklGR" * 1000, "format": "wav"}},
]


def test_parts_give_text_and_placeholders_never_base64() -> None:
    """Case C25: text plus [image]/[audio] placeholders; base64 is never kept."""
    assert content_text(C25_CONTENT) == "Remember: my locker is 42.\n[image]\n[audio]"
    turn = message_to_turn({"role": "user", "content": C25_CONTENT}, ts_ms=1)
    assert turn is not None and "base64" not in turn.text and len(turn.text) < 60


def test_typed_text_leaves_out_media_and_their_stored_placeholders() -> None:
    """What the user typed, for the reminder's script and recall: no [image]/[audio] for the
    client's media parts, nor for the placeholder parts a stored message holds in their
    place (a stored photo with a Japanese question read as partly Latin text)."""
    assert typed_text(C25_CONTENT) == "Remember: my locker is 42."
    turn = message_to_turn({"role": "user", "content": C25_CONTENT}, ts_ms=1)
    assert turn is not None and turn.msg is not None
    assert typed_text(turn.msg["content"]) == "Remember: my locker is 42."
    assert typed_text("as is [image]") == "as is [image]"
    assert typed_text([{"type": "image_url", "image_url": {"url": "https://x/y.png"}}]) == ""


def test_malformed_content_is_skipped() -> None:
    """Case C25: None, bare strings and junk parts do not crash."""
    assert content_text(None) == ""
    assert content_text(["hi", None, 3, {"type": "text", "text": None}]) == "hi"


def test_blank_messages_are_not_stored() -> None:
    """Case C26: "", "   " and a lone zero-width space store nothing."""
    for text in ("", "   ", "\u200b", "\n\t"):
        assert is_blank(text)
        assert message_to_turn({"role": "user", "content": text}, ts_ms=1) is None
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    turn = message_to_turn({"role": "assistant", "content": "", "tool_calls": [call]}, ts_ms=1)
    # D01: replayed as the client sent it ("" stays "": strict servers need the key)
    assert turn is not None and turn.text == "" and turn.to_message()["content"] == ""


def test_cut_keeps_the_end_on_a_grapheme_boundary() -> None:
    """Case C22 (b, d): the tail with the question survives; no cluster is split."""
    long = "x" * 200_000 + " Question: what is 2+2?"
    cut = keep_tail(long, 8000)
    assert len(cut) == 8000 and cut.endswith("Question: what is 2+2?")
    family = "👩‍👩‍👧"
    for text in (family * 50, "क्षि" * 50):
        clusters = set(regex.findall(r"\X", text))
        for limit in range(2, 40):
            out = keep_tail(text, limit)
            assert len(out) <= limit
            assert set(regex.findall(r"\X", out[1:])) <= clusters


@given(st.text(), st.integers(min_value=2, max_value=50))
def test_cut_is_a_suffix_within_the_limit(text: str, limit: int) -> None:
    """keep_tail returns the text itself or an ellipsis and a suffix, within the limit."""
    out = keep_tail(text, limit)
    assert len(out) <= limit or out == text
    assert out == text or (out.startswith("…") and text.endswith(out[1:]))


def test_split_finds_the_new_turn() -> None:
    """The new turn is the trailing user messages; system texts are collected."""
    split = split_request(
        [
            {"role": "system", "content": "You are Tutor."},
            {"role": "user", "content": "a"},
            {"role": "assistant", "content": "b"},
            {"role": "user", "content": "c"},
        ]
    )
    assert split.system_texts == ("You are Tutor.",)
    assert [m["content"] for m in split.earlier] == ["a", "b"]
    assert [m["content"] for m in split.new] == ["c"]


def test_tool_results_bring_their_assistant_call_into_the_new_turn() -> None:
    """A tool-result turn keeps the assistant tool_calls message it answers."""
    call = {"id": "c1", "type": "function", "function": {"name": "w", "arguments": "{}"}}
    split = split_request(
        [
            {"role": "user", "content": "weather?"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "31C"},
        ]
    )
    assert [m["role"] for m in split.new] == ["assistant", "tool"]


def test_head_cut_keeps_whole_graphemes() -> None:
    """Section budgets cut the start of a text without splitting a conjunct or an emoji."""
    from litellm_memory_hook.core.message_text import keep_head

    for text in ("क्षि" * 50, "👩‍👩‍👧" * 50, "plain text " * 50):
        clusters = set(regex.findall(r"\X", text))
        for limit in range(2, 60):
            out = keep_head(text, limit)
            assert len(out) <= limit and out.endswith("…")
            assert text.startswith(out[:-1])
            assert set(regex.findall(r"\X", out[:-1])) <= clusters


def test_a_user_part_the_proxy_rejects_makes_the_request_invalid() -> None:
    """With the proxy's list of user part types, a user message holding another part (an
    Anthropic-style ``tool_result``) is invalid, so the hook passes the request through as
    sent; parts of other roles are not judged by that list (LiteLLM checks user messages only);
    without a list any part type is valid. The hook reads LiteLLM's own list."""
    from litellm.types.llms.openai import ValidUserMessageContentTypes

    from litellm_memory_hook.proxy.request_data import USER_PART_TYPES

    assert frozenset(ValidUserMessageContentTypes) == USER_PART_TYPES
    types = frozenset({"text", "image_url"})
    text = {"type": "text", "text": "hi"}
    foreign = {"type": "tool_result", "tool_use_id": "t1", "content": "42"}
    assert is_valid_request([{"role": "user", "content": [text]}], types)
    assert not is_valid_request([{"role": "user", "content": [text, foreign]}], types)
    assert is_valid_request([{"role": "user", "content": [text, foreign]}])
    assert is_valid_request([{"role": "assistant", "content": [text, foreign]}], types)
    assert not is_valid_request(
        [{"role": "user", "content": "hi"}, {"role": "user", "content": [foreign]}], types
    )


def test_reasoning_counts_in_the_window_budget() -> None:
    """The reasoning a replayed message carries goes to the model with it, so it counts in the
    window's characters (review: up to 8,000 characters a message were left out, and the
    window could be many times recent_chars)."""
    from litellm_memory_hook.core.messages import message_chars

    plain = {"role": "assistant", "content": "Done."}
    assert message_chars(plain) == 5
    thought = {**plain, "reasoning_content": "r" * 8000}
    assert message_chars(thought) == 8005
    blocks = {**plain, "thinking_blocks": [{"type": "thinking", "thinking": "t" * 300}, "x"]}
    assert message_chars(blocks) == 305
