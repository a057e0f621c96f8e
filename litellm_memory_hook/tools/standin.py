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
  answers no call right before it, a call without its result: :func:`tool_rule_error`).
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
:data:`EXTRACTION_MARKER` comes from the memory extraction job (docs/design.md#extraction). Its user
message holds the sections ``<current_memories>``, ``<pinned_memories>``, ``<summary>`` and
``<new_lines>`` (one ``- <date>, <speaker>: <text>`` line per message, escaped). With nothing
queued for extraction, it is answered with the JSON text ``{"memories": [...], "summary": "..."}``
(also when ``response_format`` asks for a JSON object), by one of two modes chosen at start:

* ``default``: a small deterministic rule, not a model. It keeps the current memories and adds,
  for each line not spoken by the assistant (the ``--assistant-name`` speaker, or "assistant"),
  each sentence that is not a question and holds a cue such as "my", "I am", "I'm", "I live",
  "I work", "I like", "I love", "call", "name" or the Hinglish and Hindi "mera", "meri",
  "mujhe" (as ``"User: <sentence>"``, cut to 200 characters, de-duplicated, not repeating a
  pinned memory, at most 50 memories in all). The summary is the old summary, cut so that the
  whole stays under 200 words, followed by "Then they talked about <the first words of the last
  user line's first sentence>." Same input, same output.
* ``oracle`` (for benchmarks): answers from the LoCoMo ``observation`` labels of a LoCoMo-format
  file (``--oracle FILE``). Each new line is matched to its ``dia_id`` by its escaped text
  (:func:`~litellm_memory_hook.core.escape.escape_data` on the dataset text, exact; a line the
  prompt cut short with "…" matches by its remaining start or end); the speaker, when it names a
  dataset speaker, breaks ties; the sample with the most matching lines is the conversation, and
  a text said twice in it takes the occurrence whose position fits its neighbours. The reply is
  the current memories followed by every observation with an evidence ``dia_id`` among those
  lines, in dataset order, de-duplicated; the summary is the old summary unchanged.

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

import asyncio
import base64
import hashlib
import json
import math
import os
import re
import struct
import time
import uuid
from collections import Counter, deque
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from litellm_memory_hook.core.escape import escape_data
from litellm_memory_hook.core.messages import content_text
from litellm_memory_hook.errors import DatasetError
from litellm_memory_hook.tools import standin_anthropic as anthropic
from litellm_memory_hook.tools import standin_responses as responses
from litellm_memory_hook.tools.files import read_utf8
from litellm_memory_hook.tools.standin_answer import default_reply, noted

DEFAULT_PORT = 4010

# Must equal the marker line that starts the extraction prompt's system message
# (litellm_memory_hook.extraction.prompt); the stand-in recognises extraction calls by it.
EXTRACTION_MARKER: Final = "[memory-extraction]"

MODES: Final = ("default", "oracle")
"""The extraction modes: a simple deterministic rule, or labelled observations from a file."""

EMBEDDING_DIMENSIONS: Final = 16
"""Length of an embedding vector unless the request asks for ``dimensions``."""

MAX_MEMORIES: Final = 50
"""Default mode: memories in a reply at most (current ones are always kept)."""

MAX_FACT_CHARS: Final = 200
"""Default mode: characters of one new memory at most."""

MAX_SUMMARY_WORDS: Final = 199
"""Default mode: words of the summary at most (under 200)."""

_SECTION_NAMES: Final = ("current_memories", "pinned_memories", "summary", "new_lines")
_SECTION: Final = re.compile(
    r"<(?P<name>{names})>(?P<body>.*?)(?:</(?P=name)>|(?=<(?:{names})>)|\Z)".format(
        names="|".join(_SECTION_NAMES)
    ),
    re.DOTALL,
)
_BULLET: Final = re.compile(r"^\s*(?:[-*•]|\d{1,3}[.)])\s+")
_DATE_PREFIX: Final = re.compile(
    r"^\[?\d{4}-\d{2}-\d{2}(?:[ T]\d{1,2}:\d{2}(?::\d{2})?)?(?:\s*(?:UTC|GMT|Z|[+-]\d{2}:?\d{2}))?"
    r"\]?\s*,?\s*"
)
_SPEAKER: Final = re.compile(r"^(?P<speaker>[^:]{1,80}?):\s*(?P<text>.*)$", re.DOTALL)
_PLACEHOLDER: Final = re.compile(
    r"^[(\[]?\s*(?:none|empty|nothing(?: yet)?|n/?a|no (?:pinned |new )?"
    r"(?:memories|summary|lines|messages)(?: yet)?)\s*[)\]]?\.?$",
    re.IGNORECASE,
)
_SENTENCE_END: Final = re.compile(r"(?<=[.!?।])\s+")
_FACT_CUE: Final = re.compile(
    r"\b(?:my|i am|i['’]m|i live|i work|i like|i love|call\w*|name\w*|mera|meri|mere|mujhe)\b"
    r"|मेरा|मेरी|मेरे|मुझे",
    re.IGNORECASE,
)
_ELLIPSES: Final = ("…", "...")
_MIN_PARTIAL_CHARS: Final = 12
_TOPIC_WORDS: Final = 8


# --- parsing the extraction prompt ----------------------------------------------------------


@dataclass(frozen=True)
class PromptLine:
    """One message of an extraction prompt's ``<new_lines>``: its speaker and (escaped) text."""

    speaker: str
    text: str


@dataclass(frozen=True)
class ExtractionInput:
    """What an extraction prompt holds, as the stand-in reads it."""

    memories: tuple[str, ...]
    pinned: tuple[str, ...]
    summary: str
    lines: tuple[PromptLine, ...]


def is_extraction_call(messages: Sequence[Any]) -> bool:
    """Whether the first system (or developer) message starts with :data:`EXTRACTION_MARKER`."""
    for message in messages:
        if isinstance(message, dict) and message.get("role") in ("system", "developer"):
            first = content_text(message.get("content")).lstrip().split("\n", 1)[0]
            return first.strip() == EXTRACTION_MARKER
    return False


def _sections(text: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for match in _SECTION.finditer(text):
        found.setdefault(match.group("name"), match.group("body"))
    return found


def _items(body: str) -> list[str]:
    """The non-empty, non-placeholder lines of a section, without a leading bullet."""
    items = []
    for raw in body.splitlines():
        item = _BULLET.sub("", raw, count=1).strip()
        if item and not _PLACEHOLDER.match(item):
            items.append(item)
    return items


def parse_line(item: str) -> PromptLine:
    """Read ``"<date>, <speaker>: <text>"`` (bullet already removed); each part is optional."""
    rest = _DATE_PREFIX.sub("", item, count=1)
    dated = rest != item
    match = _SPEAKER.match(rest)
    if match is not None:
        speaker = match.group("speaker").strip()
        # Without a date, only a short name before the colon is taken for a speaker.
        if dated or len(speaker.split()) <= 4:
            return PromptLine(speaker=speaker, text=match.group("text").strip())
    return PromptLine(speaker="", text=rest.strip())


def parse_extraction_prompt(messages: Sequence[Any]) -> ExtractionInput:
    """Read the sections of an extraction call (from its user messages, else from any message)."""
    texts = [
        (message.get("role"), content_text(message.get("content")))
        for message in messages
        if isinstance(message, dict)
    ]
    found = _sections("\n".join(text for role, text in texts if role == "user"))
    if not found:
        found = _sections("\n".join(text for _, text in texts))
    summary = " ".join(found.get("summary", "").split())
    return ExtractionInput(
        memories=tuple(_items(found.get("current_memories", ""))),
        pinned=tuple(_items(found.get("pinned_memories", ""))),
        summary="" if _PLACEHOLDER.match(summary) else summary,
        lines=tuple(parse_line(item) for item in _items(found.get("new_lines", ""))),
    )


# --- the default extractor -------------------------------------------------------------------


def _key(text: str) -> str:
    return " ".join(text.split()).casefold()


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    head = text[: limit - 1]
    if " " in head:
        head = head.rsplit(" ", 1)[0]
    return head.rstrip() + "…"


def _fact_sentences(text: str) -> list[str]:
    """The sentences of ``text`` that state a lasting fact by the default mode's rule."""
    sentences = (s.strip() for s in _SENTENCE_END.split(text))
    return [
        _cut(s, MAX_FACT_CHARS - len("User: "))
        for s in sentences
        if s and not s.endswith("?") and _FACT_CUE.search(s)
    ]


def default_extraction(data: ExtractionInput, assistant_name: str | None = None) -> dict[str, Any]:
    """The default mode's answer: current memories plus rule-picked user sentences.

    A deterministic stand-in for a model, documented in the module docstring.
    """
    assistants = {"assistant"} | ({_key(assistant_name)} if assistant_name else set())
    user_lines = [line for line in data.lines if _key(line.speaker) not in assistants]
    memories = list(data.memories)
    seen = {_key(m) for m in (*data.memories, *data.pinned)}
    for line in user_lines:
        for sentence in _fact_sentences(line.text):
            fact = f"User: {sentence}"
            if len(memories) >= MAX_MEMORIES:
                break
            if _key(fact) in seen or _key(sentence) in seen:
                continue
            seen.add(_key(fact))
            memories.append(fact)
    return {"memories": memories, "summary": _default_summary(data.summary, user_lines)}


def _default_summary(old: str, user_lines: Sequence[PromptLine]) -> str:
    words = old.split()
    if not user_lines:
        return " ".join(words[:MAX_SUMMARY_WORDS])
    first_sentence = _SENTENCE_END.split(user_lines[-1].text.strip(), maxsplit=1)[0]
    topic = " ".join(first_sentence.split()[:_TOPIC_WORDS]).rstrip(" .,;:!?…।")
    sentence = f"Then they talked about {topic}." if topic else "Then they talked."
    budget = MAX_SUMMARY_WORDS - len(sentence.split())
    return " ".join([*words[:budget], sentence])


# --- the oracle extractor --------------------------------------------------------------------


@dataclass(frozen=True)
class _DatasetLine:
    sample: str
    dia_id: str
    speaker: str  # escaped and case-folded
    position: int  # order within the sample


def _evidence(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return tuple(part for part in re.split(r"[\s,;]+", value) if part)
    if isinstance(value, list):
        return tuple(str(v) for v in value if v)
    return ()


def _numbered(mapping: dict[str, Any], pattern: str) -> list[Any]:
    """``mapping``'s values whose key matches ``pattern`` (one number group), by that number."""
    regex = re.compile(pattern)
    keyed = [(int(m.group(1)), value) for key, value in mapping.items() if (m := regex.match(key))]
    return [value for _, value in sorted(keyed, key=lambda pair: pair[0])]


class Oracle:
    """The observation labels of a LoCoMo-format file, indexed by the escaped text of each line.

    Args:
        samples: the file's list of samples (``sample_id``, ``conversation``, ``observation``).
    """

    def __init__(self, samples: Sequence[Any]) -> None:
        self.by_text: dict[str, list[_DatasetLine]] = {}
        self.facts: dict[str, list[tuple[str, tuple[str, ...]]]] = {}
        self.sample_order: dict[str, int] = {}
        for number, sample in enumerate(samples):
            if not isinstance(sample, dict):
                continue
            sample_id = str(sample.get("sample_id", f"sample-{number}"))
            self.sample_order.setdefault(sample_id, number)
            self._add_lines(sample_id, sample.get("conversation") or {})
            self._add_facts(sample_id, sample.get("observation") or {})

    @classmethod
    def load(cls, path: str | Path) -> Oracle:
        """Read a LoCoMo-format JSON file.

        Raises:
            DatasetError: the file is unreadable, not JSON, or not a list of samples.
        """
        text = read_utf8(Path(path), DatasetError)
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise DatasetError(f"oracle file {path} is not a JSON file: {exc}") from exc
        if not isinstance(data, list):
            raise DatasetError(f"{path}: expected a list of LoCoMo samples")
        return cls(data)

    def _add_lines(self, sample_id: str, conversation: dict[str, Any]) -> None:
        position = 0
        for session in _numbered(conversation, r"^session_(\d+)$"):
            for turn in session if isinstance(session, list) else ():
                if not isinstance(turn, dict) or not isinstance(turn.get("text"), str):
                    continue
                line = _DatasetLine(
                    sample=sample_id,
                    dia_id=str(turn.get("dia_id", "")),
                    speaker=escape_data(str(turn.get("speaker", ""))).casefold(),
                    position=position,
                )
                self.by_text.setdefault(escape_data(turn["text"]), []).append(line)
                position += 1

    def _add_facts(self, sample_id: str, observation: dict[str, Any]) -> None:
        facts = self.facts.setdefault(sample_id, [])
        for session in _numbered(observation, r"^session_(\d+)_observation$"):
            for items in session.values() if isinstance(session, dict) else ():
                for item in items if isinstance(items, list) else ():
                    if isinstance(item, list) and len(item) >= 2 and isinstance(item[0], str):
                        facts.append((item[0], _evidence(item[1])))

    def evidence_map(self, sample_id: str | None = None) -> dict[str, list[str]]:
        """``{fact_text: [dia_id, ...]}`` for every observation (of one sample when given)."""
        mapping: dict[str, list[str]] = {}
        for sample, facts in self.facts.items():
            if sample_id is not None and sample != sample_id:
                continue
            for fact, evidence in facts:
                known = mapping.setdefault(fact, [])
                known.extend(e for e in evidence if e not in known)
        return mapping

    def _candidates(self, line: PromptLine) -> list[_DatasetLine]:
        text = escape_data(line.text)
        found = self.by_text.get(text, [])
        if not found:
            found = self._partial_candidates(text)
        speaker = escape_data(line.speaker).casefold()
        same_speaker = [c for c in found if c.speaker == speaker]
        return same_speaker or found

    def _partial_candidates(self, text: str) -> list[_DatasetLine]:
        """Lines the prompt cut short: ``"start…"`` or ``"…end"``."""
        for mark in _ELLIPSES:
            if (
                text.endswith(mark)
                and len(stem := text[: -len(mark)].rstrip()) >= _MIN_PARTIAL_CHARS
            ):
                return [c for full, cs in self.by_text.items() if full.startswith(stem) for c in cs]
            if (
                text.startswith(mark)
                and len(stem := text[len(mark) :].lstrip()) >= _MIN_PARTIAL_CHARS
            ):
                return [c for full, cs in self.by_text.items() if full.endswith(stem) for c in cs]
        return []

    def match(self, lines: Sequence[PromptLine]) -> tuple[str, list[_DatasetLine]]:
        """The sample these lines come from and the dataset line of each line that matched."""
        candidates = [self._candidates(line) for line in lines]
        votes = Counter(sample for found in candidates for sample in {c.sample for c in found})
        if not votes:
            return "", []
        sample = min(votes, key=lambda s: (-votes[s], self.sample_order.get(s, 0)))
        per_line = [[c for c in found if c.sample == sample] for found in candidates]
        anchors = {i: found[0].position for i, found in enumerate(per_line) if len(found) == 1}
        chosen = []
        for i, found in enumerate(per_line):
            if len(found) > 1 and anchors:
                nearest = min(anchors, key=lambda j: (abs(i - j), j))
                expected = anchors[nearest] + (i - nearest)
                found = sorted(found, key=lambda c: (abs(c.position - expected), c.position))
            if found:
                chosen.append(found[0])
        return sample, chosen

    def extraction(self, data: ExtractionInput) -> dict[str, Any]:
        """The oracle mode's answer: current memories plus the observations of the new lines."""
        sample, matched = self.match(data.lines)
        ids = {line.dia_id for line in matched}
        memories = list(data.memories)
        seen = {_key(escape_data(m)) for m in memories}
        for fact, evidence in self.facts.get(sample, ()):
            if ids.intersection(evidence) and _key(escape_data(fact)) not in seen:
                seen.add(_key(escape_data(fact)))
                memories.append(fact)
        return {"memories": memories, "summary": data.summary}


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


def _chat_response(state: _State, body: dict[str, Any]) -> Response:
    messages = body.get("messages") or []
    if isinstance(messages, list) and (problem := tool_rule_error(messages)) is not None:
        return _error(problem, "invalid_request_error", 400)
    if is_extraction_call(messages):
        spec = _spec(state.extraction_item(body, messages))
    else:
        spec = _spec(state.chat_item(default_reply(body)))
    if (error := _scripted_error(spec)) is not None:
        return error
    model = str(body.get("model", "standin"))
    if body.get("stream"):
        return StreamingResponse(_stream(spec, model, body), media_type="text/event-stream")
    return JSONResponse(_completion(spec, model, body))


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
    prompts = [text for text, _ in _inputs(body.get("prompt"))] or [""]
    specs = [_spec(state.chat_item(noted(prompt))) for prompt in prompts]
    for spec in specs:
        if (error := _scripted_error(spec)) is not None:
            return error
    texts = [str(spec.get("content") or "") for spec in specs]
    model = str(body.get("model", "standin"))
    if body.get("stream"):
        delay = float(specs[0].get("chunk_delay_s", 0))
        stream = _stream_text_completion(texts, prompts, model, body, delay)
        return StreamingResponse(stream, media_type="text/event-stream")
    return JSONResponse(_text_completion(texts, prompts, model))


def _embeddings_response(state: _State, body: dict[str, Any]) -> Response:
    inputs = _inputs(body.get("input"))
    if not inputs:
        message = "'input' must be a non-empty string, list of strings, or token list(s)"
        return _error(message, "invalid_request_error", 400)
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
    return JSONResponse(
        {
            "object": "list",
            "data": data,
            "model": str(body.get("model", "standin")),
            "usage": {"prompt_tokens": used, "total_tokens": used},
        }
    )


# --- text completions and embeddings -------------------------------------------------------


def _inputs(value: Any) -> list[tuple[str, int]]:
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


def _text_completion(texts: Sequence[str], prompts: Sequence[str], model: str) -> dict[str, Any]:
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


async def _stream_text_completion(
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


def _completion(spec: dict[str, Any], model: str, body: dict[str, Any]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": spec.get("content")}
    if spec.get("tool_calls"):
        message["tool_calls"] = spec["tool_calls"]
    for key in ("audio", "refusal"):  # an audio-output model's reply, a refusal (case E03)
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
