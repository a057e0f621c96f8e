"""One memo for the request path's pure functions of a text.

A proxy process sees the same texts request after request: a user's memories and summary, the
stored turns of the recent window, lines recalled again, the new message scored twice (recall,
then memory selection) and indexed once more after the reply. :func:`short_text_memo` keeps the
results for texts up to a length, so the cost is paid once per text, not once per request;
longer texts are computed each time, which bounds the memory a memo holds to about
``maxsize x max_len`` characters plus the results.

Results are shared between callers, so a memoised function must return an immutable value (a
``str``, a tuple, a frozenset, a frozen dataclass) and its other arguments must be hashable.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache, wraps
from typing import Concatenate, ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")
Text = TypeVar("Text", str, bytes, str | bytes)


def short_text_memo(
    max_len: int, maxsize: int
) -> Callable[[Callable[Concatenate[Text, P], R]], Callable[Concatenate[Text, P], R]]:
    """Memoise ``fn(text, *args)`` (LRU of ``maxsize`` entries) for texts of at most
    ``max_len`` characters (bytes for ``bytes``); longer texts call ``fn`` each time.

    The wrapper keeps ``cache_clear`` and ``cache_info`` of its LRU (``functools.lru_cache``).
    """

    def decorate(fn: Callable[Concatenate[Text, P], R]) -> Callable[Concatenate[Text, P], R]:
        cached = lru_cache(maxsize=maxsize)(fn)

        @wraps(fn)
        def call(text: Text, /, *args: P.args, **kwargs: P.kwargs) -> R:
            if len(text) <= max_len:
                return cached(text, *args, **kwargs)  # type: ignore[arg-type]
            return fn(text, *args, **kwargs)

        call.cache_clear = cached.cache_clear  # type: ignore[attr-defined]
        call.cache_info = cached.cache_info  # type: ignore[attr-defined]
        return call

    return decorate
