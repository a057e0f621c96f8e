"""The stand-in model's OpenAI bodies: chat completions, text completions and embeddings.

Replies whole and streamed (SSE ``data:`` lines, then ``data: [DONE]``); a token is counted as 4
characters (at least 1). Embeddings are deterministic unit-length vectors of
:data:`EMBEDDING_DIMENSIONS` floats from a SHA-256 hash of the text (no meaning modelled).
:func:`tool_rule_error` is the 400 OpenAI's chat API answers to tool traffic that is not whole.
The routes that answer with these bodies are in :mod:`litellm_memory_hook.tools.standin`.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import math
import struct
import time
import uuid
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Any, Final

from litellm_memory_hook.core.messages import content_text

EMBEDDING_DIMENSIONS: Final = 16
"""Length of an embedding vector unless the request asks for ``dimensions``."""


def tool_rule_error(messages: Sequence[Any]) -> str | None:
    """The 400 OpenAI's chat API answers to tool traffic that is not whole, else ``None``: a
    ``tool`` message that answers no call of the assistant ``tool_calls`` message right before
    it (other results between), and a call left without its result (before the next message,
    or at the end)."""
    open_ids: set[str] = set()
    for message in [*messages, None]:  # None: the end, where every call must be answered
        role = message.get("role") if isinstance(message, dict) else None
        if role == "tool":
            answered = message.get("tool_call_id") if isinstance(message, dict) else None
            if not isinstance(answered, str) or answered not in open_ids:
                return (
                    "Invalid parameter: messages with role 'tool' must be a response to a "
                    "preceeding message with 'tool_calls'."
                )
            open_ids.discard(answered)
            continue
        if open_ids:
            return (
                "An assistant message with 'tool_calls' must be followed by tool messages "
                "responding to each 'tool_call_id'. The following tool_call_ids did not have "
                f"response messages: {', '.join(sorted(open_ids))}"
            )
        calls = (
            message.get("tool_calls") if isinstance(message, dict) and role == "assistant" else None
        )
        open_ids = {str(c.get("id")) for c in calls or () if isinstance(c, dict)}
    return None


# --- text completions and embeddings -------------------------------------------------------


def prompt_inputs(value: Any) -> list[tuple[str, int]]:
    """A ``prompt`` / ``input`` value as (text, token count) pairs.

    A string, a list of strings, a token list or a list of token lists; a token list's text is
    its token ids joined by spaces.
    """
    if isinstance(value, str):
        return [(value, _tokens(value))]
    if not isinstance(value, list) or not value:
        return []
    if all(isinstance(v, int) for v in value):
        return [(" ".join(str(v) for v in value), len(value))]
    pairs: list[tuple[str, int]] = []
    for item in value:
        if isinstance(item, str):
            pairs.append((item, _tokens(item)))
        elif isinstance(item, list):
            pairs.append((" ".join(str(v) for v in item), len(item)))
    return pairs


def _tokens(text: str) -> int:
    return max(1, len(text) // 4)


def embeddings(body: dict[str, Any], inputs: Sequence[tuple[str, int]]) -> dict[str, Any]:
    """The embeddings reply for ``inputs`` (from :func:`prompt_inputs`, not empty): one vector
    each, ``dimensions`` long when the body asks for 1-4096, as base64 float32 when it asks
    ``encoding_format: "base64"``."""
    dimensions = body.get("dimensions")
    if not isinstance(dimensions, int) or not 1 <= dimensions <= 4096:
        dimensions = EMBEDDING_DIMENSIONS
    as_base64 = body.get("encoding_format") == "base64"
    data = []
    for index, (text, _) in enumerate(inputs):
        vector = embedding_vector(text, dimensions)
        encoded: Any = _base64_floats(vector) if as_base64 else vector
        data.append({"object": "embedding", "index": index, "embedding": encoded})
    used = sum(tokens for _, tokens in inputs)
    return {
        "object": "list",
        "data": data,
        "model": str(body.get("model", "standin")),
        "usage": {"prompt_tokens": used, "total_tokens": used},
    }


def embedding_vector(text: str, dimensions: int = EMBEDDING_DIMENSIONS) -> list[float]:
    """A deterministic unit-length vector for ``text`` (SHA-256 based; no meaning modelled)."""
    raw = b""
    block = 0
    while len(raw) < 2 * dimensions:
        raw += hashlib.sha256(block.to_bytes(4, "big") + text.encode("utf-8")).digest()
        block += 1
    values = [
        int.from_bytes(raw[2 * i : 2 * i + 2], "big") / 32767.5 - 1.0 for i in range(dimensions)
    ]
    norm = math.sqrt(sum(v * v for v in values)) or 1.0
    return [v / norm for v in values]


def _base64_floats(vector: Sequence[float]) -> str:
    return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")


def _completion_usage(prompts: Iterable[str], texts: Iterable[str]) -> dict[str, int]:
    prompt_tokens = sum(_tokens(p) for p in prompts)
    completion_tokens = sum(_tokens(t) for t in texts)
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def text_completion(texts: Sequence[str], prompts: Sequence[str], model: str) -> dict[str, Any]:
    return {
        "id": f"cmpl-{uuid.uuid4().hex[:12]}",
        "object": "text_completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {"text": text, "index": index, "finish_reason": "stop", "logprobs": None}
            for index, text in enumerate(texts)
        ],
        "usage": _completion_usage(prompts, texts),
    }


async def stream_text_completion(
    texts: Sequence[str], prompts: Sequence[str], model: str, body: dict[str, Any], delay: float
) -> AsyncIterator[str]:
    ident = f"cmpl-{uuid.uuid4().hex[:12]}"
    created = int(time.time())

    def chunk(choices: list[dict[str, Any]], **extra: Any) -> str:
        payload = {
            "id": ident,
            "object": "text_completion",
            "created": created,
            "model": model,
            "choices": choices,
            **extra,
        }
        return f"data: {json.dumps(payload)}\n\n"

    for index, text in enumerate(texts):
        for i, word in enumerate(text.split(" ") if text else ()):
            if delay:
                await asyncio.sleep(delay)
            piece = word if i == 0 else " " + word
            yield chunk([{"text": piece, "index": index, "finish_reason": None, "logprobs": None}])
        yield chunk([{"text": "", "index": index, "finish_reason": "stop", "logprobs": None}])
    options = body.get("stream_options") or {}
    if options.get("include_usage"):
        yield chunk([], usage=_completion_usage(prompts, texts))
    yield "data: [DONE]\n\n"


# --- chat completions --------------------------------------------------------


def _usage(body: dict[str, Any], text: str) -> dict[str, int]:
    prompt = sum(
        len(content_text(m.get("content")))
        for m in body.get("messages") or ()
        if isinstance(m, dict)
    )
    prompt_tokens, completion_tokens = max(1, prompt // 4), max(1, len(text) // 4)
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def chat_completion(spec: dict[str, Any], model: str, body: dict[str, Any]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": spec.get("content")}
    if spec.get("tool_calls"):
        message["tool_calls"] = spec["tool_calls"]
    for key in ("audio", "refusal"):  # an audio-output model's reply, a refusal
        if spec.get(key) is not None:
            message[key] = spec[key]
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if spec.get("tool_calls") else "stop",
            }
        ],
        "usage": _usage(body, str(spec.get("content") or "")),
    }


async def stream_chat(spec: dict[str, Any], model: str, body: dict[str, Any]) -> AsyncIterator[str]:
    ident = f"chatcmpl-{uuid.uuid4().hex[:12]}"
    created = int(time.time())
    delay = float(spec.get("chunk_delay_s", 0))

    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        payload = {
            "id": ident,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return f"data: {json.dumps(payload)}\n\n"

    text = str(spec.get("content") or "")
    yield chunk({"role": "assistant", "content": ""})
    words = text.split(" ")
    for i, word in enumerate(words):
        if delay:
            await asyncio.sleep(delay)
        yield chunk({"content": word if i == 0 else " " + word})
    for index, call in enumerate(spec.get("tool_calls") or ()):
        yield chunk({"tool_calls": [{"index": index, **call}]})
    audio = spec.get("audio")
    if isinstance(audio, dict):  # the id first, then the transcript word by word (OpenAI)
        yield chunk({"audio": {"id": audio.get("id"), "expires_at": audio.get("expires_at")}})
        for i, word in enumerate(str(audio.get("transcript") or "").split(" ")):
            yield chunk({"audio": {"transcript": word if i == 0 else " " + word}})
    if spec.get("refusal") is not None:
        yield chunk({"refusal": spec["refusal"]})
    yield chunk({}, "tool_calls" if spec.get("tool_calls") else "stop")
    options = body.get("stream_options") or {}
    if options.get("include_usage"):
        payload = {
            "id": ident,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [],
            "usage": _usage(body, text),
        }
        yield f"data: {json.dumps(payload)}\n\n"
    yield "data: [DONE]\n\n"
