"""What the hook knows of a model alias, read from the running proxy's router (or a lookup given
in tests) and cached for :data:`ALIAS_CACHE_S` seconds: its memory config (``model_info.
memory``), its provider (where the cache layout's tail goes, whether to mark the cache), and the
window it declares (``max_input_tokens``, ``max_output_tokens``).

Settings: docs/configuration.md; the tail and the marks: docs/prompt.md.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import litellm

from litellm_memory_hook.core.model_window import ModelLimit, model_limit
from litellm_memory_hook.settings import AliasMemoryConfig, parse_alias_config

#: seconds an alias's config, provider and window are cached.
ALIAS_CACHE_S = 30.0

#: providers (LiteLLM's names) that move every system message to the top of the prompt: the
#: cache layout's tail goes in the user's last message for them
SYSTEM_ON_TOP_PROVIDERS = frozenset(
    {"anthropic", "bedrock", "bedrock_converse", "gemini", "vertex_ai", "vertex_ai_beta"}
)

#: providers (LiteLLM's names) that cache a prompt's prefix only up to a ``cache_control`` mark
MARKED_CACHE_PROVIDERS = frozenset({"anthropic", "bedrock", "bedrock_converse"})

Lookup = Callable[[str], dict[str, Any] | None]


class AliasInfo:
    """The aliases of one hook.

    Args:
        lookup: model alias -> its ``model_info`` dict (its declared window too); default: the
            proxy's router.
    """

    def __init__(self, lookup: Lookup | None = None) -> None:
        self._lookup = lookup
        self._configs: dict[str, tuple[float, AliasMemoryConfig | None]] = {}
        self._providers: dict[str, tuple[float, str | None]] = {}
        self._limits: dict[str, tuple[float, dict[str, Any] | None]] = {}

    def config(self, model: object) -> AliasMemoryConfig | None:
        """The memory config of a model alias, ``None`` when memory is off for it.

        Raises:
            ConfigError: the alias's ``model_info.memory`` block is invalid.
        """
        if not isinstance(model, str) or not model:
            return None
        cached = self._configs.get(model)
        if cached is not None and time.monotonic() - cached[0] < ALIAS_CACHE_S:
            return cached[1]
        config = parse_alias_config((self._lookup or _router_model_info)(model))
        self._configs[model] = (time.monotonic(), config)
        return config

    def limit(self, data: dict[str, Any]) -> ModelLimit | None:
        """The declared window of the request's alias (``max_input_tokens`` of its deployment's
        ``model_info``, else LiteLLM's model map), with the reply the request asks for; ``None``
        when none is declared."""
        model = data.get("model")
        if not isinstance(model, str):
            return None
        cached = self._limits.get(model)
        if cached is None or time.monotonic() - cached[0] >= ALIAS_CACHE_S:
            cached = (time.monotonic(), (self._lookup or _router_limits)(model))
            self._limits[model] = cached
        return model_limit(cached[1], data)

    def tail_in_user(self, alias: AliasMemoryConfig, model: object) -> bool:
        """Whether the cache layout's tail goes in the user's last message: the alias says so,
        or (``auto``) its deployment's provider moves every system message to the top."""
        if alias.tail_placement != "auto":
            return alias.tail_placement == "user"
        return self._provider(model) in SYSTEM_ON_TOP_PROVIDERS

    def cache_marks(self, alias: AliasMemoryConfig, model: object) -> bool:
        """Whether the cache layout marks its stable parts with ``cache_control``: the alias
        says so, or (``auto``) its deployment's provider caches only where marked."""
        if alias.cache_marks != "auto":
            return alias.cache_marks == "on"
        return self._provider(model) in MARKED_CACHE_PROVIDERS

    def _provider(self, model: object) -> str | None:
        """The provider of an alias's deployment."""
        if not isinstance(model, str):
            return None
        cached = self._providers.get(model)
        if cached is None or time.monotonic() - cached[0] >= ALIAS_CACHE_S:
            cached = (time.monotonic(), _router_provider(model))
            self._providers[model] = cached
        return cached[1]


def _deployments(model: str) -> list[Any]:
    """The deployments of an alias in the running proxy's router (none without a router)."""
    from litellm.proxy import proxy_server

    router = getattr(proxy_server, "llm_router", None)
    if router is None:
        return []
    return list(router.get_model_list(model_name=model) or ())


def _model_of(deployment: Any) -> dict[str, Any] | None:
    """A deployment's ``litellm_params`` when it names a model."""
    params = deployment.get("litellm_params") if isinstance(deployment, dict) else None
    return params if isinstance(params, dict) and isinstance(params.get("model"), str) else None


def _router_model_info(model: str) -> dict[str, Any] | None:
    """``model_info`` of the first deployment of an alias in the running proxy's router."""
    for deployment in _deployments(model):
        info = deployment.get("model_info") if isinstance(deployment, dict) else None
        if isinstance(info, dict):
            return info
    return None


def _router_provider(model: str) -> str | None:
    """The provider (LiteLLM's name) of the first deployment of an alias in the running
    proxy's router; ``None`` when there is no router or it cannot be told."""
    for deployment in _deployments(model):
        params = _model_of(deployment)
        if params is not None:
            try:
                _, provider, _, _ = litellm.get_llm_provider(
                    model=params["model"], custom_llm_provider=params.get("custom_llm_provider")
                )
            except Exception:  # an unknown provider: the tail stays a system message
                return None
            return str(provider)
    return None


def _router_limits(model: str) -> dict[str, Any] | None:
    """``max_input_tokens`` / ``max_output_tokens`` of an alias's first deployment in the
    running proxy's router: its ``model_info``, else LiteLLM's model map for its model."""
    info = dict(_router_model_info(model) or {})
    if info.get("max_input_tokens"):
        return info
    for deployment in _deployments(model):
        params = _model_of(deployment)
        if params is not None:
            try:
                known = litellm.get_model_info(params["model"])
            except Exception:  # not in LiteLLM's map: no declared window
                return info or None
            return {**{k: known.get(k) for k in ("max_input_tokens", "max_output_tokens")}, **info}
    return info or None
