"""``bounds.json_chars`` (orjson, json for what it refuses) gives the characters json.dumps
gives, compact and with json's default separators: the bounds and a stored message's size check
read it for every stored message."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from litellm_memory_hook.core.bounds import json_chars

_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
_json = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(max_size=8), inner, max_size=4)
        | st.tuples(inner, inner)
    ),
    max_leaves=20,
)


def _old(value: Any, spaced: bool) -> int:
    separators = (", ", ": ") if spaced else (",", ":")
    return len(json.dumps(value, ensure_ascii=False, separators=separators, default=str))


@given(_json, st.booleans())
def test_the_same_count_as_json(value: Any, spaced: bool) -> None:
    assert json_chars(value, spaced=spaced) == _old(value, spaced)


def test_lone_surrogates_big_integers_and_objects() -> None:
    for value in ({"a": "\ud83d"}, [2**80], {"x": object}, {1: "int key"}, "\x7f\x1f"):
        assert json_chars(value, spaced=True) == _old(value, True)
        assert json_chars(value) == _old(value, False)
