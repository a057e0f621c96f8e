"""How a setting's environment variable is named (``LITELLM_MEMORY_`` and its path, a group and
its key joined by ``__``, as in ``LITELLM_MEMORY_RECALL__K``), and the generic variables read too
(``REDIS_URL``...).

The flat variables of earlier versions (``LITELLM_MEMORY_RECALL_K``) are in
:mod:`litellm_memory_hook.settings.flat_keys`.
"""

from __future__ import annotations

from collections.abc import Mapping

ENV_PREFIX = "LITELLM_MEMORY_"
#: joins a group and its key in an environment variable: ``LITELLM_MEMORY_RECALL__K``.
ENV_DELIMITER = "__"

#: variables without the ``LITELLM_MEMORY_`` prefix that are read too (LiteLLM reads them as
#: well), after the prefixed ones; they are not deprecated.
GENERIC_ENV: Mapping[str, str] = {
    "REDIS_URL": "redis.url",
    "REDIS_SENTINEL_NODES": "redis.sentinel_nodes",
    "REDIS_SERVICE_NAME": "redis.service_name",
    "REDIS_SENTINEL_PASSWORD": "redis.sentinel_password",
}


def env_name(path: str) -> str:
    """The environment variable of a setting: ``recall.k`` -> ``LITELLM_MEMORY_RECALL__K``,
    ``timezone`` -> ``LITELLM_MEMORY_TIMEZONE``."""
    return ENV_PREFIX + path.upper().replace(".", ENV_DELIMITER)
