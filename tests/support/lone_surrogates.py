"""Test-only LiteLLM callbacks: the proxy of ``tests/e2e/test_e2e_surrogates.py`` with a JSON
decoding and encoding that carry lone surrogates (LiteLLM 1.108.7 answers 400 to a request body
holding a lone surrogate escape, before any hook, and its OpenAI and Anthropic clients cannot
encode one for the model).

In ``litellm_settings.callbacks`` (this file copied next to the config), ``decoder`` before the
memory hook and ``encoder`` after it: the decoder turns the six characters ``\\ud83d`` in every
string ``content`` of the request's messages into the lone surrogate U+D83D (what ``json.loads``
makes of the JSON escape a JavaScript client sends), so the memory hook sees a lone surrogate;
the encoder turns it back into those six characters (what an encoder writing ``\\u`` escapes
sends the model), so the stand-in can receive and record it.
"""

from __future__ import annotations

from typing import Any

from litellm.integrations.custom_logger import CustomLogger

#: what the test's client writes where a JavaScript client's body holds ``"\ud83d"``.
MARKER = "\\ud83d"
#: what a decoding that accepts the escape gives.
LONE = "\ud83d"


def _replace(data: dict[str, Any], old: str, new: str) -> dict[str, Any]:
    """``data`` with ``old`` replaced by ``new`` in its messages' string contents (in place)."""
    for message in data.get("messages") or ():
        if isinstance(message, dict) and isinstance(message.get("content"), str):
            message["content"] = message["content"].replace(old, new)
    return data


class Decoder(CustomLogger):
    """Turns :data:`MARKER` into :data:`LONE` in the messages' string contents."""

    async def async_pre_call_hook(
        self, user_api_key_dict: Any, cache: Any, data: dict[str, Any], call_type: str
    ) -> dict[str, Any]:
        """The request with every :data:`MARKER` replaced by :data:`LONE`."""
        return _replace(data, MARKER, LONE)


class Encoder(CustomLogger):
    """Turns :data:`LONE` back into :data:`MARKER` in the messages' string contents."""

    async def async_pre_call_hook(
        self, user_api_key_dict: Any, cache: Any, data: dict[str, Any], call_type: str
    ) -> dict[str, Any]:
        """The request with every :data:`LONE` replaced by :data:`MARKER`."""
        return _replace(data, LONE, MARKER)


decoder = Decoder()
encoder = Encoder()
