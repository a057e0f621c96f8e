"""Issue 25 item 5: an extraction call puts its fixed instructions first, so they cache.

Two calls for different users, memories, summaries and lines: the system message (the marker and
the instructions) is the same text, and everything that changes is in the user message after it.
"""

from __future__ import annotations

from litellm_memory_hook.extraction.prompt import ExtractionLine, build_extraction_messages


def test_extraction_calls_share_their_instructions_as_a_prefix() -> None:
    first = build_extraction_messages(
        memories=["Has a cat called Miso."],
        pinned=["My name is Ana."],
        summary="They talked about cats.",
        lines=[ExtractionLine(1_000, "user", "I moved to Lisbon.")],
    )
    second = build_extraction_messages(
        memories=[],
        pinned=[],
        summary="",
        lines=[ExtractionLine(9_000_000, "Ravi", "Exams start Monday.")],
        timezone="Asia/Kolkata",
    )
    assert [m["role"] for m in first] == [m["role"] for m in second] == ["system", "user"]
    assert first[0] == second[0]  # the fixed part, first: a provider caches it
    assert "Lisbon" not in first[0]["content"] and "Lisbon" in first[1]["content"]
    assert "Miso" in first[1]["content"] and "Ravi" in second[1]["content"]
