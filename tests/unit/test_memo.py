"""The request path's text memo (core.memo): the same results, kept only for short texts."""

from __future__ import annotations

from typing import Any

from litellm_memory_hook.core.memo import short_text_memo


def test_short_texts_are_computed_once_and_long_ones_every_time() -> None:
    calls: list[tuple[Any, ...]] = []

    @short_text_memo(max_len=5, maxsize=2)
    def shout(text: str, times: int = 1) -> str:
        """Upper case, repeated."""
        calls.append((text, times))
        return text.upper() * times

    assert shout("abc") == shout("abc") == "ABC"
    assert calls == [("abc", 1)]
    assert shout("abc", 2) == "ABCABC"  # other arguments are part of the key
    assert calls[-1] == ("abc", 2)
    long = "abcdef"
    assert shout(long) == shout(long) == "ABCDEF"
    assert calls[-2:] == [(long, 1), (long, 1)]  # longer than max_len: never kept
    shout("x")
    shout("y")  # maxsize 2: "abc" (least recently used) goes
    before = len(calls)
    shout("abc")
    assert len(calls) == before + 1
    assert shout.__doc__ == "Upper case, repeated."
    info = shout.cache_info()  # type: ignore[attr-defined]
    assert info.maxsize == 2 and info.currsize == 2
    shout.cache_clear()  # type: ignore[attr-defined]
    assert shout.cache_info().currsize == 0  # type: ignore[attr-defined]


def test_bytes_are_measured_in_bytes() -> None:
    seen: list[bytes] = []

    @short_text_memo(max_len=3, maxsize=8)
    def size(member: bytes) -> int:
        seen.append(member)
        return len(member)

    assert size(b"abc") + size(b"abc") == 6 and seen == [b"abc"]
    assert size(b"abcd") + size(b"abcd") == 8 and seen == [b"abc", b"abcd", b"abcd"]
