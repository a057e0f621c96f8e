"""What the hook adds, sized to the model's declared window (24 turns and memory,
~2,500 tokens plus a 256-token reply, reached a 2,048-token model, which cut the system message
first).

Tokens are estimated, never counted with a tokenizer: one token per :data:`BYTES_PER_TOKEN`
bytes of UTF-8 (English runs ~4 characters a token, so this over-counts it by a third; CJK ~1
character of 3 bytes a token), plus :data:`MESSAGE_TOKENS` a message. LiteLLM's
``token_counter`` measured 17-44 ms per 100 KB here (1.7 s for a tokenizer's first load): on
the event loop, one pasted log would stall every user.

When the prompt would not fit, the layers shrink in :data:`SHRINK_ORDER`: recalled lines first,
then memories, the summary, the window, and pinned memories last (the user wrote them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from litellm_memory_hook.core.messages import content_text

#: UTF-8 bytes per estimated token.
BYTES_PER_TOKEN: Final = 3

#: estimated tokens of a message's framing (role, separators).
MESSAGE_TOKENS: Final = 8

#: the layers that shrink, first to last.
SHRINK_ORDER: Final = ("recall", "memories", "summary", "window", "pinned")

#: a reply without a declared length is given this share of the window at most.
DEFAULT_REPLY_SHARE: Final = 0.25


@dataclass(frozen=True)
class ModelLimit:
    """A model's window for one request, in tokens.

    Attributes:
        input_tokens: the deployment's ``max_input_tokens`` (else ``max_tokens``).
        reply_tokens: what the reply may take: the request's ``max_tokens`` /
            ``max_completion_tokens`` / ``max_output_tokens``, else the model's
            ``max_output_tokens`` capped at :data:`DEFAULT_REPLY_SHARE` of the window.
    """

    input_tokens: int
    reply_tokens: int

    @property
    def prompt_tokens(self) -> int:
        """Tokens the prompt may take."""
        return max(self.input_tokens - self.reply_tokens, 0)


def _positive(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        return None
    return int(value)


def model_limit(info: Mapping[str, Any] | None, request: Mapping[str, Any]) -> ModelLimit | None:
    """The window of a request to a deployment whose model info is ``info`` (LiteLLM's
    ``model_info`` keys), ``None`` when the deployment declares none."""
    if not info:
        return None
    window = _positive(info.get("max_input_tokens")) or _positive(info.get("max_tokens"))
    if window is None:
        return None
    asked = next(
        (
            n
            for n in (
                _positive(request.get(k))
                for k in ("max_completion_tokens", "max_tokens", "max_output_tokens")
            )
            if n is not None
        ),
        None,
    )
    if asked is None:
        declared = _positive(info.get("max_output_tokens")) or window
        asked = min(declared, int(window * DEFAULT_REPLY_SHARE))
    return ModelLimit(input_tokens=window, reply_tokens=min(asked, window))


def estimate_tokens(messages: Sequence[Any]) -> int:
    """Estimated tokens of chat messages: their text (content parts and tool calls' names and
    arguments; an image or file part counts as its placeholder) and framing. Linear."""
    total = 0
    for message in messages:
        if not isinstance(message, dict):
            continue
        size = len(content_text(message.get("content")).encode("utf-8", "replace"))
        for call in message.get("tool_calls") or ():
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict):
                for key in ("name", "arguments"):
                    value = function.get(key)
                    size += len(value.encode("utf-8", "replace")) if isinstance(value, str) else 0
        total += size // BYTES_PER_TOKEN + MESSAGE_TOKENS
    return total


def shrink(costs: Mapping[str, int], room: int) -> dict[str, int]:
    """The layers' character budgets cut, in :data:`SHRINK_ORDER`, until they add up to at
    most ``room`` (layers not named there are kept). ``costs``: a budget per layer name."""
    budgets = dict(costs)
    over = sum(budgets.values()) - max(room, 0)
    for name in SHRINK_ORDER:
        if over <= 0:
            break
        cut = min(budgets.get(name, 0), over)
        if cut:
            budgets[name] -= cut
            over -= cut
    return budgets
