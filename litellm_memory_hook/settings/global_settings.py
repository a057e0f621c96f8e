"""The global settings (:class:`MemorySettings`): one model of the groups and the keys outside
them, read from the file's section, then ``LITELLM_MEMORY_<GROUP>__<KEY>``, then the flat
variables of earlier versions and ``REDIS_URL``...

How a section and the environment become one (and errors name the setting):
:mod:`litellm_memory_hook.settings.sources`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, Field, field_validator, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from litellm_memory_hook.settings.env import ENV_DELIMITER, ENV_PREFIX
from litellm_memory_hook.settings.flat_keys import _FlatEnv, _GroupedInit, grouped
from litellm_memory_hook.settings.groups import (
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


class MemorySettings(BaseSettings):
    """Global settings of the memory hook, in groups; each group's keys are in its own table.

    Attributes:
        redis: the Redis server and how its failures are met (:class:`RedisSettings`).
        storage: what is kept in Redis, and for how long (:class:`StorageSettings`).
        window: the recent window's budgets (:class:`WindowSettings`).
        recall: old lines brought back by relevance (:class:`RecallSettings`).
        memories: the memory set: its limits and its budgets in the prompt
            (:class:`MemoriesSettings`).
        summary: the conversation's running summary (:class:`SummarySettings`).
        extraction: extraction jobs and their workers (:class:`ExtractionSettings`).
        write_buffer: turns held while Redis does not take them (:class:`WriteBufferSettings`).
        identity: who a request is from, which conversation it is (:class:`IdentitySettings`).
        requests: side requests, temporary chats and regenerates (:class:`RequestsSettings`).
        timezone: IANA name used to date recalled lines when the request gives none
            (``Asia/Kolkata``); an unknown name is a configuration error, as it is a 400 in a
            request's ``metadata.timezone``; empty means UTC.
        gc_freeze: at the first memory request, collect once and move every object the proxy
            made while it started into Python's permanent generation (:func:`gc.freeze`), so
            full collections stop walking LiteLLM's ~800,000 startup objects. Measured by
            ``bench proxy`` (32 clients, 4,500 requests): the proxy's longest collection fell
            from 297 ms to 18 ms and its collection time from 4.2 s to 1.6 s. The first request
            waits once for the collection (~0.3 s). It changes the whole proxy process, so it
            is off unless set (the shipped config.yaml sets it).
    """

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter=ENV_DELIMITER,
        extra="forbid",
        allow_inf_nan=False,
    )

    redis: RedisSettings = Field(default_factory=RedisSettings)
    storage: StorageSettings = Field(default_factory=StorageSettings)
    window: WindowSettings = Field(default_factory=WindowSettings)
    recall: RecallSettings = Field(default_factory=RecallSettings)
    memories: MemoriesSettings = Field(default_factory=MemoriesSettings)
    summary: SummarySettings = Field(default_factory=SummarySettings)
    extraction: ExtractionSettings = Field(default_factory=ExtractionSettings)
    write_buffer: WriteBufferSettings = Field(default_factory=WriteBufferSettings)
    identity: IdentitySettings = Field(default_factory=IdentitySettings)
    requests: RequestsSettings = Field(default_factory=RequestsSettings)
    timezone: str = "UTC"
    gc_freeze: bool = False

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """The file (keyword arguments), then ``LITELLM_MEMORY_<GROUP>__<KEY>``, then the flat
        variables of earlier versions and ``REDIS_URL``..., each with its flat keys grouped."""
        return (
            _GroupedInit(settings_cls, init_settings),
            env_settings,
            _FlatEnv(settings_cls),
            dotenv_settings,
            file_secret_settings,
        )

    @model_validator(mode="before")
    @classmethod
    def _flat_keys(cls, data: Any) -> Any:
        # model_validate() and the like come here without the sources above
        return grouped(data) if isinstance(data, Mapping) else data

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        from litellm_memory_hook.core.dates import is_zone

        # empty (or blank) has always meant UTC; anything else must be a zone this system knows
        if value.strip() and not is_zone(value):
            raise ValueError("must be an IANA time zone name such as Asia/Kolkata or UTC")
        return value


#: the groups of :class:`MemorySettings` by name.
GROUPS: Mapping[str, type[BaseModel]] = {
    name: info.annotation
    for name, info in MemorySettings.model_fields.items()
    if isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel)
}
