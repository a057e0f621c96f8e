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
from dataclasses import dataclass
from typing import Any, Protocol

from litellm_memory_hook.errors import ExtractionError

logger = logging.getLogger("litellm_memory_hook")

#: request metadata of every extraction call (our hook passes such a request through).
EXTRACTION_METADATA = {"memory_mode": "off", "memory_extraction": True}


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
    text = str(exc).lower()
    return "response_format" in text or ("json" in text and "support" in text)


class RouterModel:
    """Calls through ``litellm.proxy.proxy_server.llm_router`` (inside the proxy process; the
    call does not run proxy hooks, DESIGN.md section 2)."""

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
            raise ExtractionError(f"model {model!r} failed: {exc}") from exc
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
            raise ExtractionError(f"model {model!r} failed: {exc}") from exc
        return _reply(response)

    async def close(self) -> None:
        """Close the HTTP client."""
        await self._client.close()
