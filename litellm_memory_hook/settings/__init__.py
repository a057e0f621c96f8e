"""Configuration: one global settings model in groups, and the per-alias block.

Global settings come from the ``callback_settings: memory:`` section of the proxy's config.yaml and
from environment variables prefixed ``LITELLM_MEMORY_``, a group and its key joined by ``__``
(``LITELLM_MEMORY_RECALL__K``; ``REDIS_URL`` is read too); values in config.yaml win over the
environment. Unknown keys are rejected.

The settings are grouped (``redis``, ``storage``, ``window``, ``recall``, ``memories``,
``summary``, ``extraction``, ``write_buffer``, ``identity``, ``requests``); ``timezone`` and
``gc_freeze`` stand alone. Every size limit starts with ``max_`` and every unit is a suffix
(``_chars``, ``_messages``, ``_items``, ``_s``, ``_days``). The flat keys of earlier versions
(:data:`FLAT_KEYS`: ``recall_k``, ``LITELLM_MEMORY_RECALL_K``, ...) still work: each is moved to its
place in a group, with one warning naming the new key; the new key wins where both are set.

Per-alias settings live in ``model_info: memory:`` of a model alias in ``model_list``; an alias
without that block (or with ``enabled: false``) is passed through untouched. Its ``window`` and
``recall`` groups override the global ones for that alias, key by key.

Example::

    model_list:
      - model_name: demo
        litellm_params: {model: openai/demo, api_base: "http://127.0.0.1:4010/v1"}
        model_info:
          memory: {enabled: true, system_prompt: "You are Mira.", window: {max_chars: 6000}}
    callback_settings:
      memory: {storage: {key_prefix: mem, retention_days: 30}}

The package, one concept a module: :mod:`~litellm_memory_hook.settings.groups` (the group models),
:mod:`~litellm_memory_hook.settings.env` (the environment variables' names),
:mod:`~litellm_memory_hook.settings.flat_keys` (the flat keys of earlier versions, deprecated),
:mod:`~litellm_memory_hook.settings.global_settings` (:class:`MemorySettings`),
:mod:`~litellm_memory_hook.settings.sources` (reading the file and the environment, naming a bad
setting) and :mod:`~litellm_memory_hook.settings.alias` (the per-alias block). Every name is
importable from here.
"""

from litellm_memory_hook.settings.alias import (
    AliasMemoryConfig,
    AliasRecall,
    AliasWindow,
    parse_alias_config,
)
from litellm_memory_hook.settings.env import ENV_DELIMITER, ENV_PREFIX, GENERIC_ENV, env_name
from litellm_memory_hook.settings.flat_keys import ALIAS_FLAT_KEYS, FLAT_KEYS, grouped
from litellm_memory_hook.settings.flat_keys import logger as logger
from litellm_memory_hook.settings.global_settings import GROUPS, MemorySettings
from litellm_memory_hook.settings.groups import (
    DAY_S,
    ExtractionSettings,
    IdentitySettings,
    MemoriesSettings,
    RecallSettings,
    RedisSettings,
    RequestsSettings,
    StorageSettings,
    SummarySettings,
    WindowSettings,
    WriteBufferSettings,
)
from litellm_memory_hook.settings.sources import (
    describe_invalid,
    known_env,
    load_settings,
    setting_origin,
    shadowed_env,
)

__all__ = [
    "ALIAS_FLAT_KEYS",
    "DAY_S",
    "ENV_DELIMITER",
    "ENV_PREFIX",
    "FLAT_KEYS",
    "GENERIC_ENV",
    "GROUPS",
    "AliasMemoryConfig",
    "AliasRecall",
    "AliasWindow",
    "ExtractionSettings",
    "IdentitySettings",
    "MemoriesSettings",
    "MemorySettings",
    "RecallSettings",
    "RedisSettings",
    "RequestsSettings",
    "StorageSettings",
    "SummarySettings",
    "WindowSettings",
    "WriteBufferSettings",
    "describe_invalid",
    "env_name",
    "grouped",
    "known_env",
    "load_settings",
    "parse_alias_config",
    "setting_origin",
    "shadowed_env",
]
