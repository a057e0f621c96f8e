"""The grouped settings (issue 24): every flat key of earlier versions still works, in the file,
as a keyword, as a ``LITELLM_MEMORY_<KEY>`` variable and in an alias's block, moved to its group
with one warning naming the new key; the new key wins where both are set; the environment takes
``LITELLM_MEMORY_<GROUP>__<KEY>``; unknown keys are still refused and bad values still named as
they were written."""

from __future__ import annotations

import json
import logging
import re
import warnings
from typing import Any, get_args

import pytest
import yaml
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from litellm_memory_hook.engine.recall_step import RecallOptions
from litellm_memory_hook.errors import ConfigError
from litellm_memory_hook.settings import (
    ALIAS_FLAT_KEYS,
    FLAT_KEYS,
    GROUPS,
    AliasMemoryConfig,
    MemorySettings,
    env_name,
    flat_keys,
    load_settings,
    parse_alias_config,
    setting_origin,
    shadowed_env,
)
from tests.support.paths import REPO

#: the keys of MemorySettings before the groups (all flat): each must keep working.
FLAT_KEYS_BEFORE = [
    "redis_url",
    "redis_cluster",
    "key_prefix",
    "recent_chars",
    "recent_messages",
    "retention_days",
    "user_header",
    "conversation_header",
    "claude_code_user",
    "write_buffer_max",
    "write_buffer_max_age_s",
    "side_request_patterns",
    "regenerate_window_s",
    "extraction_every",
    "extraction_quiet_s",
    "redis_timeout_s",
    "redis_breaker_s",
    "stored_text_chars",
    "recall_mode",
    "recall_k",
    "recall_chars",
    "recall_k_max",
    "recall_min_share",
    "recall_scope",
    "recall_user_chats",
    "max_stored_messages",
    "pinned_chars",
    "memory_chars",
    "summary_chars",
    "extraction_enabled",
    "worker_in_proxy",
    "extraction_timeout_s",
    "extraction_lease_s",
    "extraction_poll_s",
    "extraction_heartbeat_s",
    "extraction_sweep_s",
    "extraction_lines_chars",
    "extraction_memory_chars",
    "max_memories",
    "memory_item_chars",
    "max_pinned",
    "pinned_item_chars",
    "extraction_base_url",
    "extraction_api_key",
    "extraction_max_attempts",
    "extraction_backoff_s",
    "extraction_auth_backoff_s",
    "extraction_backoff_max_s",
    "redis_refusal_log_s",
    "refused_write_retry_s",
    "extraction_max_removed_share",
    "memory_history_max",
    "summary_min_kept_share",
    "temporary_conversation_patterns",
    "redis_sentinel_nodes",
    "redis_service_name",
    "redis_sentinel_password",
]
#: the keys that stayed where they were
UNGROUPED = ("timezone", "gc_freeze")
#: the flat keys of an alias's block before the groups
ALIAS_FLAT_KEYS_BEFORE = [
    "recent_chars",
    "recent_messages",
    "recall_mode",
    "recall_k",
    "recall_chars",
    "recall_k_max",
    "recall_min_share",
    "recall_scope",
    "recall_user_chats",
]

#: values for the settings whose type alone does not give a valid one
_SAMPLES: dict[str, Any] = {
    "redis.url": "redis://other.invalid:7000/2",
    "redis.sentinel_nodes": ["10.0.0.9:26379"],
    "storage.key_prefix": "tgrp",
    "extraction.base_url": "http://10.0.0.9:4100/v1",
    "requests.side_request_patterns": ["^Title:"],
    "requests.temporary_conversation_patterns": [r"\Atmp-"],
}


def _field(path: str, model: type[BaseModel] | None = None) -> FieldInfo:
    group, _, name = path.partition(".")
    return (model or GROUPS[group]).model_fields[name]


def _within(info: FieldInfo, value: float) -> bool:
    for item in info.metadata:
        for name, holds in (
            ("ge", lambda bound: value >= bound),
            ("gt", lambda bound: value > bound),
            ("le", lambda bound: value <= bound),
            ("lt", lambda bound: value < bound),
        ):
            bound = getattr(item, name, None)
            if bound is not None and not holds(bound):
                return False
    return True


def other_value(path: str, info: FieldInfo) -> Any:
    """A valid value of the setting that is not its default (so a test sees where it went)."""
    if path in _SAMPLES:
        return _SAMPLES[path]
    default = info.get_default(call_default_factory=True)
    annotation = info.annotation
    choices = [a for a in get_args(annotation) if isinstance(a, str)]
    if annotation is bool:
        return not default
    if choices:
        return next(c for c in choices if c != default)
    if annotation in (int, float):
        for value in (default + 1, default - 1, default / 2, default * 2, default + 0.05):
            value = int(value) if annotation is int else value
            if value != default and _within(info, value):
                return value
    if str in get_args(annotation) or annotation is str:
        return "x-test-value"
    raise AssertionError(f"no sample value for {path}")  # pragma: no cover - a new type


def env_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return json.dumps(value)
    return str(value)


def value_at(settings: BaseModel, path: str) -> Any:
    group, _, name = path.partition(".")
    return getattr(getattr(settings, group), name)


@pytest.fixture(autouse=True)
def no_memory_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No LITELLM_MEMORY_* or generic Redis variable from the outside."""
    import os

    for name in list(os.environ):
        if name.upper().startswith("LITELLM_MEMORY_") or name.upper() in (
            "REDIS_URL",
            "REDIS_SENTINEL_NODES",
            "REDIS_SERVICE_NAME",
            "REDIS_SENTINEL_PASSWORD",
        ):
            monkeypatch.delenv(name)


def deprecations(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)]


# -- the mapping table ----------------------------------------------------------------------------


def test_the_table_maps_every_flat_key_of_before_to_a_setting_that_exists() -> None:
    """Every flat key MemorySettings had is in the table (none dropped), and each names a key of
    a group, no two the same; the groups hold nothing else than those keys, and the keys outside
    the groups are the two that stayed."""
    assert sorted(FLAT_KEYS) == sorted(FLAT_KEYS_BEFORE)
    assert len(set(FLAT_KEYS.values())) == len(FLAT_KEYS)
    for old, new in FLAT_KEYS.items():
        group, _, name = new.partition(".")
        assert group in GROUPS and name in GROUPS[group].model_fields, old
    grouped = {f"{g}.{n}" for g, model in GROUPS.items() for n in model.model_fields}
    assert grouped == set(FLAT_KEYS.values())
    assert [n for n in MemorySettings.model_fields if n not in GROUPS] == list(UNGROUPED)
    assert sorted(ALIAS_FLAT_KEYS) == sorted(ALIAS_FLAT_KEYS_BEFORE)


def test_the_names_follow_one_order_and_one_unit_style() -> None:
    """Every size limit starts with ``max_`` (no ``_max`` at the end, no unit before a count),
    and a time is in seconds with ``_s`` or in days with ``_days``."""
    for new in FLAT_KEYS.values():
        name = new.partition(".")[2]
        assert not name.endswith("_max") and "_max_" not in name, new
        if name.endswith(("_chars", "_messages", "_items", "_turns", "_chats")):
            assert name.startswith("max_") or name in ("every_messages",), new


@pytest.mark.parametrize(("old", "new"), sorted(FLAT_KEYS.items()))
def test_a_flat_key_in_the_file_lands_in_its_group_with_one_warning(old: str, new: str) -> None:
    """The file's flat key sets the grouped setting, and one DeprecationWarning names the new
    key; the bounds and the default of the setting are those of the flat key (the old key's
    value is checked as the new key's)."""
    value = other_value(new, _field(new))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        settings = load_settings({"memory": {old: value}})
    group, _, name = new.partition(".")
    expected = getattr(GROUPS[group].model_validate({name: value}), name)
    assert value_at(settings, new) == expected
    assert expected != _field(new).get_default(call_default_factory=True)
    assert deprecations(caught) == [f"callback_settings.memory.{old} is deprecated: use {new}"]


@pytest.mark.parametrize(("old", "new"), sorted(FLAT_KEYS.items()))
def test_a_flat_variable_lands_in_its_group_with_one_warning(
    old: str, new: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """LITELLM_MEMORY_<OLD KEY> still sets it, with a warning naming the new variable; the new
    variable sets it with none."""
    value = other_value(new, _field(new))
    expected = getattr(
        GROUPS[new.partition(".")[0]].model_validate({new.partition(".")[2]: value}),
        new.partition(".")[2],
    )
    flat = f"LITELLM_MEMORY_{old.upper()}"
    monkeypatch.setenv(flat, env_text(value))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert value_at(load_settings({}), new) == expected
    assert deprecations(caught) == [f"{flat} is deprecated: use {env_name(new)}"]
    monkeypatch.delenv(flat)
    monkeypatch.setenv(env_name(new), env_text(value))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert value_at(load_settings({}), new) == expected
    assert deprecations(caught) == []


@pytest.mark.parametrize(("old", "new"), sorted(FLAT_KEYS.items()))
def test_a_flat_keyword_lands_in_its_group(old: str, new: str) -> None:
    """``MemorySettings(recall_k=...)`` (tests, benchmarks, embedding code) and model_validate
    take the flat keys too, with one warning each."""
    value = other_value(new, _field(new))
    with pytest.warns(DeprecationWarning, match=f"^{re.escape(old)} is deprecated: use {new}$"):
        built = MemorySettings(**{old: value})
    with pytest.warns(DeprecationWarning, match=f"^{re.escape(old)} is deprecated: use {new}$"):
        validated = MemorySettings.model_validate({old: value})
    assert (
        value_at(built, new)
        == value_at(validated, new)
        == value_at(MemorySettings(**{new.partition(".")[0]: {new.partition(".")[2]: value}}), new)
    )


def test_the_new_keys_give_no_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LITELLM_MEMORY_RECALL__K", "7")
    monkeypatch.setenv("LITELLM_MEMORY_REDIS__URL", "redis://nested.invalid:1/0")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        settings = load_settings(
            {"memory": {"window": {"max_chars": 900}, "storage": {"key_prefix": "tg"}}}
        )
    assert deprecations(caught) == []
    assert (settings.recall.k, settings.redis.url) == (7, "redis://nested.invalid:1/0")
    assert (settings.window.max_chars, settings.storage.key_prefix) == (900, "tg")
    assert settings.window.max_messages == 40  # the rest of a group keeps its defaults


# -- both spellings at once ----------------------------------------------------------------------


def test_in_one_place_the_new_key_wins_and_the_warning_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The file with ``recall_k`` and ``recall: {k}``: the group's value; the environment with
    both variables: the group's variable. The warning says the flat one is ignored."""
    with pytest.warns(DeprecationWarning) as caught:
        settings = load_settings({"memory": {"recall_k": 3, "recall": {"k": 5, "mode": "fixed"}}})
    assert (settings.recall.k, settings.recall.mode) == (5, "fixed")
    assert deprecations(caught.list) == [
        "callback_settings.memory.recall_k is deprecated and ignored: recall.k is set too and wins"
    ]
    monkeypatch.setenv("LITELLM_MEMORY_RECALL_K", "3")
    monkeypatch.setenv("LITELLM_MEMORY_RECALL__K", "6")
    with pytest.warns(DeprecationWarning) as caught:
        assert load_settings({}).recall.k == 6
    assert deprecations(caught.list) == [
        "LITELLM_MEMORY_RECALL_K is deprecated and ignored: LITELLM_MEMORY_RECALL__K is set too "
        "and wins"
    ]


def test_the_file_still_wins_over_the_environment_whatever_the_spelling(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A flat key in the file beats the group's variable, and a group key in the file beats a
    flat variable: which place wins did not change."""
    monkeypatch.setenv("LITELLM_MEMORY_RECALL__K", "6")
    with pytest.warns(DeprecationWarning):
        assert load_settings({"memory": {"recall_k": 3}}).recall.k == 3
    monkeypatch.delenv("LITELLM_MEMORY_RECALL__K")
    monkeypatch.setenv("LITELLM_MEMORY_RECALL_K", "6")
    with pytest.warns(DeprecationWarning):
        assert load_settings({"memory": {"recall": {"k": 3}}}).recall.k == 3


def test_the_environment_fills_a_group_key_by_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """A group in the file and a key of the same group in the environment (either spelling)
    merge: the file's keys win, the others come from the environment."""
    monkeypatch.setenv("LITELLM_MEMORY_WINDOW__MAX_MESSAGES", "12")
    monkeypatch.setenv("LITELLM_MEMORY_RECALL_SCOPE", "user")
    with pytest.warns(DeprecationWarning):
        settings = load_settings({"memory": {"window": {"max_chars": 900}, "recall": {"k": 2}}})
    assert (settings.window.max_chars, settings.window.max_messages) == (900, 12)
    assert (settings.recall.k, settings.recall.scope) == (2, "user")


def test_the_redis_url_variables_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """LITELLM_MEMORY_REDIS__URL, then the flat LITELLM_MEMORY_REDIS_URL, then REDIS_URL (not
    deprecated: LiteLLM reads it too); whichever sets it counts as set (serve then leaves its
    embedded Redis out)."""
    assert "url" not in load_settings({}).redis.model_fields_set
    monkeypatch.setenv("REDIS_URL", "redis://generic.invalid:1/0")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        settings = load_settings({})
    assert deprecations(caught) == []
    assert settings.redis.url == "redis://generic.invalid:1/0"
    assert "url" in settings.redis.model_fields_set
    monkeypatch.setenv("LITELLM_MEMORY_REDIS_URL", "redis://flat.invalid:1/0")
    with pytest.warns(DeprecationWarning):
        assert load_settings({}).redis.url == "redis://flat.invalid:1/0"
    monkeypatch.setenv("LITELLM_MEMORY_REDIS__URL", "redis://nested.invalid:1/0")
    with pytest.warns(DeprecationWarning):
        assert load_settings({}).redis.url == "redis://nested.invalid:1/0"
    assert setting_origin({}, "redis.url") == "LITELLM_MEMORY_REDIS__URL"


# -- what is refused, and how it is named ---------------------------------------------------------


@pytest.mark.parametrize(
    ("section", "named"),
    [
        ({"recall_kk": 1}, "callback_settings.memory.recall_kk: not a known setting"),
        ({"recall": {"kk": 1}}, "callback_settings.memory.recall.kk: not a known setting"),
        ({"recall": {"recall_k": 1}}, "callback_settings.memory.recall.recall_k: not a known"),
        ({"window": 5}, "callback_settings.memory.window (5): Input should be a valid dictionary"),
    ],
)
def test_unknown_keys_are_still_refused(section: dict[str, Any], named: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings({"memory": section})
    assert named in str(info.value)


@pytest.mark.parametrize(
    "variable",
    ["LITELLM_MEMORY_RECALL__KK", "LITELLM_MEMORY_RECALLK", "LITELLM_MEMORY_RECALL__K__X"],
)
def test_unknown_variables_are_still_refused(
    variable: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(variable, "1")
    with pytest.raises(ConfigError, match=f"unknown environment variable.*{variable}"):
        load_settings({})


@pytest.mark.parametrize(
    ("section", "env", "message"),
    [
        (
            {"recall_k": "abc"},
            {},
            "invalid setting callback_settings.memory.recall_k ('abc'): Input should be a valid "
            "integer, unable to parse string as an integer",
        ),
        (
            {},
            {"LITELLM_MEMORY_RECALL_K": "abc"},
            "invalid setting LITELLM_MEMORY_RECALL_K ('abc'): Input should be a valid integer, "
            "unable to parse string as an integer",
        ),
        (
            {"Recent_Chars": 5},
            {},
            "invalid setting callback_settings.memory.Recent_Chars (5): Input should be greater "
            "than or equal to 200",
        ),
        (
            {"redis_url": "pw@nowhere"},
            {},
            "invalid setting callback_settings.memory.redis_url: must start with redis://, "
            "rediss:// or unix:// (e.g. redis://127.0.0.1:6379/0)",
        ),
        (
            {},
            {"LITELLM_MEMORY_EXTRACTION_TIMEOUT_S": "0"},
            "invalid setting LITELLM_MEMORY_EXTRACTION_TIMEOUT_S ('0'): Input should be greater "
            "than 0",
        ),
    ],
)
def test_a_bad_flat_value_is_named_as_it_was_written(
    section: dict[str, Any], env: dict[str, str], message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A flat key's bad value is named by the flat key (file or variable), as before; a URL's
    value is still not repeated."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError) as info, warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        load_settings({"memory": section})
    assert str(info.value) == message


def test_a_bad_group_value_is_named_by_its_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LITELLM_MEMORY_WINDOW__MAX_MESSAGES", "0")
    with pytest.raises(ConfigError) as info:
        load_settings({"memory": {"recall": {"k": 99}, "extraction": {"api_key": 5}}})
    assert str(info.value) == (
        "invalid settings: LITELLM_MEMORY_WINDOW__MAX_MESSAGES ('0'): Input should be greater "
        "than or equal to 1; callback_settings.memory.recall.k (99): Input should be less than "
        "or equal to 20; callback_settings.memory.extraction.api_key: Input should be a valid "
        "string"
    )


# -- where each setting is said to come from ------------------------------------------------------


def test_shadowed_variables_are_named_in_either_spelling(monkeypatch: pytest.MonkeyPatch) -> None:
    """doctor's list: a variable (new or flat) of a setting the file sets (new or flat)."""
    monkeypatch.setenv("LITELLM_MEMORY_STORAGE__KEY_PREFIX", "a")
    monkeypatch.setenv("LITELLM_MEMORY_RECALL_K", "3")
    monkeypatch.setenv("LITELLM_MEMORY_WINDOW__MAX_CHARS", "900")
    monkeypatch.setenv("LITELLM_MEMORY_GC_FREEZE", "true")
    section = {"memory": {"key_prefix": "b", "recall": {"k": 2}, "window": {}, "gc_freeze": True}}
    assert shadowed_env(section) == [
        "LITELLM_MEMORY_GC_FREEZE",
        "LITELLM_MEMORY_RECALL_K",
        "LITELLM_MEMORY_STORAGE__KEY_PREFIX",
    ]


def test_setting_origin_names_the_spelling_that_was_used(monkeypatch: pytest.MonkeyPatch) -> None:
    assert setting_origin({"Recall": {"k": 1}}, "recall.k") == "callback_settings.memory.Recall.k"
    assert setting_origin({"RECALL_K": 1}, "recall.k") == "callback_settings.memory.RECALL_K"
    assert setting_origin({}, "recall.k") is None
    monkeypatch.setenv("LITELLM_MEMORY_RECALL_K", "1")
    assert setting_origin({}, "recall.k") == "LITELLM_MEMORY_RECALL_K"
    assert setting_origin({"recall": {"k": 1}}, "recall.k") == "callback_settings.memory.recall.k"
    monkeypatch.setenv("REDIS_SERVICE_NAME", "m")
    assert setting_origin(None, "redis.service_name") == "REDIS_SERVICE_NAME"
    assert setting_origin({"timezone": "UTC"}, "timezone") == "callback_settings.memory.timezone"


def test_the_proxy_and_the_cli_log_each_flat_key_once(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A DeprecationWarning alone is hidden outside tests: load_settings and parse_alias_config
    also log each one, once per process; a plain MemorySettings() does not log."""
    monkeypatch.setattr(flat_keys, "_LOGGED", set())
    monkeypatch.setenv("LITELLM_MEMORY_KEY_PREFIX", "tl")
    with caplog.at_level(logging.WARNING, logger="litellm_memory_hook"), warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        for _ in range(2):
            load_settings({"memory": {"recent_chars": 900}})
            parse_alias_config({"memory": {"recall_k": 2}})
        MemorySettings(recall_k=1)
    assert [r.getMessage() for r in caplog.records] == [
        "memory hook: callback_settings.memory.recent_chars is deprecated: use window.max_chars",
        "memory hook: LITELLM_MEMORY_KEY_PREFIX is deprecated: use "
        "LITELLM_MEMORY_STORAGE__KEY_PREFIX",
        "memory hook: model_info.memory.recall_k is deprecated: use recall.k",
    ]


# -- the alias block ------------------------------------------------------------------------------


@pytest.mark.parametrize(("old", "new"), sorted(ALIAS_FLAT_KEYS.items()))
def test_an_alias_takes_the_flat_and_the_grouped_key(old: str, new: str) -> None:
    """``recall_k: 2`` and ``recall: {k: 2}`` in ``model_info.memory`` are the same override
    (the flat one with a warning naming the new key); the bounds are those of the global
    setting."""
    group, _, name = new.partition(".")
    model = AliasMemoryConfig.model_fields[group].annotation
    assert isinstance(model, type) and issubclass(model, BaseModel)
    value = other_value(new, _field(new))
    with pytest.warns(DeprecationWarning, match=f"^model_info.memory.{old} is deprecated: use "):
        flat = parse_alias_config({"memory": {old: value}})
    grouped = parse_alias_config({"memory": {group: {name: value}}})
    assert flat == grouped and flat is not None
    assert value_at(flat, new) == value_at(MemorySettings(**{group: {name: value}}), new)
    assert value_at(AliasMemoryConfig(), new) is None
    global_field, alias_field = _field(new), _field(new, model)
    assert repr(alias_field.metadata) == repr(global_field.metadata)


def test_an_alias_override_beats_the_global_group_key_by_key() -> None:
    settings = MemorySettings(recall={"k": 3, "max_chars": 900, "scope": "user"})
    with pytest.warns(DeprecationWarning, match="recall_k is deprecated and ignored"):
        alias = parse_alias_config({"memory": {"recall_k": 1, "recall": {"k": 2, "max_k": 5}}})
    assert alias is not None
    options = RecallOptions.for_alias(settings, alias)
    assert (options.k, options.k_max, options.chars, options.scope) == (2, 5, 900, "user")
    assert RecallOptions() == RecallOptions.for_alias(MemorySettings(), AliasMemoryConfig())


def test_a_bad_alias_value_is_named_as_it_was_written() -> None:
    with pytest.raises(ConfigError) as info, warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        parse_alias_config({"memory": {"recall_k": 99, "window": {"max_chars": 5}}})
    assert str(info.value) == (
        "invalid settings: model_info.memory.window.max_chars (5): Input should be greater than "
        "or equal to 200; model_info.memory.recall_k (99): Input should be less than or equal "
        "to 20"
    )
    with pytest.raises(ConfigError, match=r"model_info\.memory\.recall\.kk: not a known setting"):
        parse_alias_config({"memory": {"recall": {"kk": 1}}})
    with pytest.raises(ConfigError, match=r"model_info\.memory\.Recall_K: not a known setting"):
        parse_alias_config({"memory": {"Recall_K": 1}})  # an alias's keys are case-sensitive


# -- the shipped config and the docs use the new keys ----------------------------------------------


def _configs() -> list[tuple[str, dict[str, Any]]]:
    found = [("config.yaml", yaml.safe_load((REPO / "config.yaml").read_text()))]
    for page in [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]:
        for block in re.findall(r"^```yaml\n(.*?)^```", page.read_text(), flags=re.S | re.M):
            config = yaml.safe_load(block)
            if isinstance(config, dict) and (
                "callback_settings" in config or "model_list" in config
            ):
                found.append((str(page.relative_to(REPO)), config))
    return found


def test_the_shipped_config_and_the_docs_examples_use_no_flat_key() -> None:
    seen = []
    for name, config in _configs():
        with warnings.catch_warnings():
            warnings.simplefilter("error", DeprecationWarning)
            load_settings(config.get("callback_settings"))
            for entry in config.get("model_list") or ():
                info = entry.get("model_info") or {}
                if isinstance(info.get("memory"), dict):
                    parse_alias_config(info)
        seen.append(name)
    assert {"config.yaml", "README.md", "docs/quickstart.md"} <= set(seen)
