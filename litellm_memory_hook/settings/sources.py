"""Where the global settings come from: the proxy's ``callback_settings.memory`` section and the
``LITELLM_MEMORY_*`` environment, read into one :class:`MemorySettings` (:func:`load_settings`),
and a setting named as the operator set it (:func:`setting_origin`) in one-line errors.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import ValidationError

from litellm_memory_hook.errors import ConfigError
from litellm_memory_hook.settings.env import ENV_DELIMITER, ENV_PREFIX, GENERIC_ENV, env_name
from litellm_memory_hook.settings.flat_keys import _LOG_DEPRECATIONS, FLAT_KEYS, _key_in, grouped
from litellm_memory_hook.settings.global_settings import GROUPS, MemorySettings


def _env_path(variable: str) -> str | None:
    """The setting a ``LITELLM_MEMORY_*`` variable sets (``recall.k``), else ``None``."""
    if not variable.upper().startswith(ENV_PREFIX):
        return None
    rest = variable[len(ENV_PREFIX) :].lower()
    if ENV_DELIMITER in rest:
        return rest.replace(ENV_DELIMITER, ".", 1)
    return FLAT_KEYS.get(rest, rest)


def _file_paths(section: Mapping[Any, Any]) -> set[str]:
    """The settings a ``callback_settings.memory`` section sets (``recall.k``, ``timezone``)."""
    found = set()
    for key, value in section.items():
        name = str(key).lower()
        if name in FLAT_KEYS:
            found.add(FLAT_KEYS[name])
        elif name in GROUPS and isinstance(value, Mapping):
            found.update(f"{name}.{k}" for k in value)
        else:
            found.add(name)
    return found


def shadowed_env(callback_settings: dict[str, Any] | None) -> list[str]:
    """The ``LITELLM_MEMORY_*`` variables set in the environment for a setting that
    ``callback_settings['memory']`` also sets (either spelling, new or flat): the file wins, so
    they do nothing."""
    section = (callback_settings or {}).get("memory") or {}
    if not isinstance(section, dict):
        return []
    in_file = _file_paths(section)
    return sorted({k.upper() for k in os.environ if _env_path(k) in in_file})


def known_env() -> set[str]:
    """Every ``LITELLM_MEMORY_*`` variable a setting reads: ``<GROUP>__<KEY>``, a whole group
    as JSON (``<GROUP>``), a key outside the groups and the flat keys of :data:`FLAT_KEYS`."""
    names = {env_name(name) for name in MemorySettings.model_fields}
    names.update(env_name(f"{g}.{k}") for g, model in GROUPS.items() for k in model.model_fields)
    names.update(f"{ENV_PREFIX}{old}".upper() for old in FLAT_KEYS)
    return names


def setting_origin(section: Mapping[Any, Any] | None, path: str) -> str | None:
    """Where the setting ``path`` (``recall.k``; ``timezone``; a whole group: ``recall``) is set,
    named as it was set: ``callback_settings.memory.<key>`` as the file spells it (the group's
    key first, then the flat key), else its environment variable (``LITELLM_MEMORY_RECALL__K``,
    then the flat ``LITELLM_MEMORY_RECALL_K``, then :data:`GENERIC_ENV`: ``REDIS_URL``);
    ``None`` when nothing sets it."""
    section = section or {}
    group, _, name = path.partition(".")
    olds = [old for old, new in FLAT_KEYS.items() if new == path]
    written = _key_in(section, group)
    if written is not None and not name:
        return f"callback_settings.memory.{written}"
    if written is not None and isinstance(section[written], Mapping) and name in section[written]:
        return f"callback_settings.memory.{written}.{name}"
    for old in olds:
        if (written := _key_in(section, old)) is not None:
            return f"callback_settings.memory.{written}"
    present = {k.upper() for k in os.environ}
    candidates = [env_name(path), *(f"{ENV_PREFIX}{old}".upper() for old in olds)]
    candidates += [generic for generic, new in GENERIC_ENV.items() if new == path]
    return next((c for c in candidates if c in present), None)


#: settings whose value an error message does not repeat (a URL may hold a password).
_UNSHOWN_VALUES = frozenset(
    {"redis.url", "redis.sentinel_password", "extraction.api_key", "extraction.base_url"}
)


def _shown_value(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def describe_invalid(
    exc: ValidationError,
    name: Callable[[tuple[str | int, ...]], str],
    unshown: frozenset[str] = _UNSHOWN_VALUES,
) -> str:
    """A validation error of the settings or of an alias block on one line, one clause per
    problem: ``invalid setting NAME ('abc'): Input should be a valid integer``, several joined
    by ``; `` after ``invalid settings:``. ``name`` turns an error's location into what the
    operator wrote (a config key or an environment variable). Values of ``unshown`` settings
    (``group.key``; :data:`_UNSHOWN_VALUES`), and of a group that holds one, are not
    repeated."""
    problems = []
    for error in exc.errors():
        loc = tuple(error["loc"])
        where = name(loc)
        if error["type"] == "extra_forbidden":
            problems.append(f"{where}: not a known setting")
            continue
        message = " ".join(str(error["msg"]).removeprefix("Value error, ").split())
        path = ".".join(str(p).lower() for p in loc[:2])
        hidden = bool(path) and any(u == path or u.startswith(f"{path}.") for u in unshown)
        shown = "" if hidden or error["type"] == "missing" else f" ({_shown_value(error['input'])})"
        problems.append(f"{where}{shown}: {message}")
    if len(problems) == 1:
        return f"invalid setting {problems[0]}"
    return "invalid settings: " + "; ".join(problems)


def _suffix(loc: tuple[str | int, ...]) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc)


def _dotted(loc: tuple[str | int, ...]) -> str:
    return _suffix(loc).removeprefix(".")


def _settings_source(section: Mapping[str, Any]) -> Callable[[tuple[str | int, ...]], str]:
    """Where a global setting came from, as :func:`setting_origin` names it: the file's key as
    the file spells it, else its environment variable."""

    def name(loc: tuple[str | int, ...]) -> str:
        if not loc:
            return "callback_settings.memory"
        if len(loc) >= 2 and isinstance(loc[1], str):
            where = setting_origin(section, f"{loc[0]}.{loc[1]}")
            if where is not None:
                return where + _suffix(loc[2:])
        where = setting_origin(section, str(loc[0]))
        if where is not None:
            return where + _suffix(loc[1:])
        return "callback_settings.memory." + _dotted(loc)

    return name


def load_settings(callback_settings: dict[str, Any] | None = None) -> MemorySettings:
    """Build the global settings from ``callback_settings['memory']`` and the environment.

    A key set in the file wins over its ``LITELLM_MEMORY_*`` variable (:func:`shadowed_env`
    lists such variables; ``doctor`` warns about them); the environment fills the keys the file
    leaves out. A flat key of earlier versions (:data:`FLAT_KEYS`) is logged once, naming its
    new key.

    Raises:
        ConfigError: unknown keys (in the section or as ``LITELLM_MEMORY_*`` environment
            variables) or invalid values: one line naming each bad setting as the operator set
            it (``callback_settings.memory.KEY`` or the environment variable), its value and
            what is expected (:func:`describe_invalid`).
    """
    section = (callback_settings or {}).get("memory") or {}
    if not isinstance(section, dict):
        raise ConfigError("callback_settings.memory must be a mapping")
    known = known_env()
    unknown = sorted(
        k for k in os.environ if k.upper().startswith(ENV_PREFIX) and k.upper() not in known
    )
    if unknown:
        raise ConfigError(f"unknown environment variable(s): {', '.join(unknown)}")
    token = _LOG_DEPRECATIONS.set(True)
    try:
        return MemorySettings(**grouped(section, where="callback_settings.memory."))
    except ValidationError as exc:
        raise ConfigError(describe_invalid(exc, _settings_source(section))) from exc
    finally:
        _LOG_DEPRECATIONS.reset(token)
