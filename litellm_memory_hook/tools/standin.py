"""A local OpenAI-compatible stand-in model for demos, tests, replays and benchmarks.

It is not a language model: every answer comes from a fixed rule, a queue a test filled, or a
labelled dataset, so that runs are repeatable and need no network. Run it with
``litellm-memory standin --port 4010`` (options below).

Model routes (each also without the ``/v1`` prefix):

* ``POST /v1/chat/completions`` (streaming and not): a chat call or an extraction call (below).
  A chat call answers ``"Noted: <the start of the last user message>"``, so a demo shows which
  message the model saw last, except a question that a line it was given answers: then it
  quotes that memory, recalled line or earlier user message, ``"You told me: My cat is called
  Miso."`` (a word-overlap rule, not a model: :mod:`litellm_memory_hook.tools.standin_answer`).
  It answers 400 as OpenAI does to tool traffic that is not whole (a ``tool`` message that
  answers no call right before it, a call without its result:
  :func:`~litellm_memory_hook.tools.standin_openai.tool_rule_error`).
* ``POST /v1/responses``: the Responses API, streaming and not, scripted tool calls as
  ``function_call`` items, ``previous_response_id`` replayed as OpenAI does, OpenAI's 400s to
  call outputs that answer no call (:mod:`litellm_memory_hook.tools.standin_responses`); LiteLLM
  sends ``openai/`` models' Responses calls (and ``/v1/messages`` calls) there; extraction calls
  are recognised there too.
* ``POST /v1/messages``: Anthropic's Messages API, streaming and not, for LiteLLM models
  ``anthropic/<name>`` whose ``api_base`` is the stand-in. It answers 400 as Anthropic does to a
  conversation whose first message is not the user's, an empty text block or a role other than
  ``user``/``assistant`` (:mod:`litellm_memory_hook.tools.standin_anthropic`); scripted tool
  calls come back as ``tool_use`` blocks; extraction calls are recognised there too (their
  system prompt is the top-level ``system``).
* ``POST /v1/messages/count_tokens``: Anthropic's token count (``{"input_tokens": n}``, a token
  per 4 characters of the body's system, messages and tools as JSON); the bodies are recorded
  apart (``GET /_standin/count_tokens_requests``).
* ``POST /v1/completions``: legacy text completions; ``prompt`` is a string, a list of strings, a
  token list or a list of token lists, one choice per prompt with ``"Noted: <its start>"``;
  ``stream: true`` answers in the completions SSE format (``text_completion`` chunks, then
  ``data: [DONE]``; a usage chunk first when ``stream_options.include_usage`` is set).
* ``POST /v1/embeddings``: ``input`` as for ``prompt`` above; each input gets a deterministic
  unit-length vector of 16 floats (``dimensions`` changes the length) derived from a SHA-256 hash
  of its text, so equal texts get equal vectors and nothing about meaning is modelled;
  ``encoding_format: "base64"`` returns little-endian float32 bytes in base64, as OpenAI does.
* ``GET /v1/models``: the one model ``standin``.
* Any other ``/v1/...`` route answers 404 with an OpenAI-shaped error body
  (``{"error": {"message", "type", "param", "code"}}``).

Extraction calls: a chat request whose first system (or developer) message starts with the line
:data:`EXTRACTION_MARKER` comes from the memory extraction job (docs/design.md#extraction). With
nothing queued for extraction, it is answered with the JSON text ``{"memories": [...],
"summary": "..."}`` (also when ``response_format`` asks for a JSON object), by one of two modes
chosen at start: ``default``, a small deterministic rule, not a model
(:mod:`litellm_memory_hook.tools.standin_extraction`), or ``oracle`` (for benchmarks), the
LoCoMo ``observation`` labels of a LoCoMo-format file, ``--oracle FILE``
(:mod:`litellm_memory_hook.tools.standin_oracle`).

Scripting and inspection routes:

* ``POST /_standin/replies``: queue replies for chat calls (chat completions, responses and text
  completions; never used by extraction calls), a JSON list; each item is a string (the reply
  text) or an object ``{"content": str | null, "tool_calls": [...], "audio": {...},
  "refusal": str, "chunk_delay_s": float, "status": int, "message": str, "type": str, "code":
  str, "thinking": [{"thinking": str, "signature": str} | {"data": str}]}`` (``thinking``: the
  Messages route's thinking blocks; ``status`` >= 400 answers with
  that HTTP error, its body naming ``message``, ``type`` and ``code``; default "scripted
  error", ``api_error``).
* ``POST /_standin/extraction_replies``: the same for extraction calls only. A queued reply wins
  over the mode, so a test can script any extraction answer, invalid JSON included.
* ``POST /_standin/extraction_error``: ``{"status": int, "message": str, "type": str, "code":
  str}`` answers every extraction call with that HTTP error (after the queued replies) until
  it is posted again with ``status`` 0 or the records are cleared; e.g. ``{"status": 400,
  "message": "This model's maximum context length is 8192 tokens", "code":
  "context_length_exceeded"}``.
* ``GET /_standin/requests``: every recorded request body, oldest first.
* ``GET /_standin/extraction_requests``: the extraction request bodies only.
* ``DELETE /_standin/requests``: clears the records and both queues.
* ``GET /_standin/oracle``: in oracle mode, ``{fact_text: [dia_id, ...]}`` for every observation
  of the loaded file (``?sample_id=conv-26`` for one sample; dia_ids repeat across samples, so a
  file with several samples should be mapped one sample at a time); ``{}`` in default mode.
"""

from __future__ import annotations

import json
import os
import uuid
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from litellm_memory_hook.tools import standin_anthropic as anthropic
from litellm_memory_hook.tools import standin_openai as openai
from litellm_memory_hook.tools import standin_responses as responses
from litellm_memory_hook.tools.standin_answer import default_reply, noted
from litellm_memory_hook.tools.standin_extraction import (
    EXTRACTION_MARKER,
    default_extraction,
    is_extraction_call,
    parse_extraction_prompt,
)
from litellm_memory_hook.tools.standin_oracle import Oracle

__all__ = [
    "DEFAULT_PORT",
    "EXTRACTION_MARKER",
    "MODES",
    "create_app",
    "parse_extraction_prompt",
    "run",
]

DEFAULT_PORT = 4010

MODES: Final = ("default", "oracle")
"""The extraction modes: a simple deterministic rule, or labelled observations from a file."""

# --- replies -------------------------------------------------------------------------------


def _error(message: str, kind: str, status: int, code: str | None = None) -> JSONResponse:
    """An OpenAI-shaped error response."""
    payload = {"error": {"message": message, "type": kind, "param": None, "code": code}}
    return JSONResponse(payload, status_code=status)


def _spec(item: Any) -> dict[str, Any]:
    """A queued or computed reply as a spec object (a string or other JSON value is content)."""
    if isinstance(item, dict):
        return dict(item)
    return {"content": item if item is None or isinstance(item, str) else json.dumps(item)}


async def _json_body(request: Request) -> dict[str, Any] | None:
    try:
        body = await request.json()
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


class _State:
    """What one stand-in app holds: records, queues and the extraction mode."""

    def __init__(
        self, max_records: int, mode: str, oracle: Oracle | None, assistant_name: str | None
    ) -> None:
        self.records: deque[dict[str, Any]] = deque(maxlen=max_records)
        self.extraction_records: deque[dict[str, Any]] = deque(maxlen=max_records)
        self.count_records: deque[dict[str, Any]] = deque(maxlen=max_records)
        self.queued: deque[Any] = deque()
        self.extraction_queued: deque[Any] = deque()
        #: an error spec answered to every extraction call while set (after the queue)
        self.extraction_error: dict[str, Any] | None = None
        #: the answered responses, for ``previous_response_id`` (standin_responses)
        self.replays = responses.Replays()
        self.mode = mode
        self.oracle = oracle
        self.assistant_name = assistant_name

    def extraction_item(self, body: dict[str, Any], messages: Sequence[Any]) -> Any:
        """Record an extraction call; its queued reply, else the mode's JSON text."""
        self.extraction_records.append(body)
        if self.extraction_queued:
            return self.extraction_queued.popleft()
        if self.extraction_error is not None:
            return dict(self.extraction_error)
        data = parse_extraction_prompt(messages)
        if self.mode == "oracle" and self.oracle is not None:
            answer = self.oracle.extraction(data)
        else:
            answer = default_extraction(data, self.assistant_name)
        return json.dumps(answer, ensure_ascii=False)

    def chat_item(self, default: str) -> Any:
        return self.queued.popleft() if self.queued else default


def _resolve_mode(mode: str | None, oracle: str | Path | None) -> tuple[str, Oracle | None]:
    chosen = mode or ("oracle" if oracle else "default")
    if chosen not in MODES:
        raise ValueError(f"unknown stand-in mode {chosen!r} (one of: {', '.join(MODES)})")
    if chosen == "oracle" and not oracle:
        raise ValueError("oracle mode needs an oracle file (a LoCoMo-format JSON file)")
    return chosen, Oracle.load(oracle) if oracle else None


def create_app(
    max_records: int = 10_000,
    *,
    mode: str | None = None,
    oracle: str | Path | None = None,
    assistant_name: str | None = None,
) -> FastAPI:
    """The stand-in's FastAPI app; state (records, queued replies, the oracle) lives in the app.

    Args:
        max_records: recorded request bodies kept (oldest dropped first), per record list.
        mode: ``"default"`` or ``"oracle"``, how extraction calls are answered (default:
            ``"oracle"`` when ``oracle`` is given, else ``"default"``).
        oracle: a LoCoMo-format JSON file with ``observation`` labels (oracle mode).
        assistant_name: the speaker whose lines the default mode never takes facts from
            (besides "assistant").

    Raises:
        ValueError: an unknown mode, or oracle mode without a file.
        DatasetError: the oracle file cannot be read.
    """
    chosen, loaded = _resolve_mode(mode, oracle)
    state = _State(max_records, chosen, loaded, assistant_name)
    app = FastAPI(title="litellm-memory stand-in model")
    app.state.standin = state
    _add_control_routes(app, state)
    _add_model_routes(app, state)

    @app.api_route("/v1/{path:path}", methods=["GET", "POST", "PUT", "PATCH", "DELETE"])
    async def unknown(path: str, request: Request) -> Response:
        message = f"Invalid URL ({request.method} /v1/{path}): the stand-in has no such route"
        return _error(message, "invalid_request_error", 404, "unknown_url")

    return app


def _add_control_routes(app: FastAPI, state: _State) -> None:
    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": "standin", "object": "model"}]}

    @app.get("/_standin/requests")
    async def list_requests() -> list[dict[str, Any]]:
        return list(state.records)

    @app.get("/_standin/extraction_requests")
    async def list_extraction_requests() -> list[dict[str, Any]]:
        return list(state.extraction_records)

    @app.get("/_standin/count_tokens_requests")
    async def list_count_requests() -> list[dict[str, Any]]:
        return list(state.count_records)

    @app.delete("/_standin/requests")
    async def clear_requests() -> dict[str, int]:
        count = len(state.records)
        state.records.clear()
        state.extraction_records.clear()
        state.count_records.clear()
        state.queued.clear()
        state.extraction_queued.clear()
        state.extraction_error = None
        state.replays.clear()
        return {"cleared": count}

    @app.post("/_standin/replies")
    async def queue_replies(request: Request) -> dict[str, int]:
        items = await request.json()
        state.queued.extend(items if isinstance(items, list) else [items])
        return {"queued": len(state.queued)}

    @app.post("/_standin/extraction_replies")
    async def queue_extraction_replies(request: Request) -> dict[str, int]:
        items = await request.json()
        state.extraction_queued.extend(items if isinstance(items, list) else [items])
        return {"queued": len(state.extraction_queued)}

    @app.post("/_standin/extraction_error")
    async def set_extraction_error(request: Request) -> dict[str, Any]:
        spec = await request.json()
        status = int(spec.get("status", 0)) if isinstance(spec, dict) else 0
        state.extraction_error = dict(spec) if status >= 400 else None
        return {"extraction_error": state.extraction_error}

    @app.get("/_standin/oracle")
    async def oracle_map(sample_id: str | None = None) -> dict[str, list[str]]:
        return state.oracle.evidence_map(sample_id) if state.oracle is not None else {}


def _add_model_routes(app: FastAPI, state: _State) -> None:
    async def handle(
        request: Request, answer: Callable[[_State, dict[str, Any]], Response]
    ) -> Response:
        body = await _json_body(request)
        if body is None:
            return _error("the request body must be a JSON object", "invalid_request_error", 400)
        state.records.append(body)
        return answer(state, body)

    @app.post("/v1/chat/completions")
    @app.post("/chat/completions")
    async def chat(request: Request) -> Response:
        return await handle(request, _chat_response)

    @app.post("/v1/responses")
    @app.post("/responses")
    async def responses(request: Request) -> Response:
        return await handle(request, _responses_response)

    @app.post("/v1/messages")
    @app.post("/messages")
    async def messages(request: Request) -> Response:
        return await handle(request, _anthropic_response)

    @app.post("/v1/messages/count_tokens")
    @app.post("/messages/count_tokens")
    async def count_tokens(request: Request) -> Response:
        body = await _json_body(request)
        if body is None:
            return _error("the request body must be a JSON object", "invalid_request_error", 400)
        state.count_records.append(body)
        return JSONResponse(anthropic.count_tokens(body))

    @app.post("/v1/completions")
    @app.post("/completions")
    async def completions(request: Request) -> Response:
        return await handle(request, _text_completion_response)

    @app.post("/v1/embeddings")
    @app.post("/embeddings")
    async def embeddings(request: Request) -> Response:
        return await handle(request, _embeddings_response)


def _scripted_error(spec: dict[str, Any]) -> JSONResponse | None:
    status = int(spec.get("status", 200))
    if status < 400:
        return None
    code = spec.get("code")
    return _error(
        str(spec.get("message") or "scripted error"),
        str(spec.get("type") or "api_error"),
        status,
        code if isinstance(code, str) else None,
    )


def _chat_response(state: _State, body: dict[str, Any]) -> Response:
    messages = body.get("messages") or []
    if isinstance(messages, list) and (problem := openai.tool_rule_error(messages)) is not None:
        return _error(problem, "invalid_request_error", 400)
    if is_extraction_call(messages):
        spec = _spec(state.extraction_item(body, messages))
    else:
        spec = _spec(state.chat_item(default_reply(body)))
    if (error := _scripted_error(spec)) is not None:
        return error
    model = str(body.get("model", "standin"))
    if body.get("stream"):
        return StreamingResponse(
            openai.stream_chat(spec, model, body), media_type="text/event-stream"
        )
    return JSONResponse(openai.chat_completion(spec, model, body))


def _responses_response(state: _State, body: dict[str, Any]) -> Response:
    seen, problem = responses.conversation(body, state.replays)
    if seen is None:
        return JSONResponse(problem, status_code=400)
    chat_view = responses.as_chat(body.get("instructions"), seen)
    if is_extraction_call(chat_view["messages"]):
        spec = _spec(state.extraction_item(body, chat_view["messages"]))
    else:
        spec = _spec(state.chat_item(default_reply(chat_view)))
    if (error := _scripted_error(spec)) is not None:
        return error
    ident = f"resp_{uuid.uuid4().hex[:24]}"
    output = responses.output_items(str(spec.get("content") or ""), spec.get("tool_calls") or ())
    state.replays.keep(ident, [*seen, *output])
    if body.get("stream"):
        delay = float(spec.get("chunk_delay_s", 0))
        events = responses.stream(body, ident, output, seen, delay)
        return StreamingResponse(events, media_type="text/event-stream")
    return JSONResponse(responses.response_object(body, ident, output, seen))


def _anthropic_response(state: _State, body: dict[str, Any]) -> Response:
    if (problem := anthropic.rule_error(body)) is not None:
        return JSONResponse(anthropic.error_body(problem), status_code=400)
    chat_view = anthropic.as_chat(body)
    if is_extraction_call(chat_view["messages"]):
        spec = _spec(state.extraction_item(body, chat_view["messages"]))
    else:
        spec = _spec(state.chat_item(default_reply(chat_view)))
    status = int(spec.get("status", 200))
    if status >= 400:
        return JSONResponse(anthropic.error_body("scripted error", "api_error"), status_code=status)
    text = str(spec.get("content") or "")
    calls = list(spec.get("tool_calls") or ())
    thinking = list(spec.get("thinking") or ())
    if body.get("stream"):
        delay = float(spec.get("chunk_delay_s", 0))
        events = anthropic.stream(text, chat_view, delay, calls, thinking)
        return StreamingResponse(events, media_type="text/event-stream")
    return JSONResponse(anthropic.message(text, chat_view, calls, thinking))


def _text_completion_response(state: _State, body: dict[str, Any]) -> Response:
    prompts = [text for text, _ in openai.prompt_inputs(body.get("prompt"))] or [""]
    specs = [_spec(state.chat_item(noted(prompt))) for prompt in prompts]
    for spec in specs:
        if (error := _scripted_error(spec)) is not None:
            return error
    texts = [str(spec.get("content") or "") for spec in specs]
    model = str(body.get("model", "standin"))
    if body.get("stream"):
        delay = float(specs[0].get("chunk_delay_s", 0))
        stream = openai.stream_text_completion(texts, prompts, model, body, delay)
        return StreamingResponse(stream, media_type="text/event-stream")
    return JSONResponse(openai.text_completion(texts, prompts, model))


def _embeddings_response(state: _State, body: dict[str, Any]) -> Response:
    inputs = openai.prompt_inputs(body.get("input"))
    if not inputs:
        message = "'input' must be a non-empty string, list of strings, or token list(s)"
        return _error(message, "invalid_request_error", 400)
    return JSONResponse(openai.embeddings(body, inputs))


def run(
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    *,
    mode: str | None = None,
    oracle: str | Path | None = None,
    assistant_name: str | None = None,
) -> None:
    """Serve the stand-in until interrupted (blocking).

    Options left ``None`` fall back to the environment variables ``STANDIN_MODE``,
    ``STANDIN_ORACLE`` and ``STANDIN_ASSISTANT_NAME`` (so a parent process can pick a mode for
    a stand-in started with ``litellm-memory standin --port N`` alone).
    """
    import uvicorn

    app = create_app(
        mode=mode or os.environ.get("STANDIN_MODE") or None,
        oracle=oracle or os.environ.get("STANDIN_ORACLE") or None,
        assistant_name=assistant_name or os.environ.get("STANDIN_ASSISTANT_NAME") or None,
    )
    uvicorn.run(app, host=host, port=port, log_level="warning")
