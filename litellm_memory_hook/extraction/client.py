"""How the extraction job calls a model: through the proxy's own router (in-proxy worker) or an
OpenAI-compatible HTTP endpoint (the standalone ``litellm-memory worker``, by default the proxy).

Both ask for JSON mode (``response_format: {"type": "json_object"}``) and, when the provider
rejects that parameter, ask once more without it; both mark the call so that our own hook neither
injects memory into it nor stores it: the extraction prompt starts with
:data:`litellm_memory_hook.extraction.prompt.EXTRACTION_MARKER`, no ``user`` is sent, and
``metadata.memory_mode`` is ``off``.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any, Final, Protocol

from litellm_memory_hook.errors import ExtractionError

logger = logging.getLogger("litellm_memory_hook")

#: request metadata of every extraction call (our hook passes such a request through).
EXTRACTION_METADATA = {"memory_mode": "off", "memory_extraction": True}

#: the kinds of failed calls (:func:`failure_kind`): the prompt is too long for the model
#: (``context``), the key is refused (``auth``: 401, 403), the model is unknown (``not_found``:
#: 404), anything else (``other``: a timeout, a refused connection, a 5xx, a 429, ...).
FAILURE_KINDS: Final = ("context", "auth", "not_found", "other")

# What providers and LiteLLM say when a prompt does not fit the model's context window.
_CONTEXT_ERROR: Final = re.compile(
    r"context[ _-]?(?:length|window)|maximum context|contextwindowexceeded|too many tokens|"
    r"prompt is too long|input is too long|reduce the length|input length .{0,40}exceed|"
    r"exceeds? the (?:model's )?(?:maximum|max)",
    re.IGNORECASE,
)


def failure_kind(status: int | None, message: str) -> str:
    """The kind of a failed model call (one of :data:`FAILURE_KINDS`).

    Args:
        status: the HTTP status the provider (or the proxy) answered, ``None`` when none
            (a timeout, a refused connection).
        message: the error's text.

    Returns:
        ``context`` when the message says the prompt exceeds the model's context (any status:
        providers answer it as 400, 413 or 422); ``auth`` for 401 and 403; ``not_found`` for
        404; else ``other``.
    """
    if _CONTEXT_ERROR.search(message[:4000]):
        return "context"
    if status in (401, 403):
        return "auth"
    if status == 404:
        return "not_found"
    return "other"


class ExtractionCallError(ExtractionError):
    """The model call itself failed (not its reply).

    Attributes:
        status: the HTTP status answered, or ``None`` (timeout, connection).
        kind: :func:`failure_kind` of the status and message.
    """

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.kind = failure_kind(status, message)


def _status_of(exc: BaseException) -> int | None:
    """The HTTP status carried by a LiteLLM or OpenAI exception, if any."""
    for name in ("status_code", "status"):
        value = getattr(exc, name, None)
        if isinstance(value, int) and 100 <= value <= 599:
            return value
    return None


@dataclass(frozen=True)
class ModelReply:
    """A model's reply text and its token counts (0 when the provider reports none)."""

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0


class ExtractionModel(Protocol):
    """Anything that can answer an extraction prompt."""

    async def complete(
        self, model: str, messages: list[dict[str, str]], *, json_mode: bool, timeout_s: float
    ) -> ModelReply:
        """Send ``messages`` to the alias ``model`` and return the reply.

        Raises:
            ExtractionError: the call failed or timed out.
        """
        ...


def _reply(response: Any) -> ModelReply:
    """The text and usage of an OpenAI-shaped chat completion (object or dict)."""
    choices = getattr(response, "choices", None)
    if choices is None and isinstance(response, dict):
        choices = response.get("choices")
    if not choices:
        raise ExtractionError("the model answered without choices")
    first = choices[0]
    message = getattr(first, "message", None) or (
        first.get("message") if isinstance(first, dict) else None
    )
    content = getattr(message, "content", None)
    if content is None and isinstance(message, dict):
        content = message.get("content")
    usage = getattr(response, "usage", None)
    prompt = int(getattr(usage, "prompt_tokens", 0) or 0) if usage is not None else 0
    completion = int(getattr(usage, "completion_tokens", 0) or 0) if usage is not None else 0
    return ModelReply(str(content or ""), prompt, completion)


def _rejects_json_mode(exc: Exception) -> bool:
    """Whether a failed call was refused for its ``response_format`` (then it is sent once more
    without): a 400-class answer naming it, never a context, auth or not-found error (asking
    again would only double the calls that fail)."""
    text = str(exc)[:4000].lower()
    status = _status_of(exc)
    if failure_kind(status, text) != "other" or (status is not None and not 400 <= status < 500):
        return False
    return "response_format" in text or ("json" in text and "support" in text)


class RouterModel:
    """Calls through ``litellm.proxy.proxy_server.llm_router`` (inside the proxy process; the
    call does not run proxy hooks, docs/design.md#facts-about-litellm-this-rests-on)."""

    async def complete(
        self, model: str, messages: list[dict[str, str]], *, json_mode: bool, timeout_s: float
    ) -> ModelReply:
        """See :meth:`ExtractionModel.complete`."""
        from litellm.proxy import proxy_server

        router = getattr(proxy_server, "llm_router", None)
        if router is None:
            raise ExtractionError("the proxy has no router (is this running inside a proxy?)")
        kwargs: dict[str, Any] = {
            "model": model,
            "messages": messages,
            "timeout": timeout_s,
            "metadata": dict(EXTRACTION_METADATA),
        }
        try:
            if json_mode:
                try:
                    response = await router.acompletion(
                        **kwargs, response_format={"type": "json_object"}
                    )
                except Exception as exc:
                    if not _rejects_json_mode(exc):
                        raise
                    response = await router.acompletion(**kwargs)
            else:
                response = await router.acompletion(**kwargs)
        except ExtractionError:
            raise
        except Exception as exc:
            raise ExtractionCallError(f"model {model!r} failed: {exc}", _status_of(exc)) from exc
        return _reply(response)


class OpenAIModel:
    """Calls an OpenAI-compatible endpoint with the ``openai`` client (the standalone worker).

    Args:
        base_url: e.g. ``http://127.0.0.1:4000/v1`` (the proxy itself).
        api_key: the key sent as ``Authorization: Bearer``.
    """

    def __init__(self, base_url: str, api_key: str) -> None:
        import openai

        self._client = openai.AsyncOpenAI(base_url=base_url, api_key=api_key, max_retries=1)

    async def complete(
        self, model: str, messages: list[dict[str, str]], *, json_mode: bool, timeout_s: float
    ) -> ModelReply:
        """See :meth:`ExtractionModel.complete`."""
        import openai

        kwargs: dict[str, Any] = {
            "model": model,
            "messages": messages,
            "timeout": timeout_s,
            "extra_body": {"metadata": dict(EXTRACTION_METADATA)},
        }
        try:
            if json_mode:
                try:
                    response = await self._client.chat.completions.create(
                        **kwargs, response_format={"type": "json_object"}
                    )
                except openai.BadRequestError as exc:
                    if not _rejects_json_mode(exc):
                        raise
                    response = await self._client.chat.completions.create(**kwargs)
            else:
                response = await self._client.chat.completions.create(**kwargs)
        except openai.OpenAIError as exc:
            raise ExtractionCallError(f"model {model!r} failed: {exc}", _status_of(exc)) from exc
        return _reply(response)

    async def close(self) -> None:
        """Close the HTTP client."""
        await self._client.close()
