"""Review findings (extraction reply parsing): each test fails on the current code."""

from __future__ import annotations

import json

from litellm_memory_hook.extraction.parse import parse_extraction


def test_a_valid_json_reply_with_a_code_fence_inside_a_string_is_accepted() -> None:
    """The model's reply is exactly the JSON object asked for, but one memory quotes a code
    fence the user talked about (a programmer's chat). The fence "body" starts inside that
    string, holds the array ``[3, 7]`` of the next memory, and find_json returns that array
    before it ever tries the whole text: the reply is rejected as "a list, not an object", and
    the retry gets the same facts, so these lines are never extracted."""
    reply = json.dumps(
        {
            "memories": [
                "User writes notes in markdown with ``` fences",
                "User's lucky numbers are [3, 7]",
            ],
            "summary": "They talked about notes.",
        }
    )
    result = parse_extraction(reply)
    assert result.memories == (
        "User writes notes in markdown with ``` fences",
        "User's lucky numbers are [3, 7]",
    )
    assert result.summary == "They talked about notes."
