"""Reading the proxy's config.yaml outside the proxy (for the CLI): settings and alias blocks.

LiteLLM's ``os.environ/NAME`` references are resolved from the environment, as the proxy does.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from litellm_memory_hook.errors import ConfigError
from litellm_memory_hook.settings import (
    AliasMemoryConfig,
    MemorySettings,
    load_settings,
    parse_alias_config,
    setting_origin,
)
from litellm_memory_hook.tools.files import read_utf8


def _resolve_env(value: Any) -> Any:
    if isinstance(value, str) and value.startswith("os.environ/"):
        return os.environ.get(value.removeprefix("os.environ/"))
    if isinstance(value, dict):
        return {k: _resolve_env(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_resolve_env(v) for v in value]
    return value


def yaml_problem(exc: yaml.YAMLError) -> str:
    """A YAML error on one line: ``line 3, column 5: mapping values are not allowed here``."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    return where + " ".join(str(problem).split())


@dataclass(frozen=True)
class ProxyConfig:
    """What the CLI needs from config.yaml."""

    path: Path
    raw: dict[str, Any]
    settings: MemorySettings

    @classmethod
    def load(cls, path: Path) -> ProxyConfig:
        """Read and validate a config.yaml.

        Raises:
            ConfigError: an unreadable file, bytes that are not UTF-8, bad YAML or invalid memory
                settings (one line each).
        """
        text = read_utf8(path, ConfigError)
        try:
            raw = yaml.safe_load(text) or {}
        except yaml.YAMLError as exc:
            raise ConfigError(f"{path} is not valid YAML: {yaml_problem(exc)}") from exc
        if not isinstance(raw, dict):
            raise ConfigError(f"{path}: not a mapping")
        raw = _resolve_env(raw)
        return cls(path=path, raw=raw, settings=load_settings(raw.get("callback_settings")))

    def setting_source(self, path: str) -> str:
        """Where a global setting's value (``extraction.enabled``) came from, named as it was
        set: the file's key (``callback_settings.memory.<key>``, as the file spells it; the file
        wins), else its ``LITELLM_MEMORY_*`` variable, else the default
        (:func:`~litellm_memory_hook.settings.setting_origin`)."""
        block = (self.raw.get("callback_settings") or {}).get("memory")
        where = setting_origin(block if isinstance(block, dict) else None, path)
        if where is None:
            return f"the default of {path}"
        return f"{where} in {self.path}" if where.startswith("callback_settings.") else where

    def model_info(self, alias: str) -> dict[str, Any] | None:
        """``model_info`` of the first deployment named ``alias``."""
        for entry in self.raw.get("model_list") or ():
            if isinstance(entry, dict) and entry.get("model_name") == alias:
                info = entry.get("model_info")
                return info if isinstance(info, dict) else {}
        return None

    def alias(self, alias: str) -> AliasMemoryConfig:
        """The memory block of an alias.

        Raises:
            ConfigError: no such alias, or memory is off for it.
        """
        if self.model_info(alias) is None:
            raise ConfigError(f"{self.path}: no model alias {alias!r}")
        config = parse_alias_config(self.model_info(alias))
        if config is None:
            raise ConfigError(f"{self.path}: memory is not enabled for {alias!r}")
        return config

    def namespace(self, alias: str) -> str:
        """The memory namespace of an alias (its ``namespace``, else its name)."""
        return self.alias(alias).namespace or alias

    @property
    def master_key(self) -> str | None:
        """``general_settings.master_key`` (after ``os.environ/`` resolution)."""
        general = self.raw.get("general_settings") or {}
        key = general.get("master_key") if isinstance(general, dict) else None
        return key if isinstance(key, str) and key else os.environ.get("LITELLM_MASTER_KEY")
