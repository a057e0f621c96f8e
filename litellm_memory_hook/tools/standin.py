"""A local OpenAI-compatible stand-in model for demos, tests and replays.

It answers ``POST /v1/chat/completions`` (streaming and not) with short text, records every request
body it receives, and can be scripted:

* ``GET /_standin/requests``: the recorded bodies, oldest first; ``DELETE`` clears them.
* ``POST /v1/responses``: a minimal non-streaming Responses API answer (LiteLLM sends
  ``/v1/messages`` calls for ``openai/`` models there).
* ``POST /_standin/replies``: queue replies, a JSON list; each item is a string (the reply text)
  or an object ``{"content": str | null, "tool_calls": [...], "chunk_delay_s": float,
  "status": int}`` (``status`` >= 400 answers with that HTTP error).

With nothing queued it answers ``"Noted: <the start of the last user message>"``, so a demo shows
which message the model saw last. Run it with ``litellm-memory standin --port 4010``.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from litellm_memory_hook.core.messages import content_text

DEFAULT_PORT = 4010


def _default_reply(body: dict[str, Any]) -> str:
    messages = body.get("messages") or []
    last = next(
        (
            content_text(m.get("content"))
            for m in reversed(messages)
            if isinstance(m, dict) and m.get("role") == "user"
        ),
        "",
    )
    snippet = " ".join(last.split())[:60]
    return f"Noted: {snippet}" if snippet else "Noted."


def create_app(max_records: int = 10_000) -> FastAPI:
    """The stand-in's FastAPI app; state (records, queued replies) lives in the app.

    Args:
        max_records: recorded request bodies kept (oldest dropped first).
    """
    app = FastAPI(title="litellm-memory stand-in model")
    records: deque[dict[str, Any]] = deque(maxlen=max_records)
    queued: deque[Any] = deque()

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": "standin", "object": "model"}]}

    @app.get("/_standin/requests")
    async def list_requests() -> list[dict[str, Any]]:
        return list(records)

    @app.delete("/_standin/requests")
    async def clear_requests() -> dict[str, int]:
        count = len(records)
        records.clear()
        queued.clear()
        return {"cleared": count}

    @app.post("/_standin/replies")
    async def queue_replies(request: Request) -> dict[str, int]:
        items = await request.json()
        if not isinstance(items, list):
            items = [items]
        queued.extend(items)
        return {"queued": len(queued)}

    @app.post("/v1/chat/completions")
    @app.post("/chat/completions")
    async def chat(request: Request) -> Response:
        body = await request.json()
        records.append(body)
        item: Any = queued.popleft() if queued else _default_reply(body)
        spec = {"content": item} if isinstance(item, str) else dict(item)
        status = int(spec.get("status", 200))
        if status >= 400:
            return JSONResponse({"error": {"message": "scripted error"}}, status_code=status)
        model = str(body.get("model", "standin"))
        if body.get("stream"):
            return StreamingResponse(_stream(spec, model, body), media_type="text/event-stream")
        return JSONResponse(_completion(spec, model, body))

    @app.post("/v1/responses")
    @app.post("/responses")
    async def responses(request: Request) -> Response:
        body = await request.json()
        records.append(body)
        item = queued.popleft() if queued else _default_reply(_responses_as_chat(body))
        text = item if isinstance(item, str) else str(dict(item).get("content") or "")
        return JSONResponse(_response_object(text, str(body.get("model", "standin"))))

    return app


def _responses_as_chat(body: dict[str, Any]) -> dict[str, Any]:
    """A Responses API body seen as chat messages (for the default reply)."""
    items = body.get("input")
    if isinstance(items, str):
        return {"messages": [{"role": "user", "content": items}]}
    messages = [
        {"role": i.get("role"), "content": i.get("content")}
        for i in items or ()
        if isinstance(i, dict) and i.get("role")
    ]
    return {"messages": messages}


def _response_object(text: str, model: str) -> dict[str, Any]:
    """A minimal, complete Responses API object with one output message."""
    return {
        "id": f"resp_{uuid.uuid4().hex[:12]}",
        "object": "response",
        "created_at": int(time.time()),
        "status": "completed",
        "model": model,
        "output": [
            {
                "type": "message",
                "id": f"msg_{uuid.uuid4().hex[:12]}",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        ],
        "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2},
    }


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


def _completion(spec: dict[str, Any], model: str, body: dict[str, Any]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": spec.get("content")}
    if spec.get("tool_calls"):
        message["tool_calls"] = spec["tool_calls"]
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


async def _stream(spec: dict[str, Any], model: str, body: dict[str, Any]) -> AsyncIterator[str]:
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


def run(host: str = "127.0.0.1", port: int = DEFAULT_PORT) -> None:
    """Serve the stand-in until interrupted (blocking)."""
    import uvicorn

    uvicorn.run(create_app(), host=host, port=port, log_level="warning")
