"""The settings model and the per-alias block."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from litellm_memory_hook.errors import ConfigError
from litellm_memory_hook.settings import MemorySettings, load_settings, parse_alias_config


def test_defaults_follow_the_design() -> None:
    """8000 characters, 40 messages, 30 days (DESIGN.md section 5)."""
    settings = load_settings({})
    assert (settings.window.max_chars, settings.window.max_messages) == (8000, 40)
    assert settings.storage.retention_s == 30 * 86400


def test_unknown_keys_are_rejected() -> None:
    """A typo in callback_settings.memory is an error, not silently ignored."""
    with pytest.raises(ConfigError, match="recent_char"):
        load_settings({"memory": {"recent_char": 100}})
    with pytest.raises(ConfigError, match=r"window\.max_char:"):
        load_settings({"memory": {"window": {"max_char": 100}}})


def test_environment_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """REDIS_URL and LITELLM_MEMORY_* variables configure the hook; config.yaml wins."""
    monkeypatch.setenv("REDIS_URL", "redis://example.invalid:1/2")
    monkeypatch.setenv("LITELLM_MEMORY_WINDOW__MAX_CHARS", "5000")
    assert MemorySettings().redis.url == "redis://example.invalid:1/2"
    assert MemorySettings().window.max_chars == 5000
    assert load_settings({"memory": {"window": {"max_chars": 6000}}}).window.max_chars == 6000


def test_alias_blocks() -> None:
    """memory: true / a mapping enables; absent, false or enabled: false disables."""
    assert parse_alias_config({"memory": True}) is not None
    assert parse_alias_config({}) is None
    assert parse_alias_config({"memory": {"enabled": False}}) is None
    config = parse_alias_config({"memory": {"required": True, "window": {"max_chars": 500}}})
    assert config is not None and config.required and config.window.max_chars == 500
    with pytest.raises(ConfigError):
        parse_alias_config({"memory": {"requird": True}})
    with pytest.raises(ConfigError):
        parse_alias_config({"memory": "yes"})


def test_specific_redis_url_beats_the_generic_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """LITELLM_MEMORY_REDIS__URL wins over REDIS_URL (which LiteLLM itself also reads); the
    config file wins over both."""
    monkeypatch.setenv("REDIS_URL", "redis://generic:1/0")
    monkeypatch.setenv("LITELLM_MEMORY_REDIS__URL", "redis://specific:2/0")
    assert MemorySettings().redis.url == "redis://specific:2/0"
    file = load_settings({"memory": {"redis": {"url": "redis://file:3/0"}}})
    assert file.redis.url == "redis://file:3/0"
    monkeypatch.delenv("LITELLM_MEMORY_REDIS__URL")
    assert MemorySettings().redis.url == "redis://generic:1/0"


def test_unknown_environment_variables_are_rejected(monkeypatch: pytest.MonkeyPatch) -> None:
    """A misspelt LITELLM_MEMORY_* variable is an error, not silently ignored."""
    for name in ("LITELLM_MEMORY_RECENT_CHAR", "LITELLM_MEMORY_WINDOW__MAX_CHAR"):
        monkeypatch.setenv(name, "100")
        with pytest.raises(ConfigError, match=name):
            load_settings({})
        monkeypatch.delenv(name)


def test_a_redis_url_without_a_scheme_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Redis URL that redis-py cannot use (no redis://, rediss:// or unix://) is refused when
    the settings are read, as every other bad setting, not at the first request (a fresh-user
    test got an "unexpected error" exit 1 from the CLI)."""
    for url in ("notaurl", "127.0.0.1:6379", "http://127.0.0.1:6379"):
        monkeypatch.setenv("LITELLM_MEMORY_REDIS__URL", url)
        with pytest.raises(ValidationError, match="must start with redis://"):
            MemorySettings()
    for url in ("redis://h:1/0", "rediss://:pw@h:1/0", "unix:///tmp/r.sock"):
        monkeypatch.setenv("LITELLM_MEMORY_REDIS__URL", url)
        assert MemorySettings().redis.url == url


def test_a_bad_value_is_one_line_naming_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    """pydantic's dump (4 lines: "1 validation error for MemorySettings", the field, the message,
    "For further information visit ...") is one line per problem's clause: the setting as the
    operator wrote it (environment variable or file key), its value, what is expected."""
    monkeypatch.setenv("LITELLM_MEMORY_RECALL__K", "abc")
    with pytest.raises(ConfigError) as info:
        load_settings({"memory": {"window": {"max_chars": 5}}})
    assert str(info.value) == (
        "invalid settings: callback_settings.memory.window.max_chars (5): Input should be "
        "greater than or equal to 200; LITELLM_MEMORY_RECALL__K ('abc'): Input should be a "
        "valid integer, unable to parse string as an integer"
    )
    monkeypatch.delenv("LITELLM_MEMORY_RECALL__K")
    with pytest.raises(ConfigError) as info:
        load_settings({"memory": {"recent_char": 100}})
    assert str(info.value) == (
        "invalid setting callback_settings.memory.recent_char: not a known setting"
    )
    with pytest.raises(ConfigError) as info:
        load_settings({"memory": {"requests": {"side_request_patterns": ["("]}}})
    assert str(info.value).startswith(
        "invalid setting callback_settings.memory.requests.side_request_patterns (['(']): "
        "bad pattern '('"
    )


@pytest.mark.parametrize(
    ("section", "named"),
    [
        ({"Recall": {"k": "abc"}}, "callback_settings.memory.Recall.k ('abc')"),
        ({"REDIS": {"url": 5}}, "callback_settings.memory.REDIS.url:"),
        ({"Extraction": {"api_key": 5}}, "callback_settings.memory.Extraction.api_key:"),
        ({"Recall_K": "abc"}, "callback_settings.memory.Recall_K ('abc')"),
        ({"REDIS_URL": 5}, "callback_settings.memory.REDIS_URL:"),
        ({"Extraction_Api_Key": 5}, "callback_settings.memory.Extraction_Api_Key:"),
        ({"redis": "redis://u:secret@h:1/0"}, "callback_settings.memory.redis:"),
    ],
)
def test_a_file_key_is_named_as_the_file_spells_it(section: dict[str, object], named: str) -> None:
    """Keys of ``callback_settings.memory`` are case-insensitive: a bad value is named by the key
    as written in the file, not by the environment variable of the setting (review), and
    secrets are still not repeated."""
    with pytest.raises(ConfigError) as info:
        load_settings({"memory": section})
    assert named in str(info.value) and "LITELLM_MEMORY_" not in str(info.value)


def test_a_bad_redis_url_is_named_without_its_value(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Redis URL may hold a password: the message names the variable that set it, not the
    value."""
    monkeypatch.delenv("LITELLM_MEMORY_REDIS__URL", raising=False)
    monkeypatch.delenv("LITELLM_MEMORY_REDIS_URL", raising=False)
    monkeypatch.setenv("REDIS_URL", "secret:pw@host")
    with pytest.raises(ConfigError) as info:
        load_settings({})
    assert str(info.value) == (
        "invalid setting REDIS_URL: must start with redis://, rediss:// or unix:// "
        "(e.g. redis://127.0.0.1:6379/0)"
    )
    monkeypatch.setenv("LITELLM_MEMORY_REDIS__URL", "other:pw@host")
    with pytest.raises(ConfigError) as info:
        load_settings({})
    assert str(info.value).startswith("invalid setting LITELLM_MEMORY_REDIS__URL: must start")
    assert "pw" not in str(info.value)


def test_a_bad_alias_block_is_one_line() -> None:
    """model_info.memory problems are named by their path in the block, on one line."""
    with pytest.raises(ConfigError) as info:
        parse_alias_config({"memory": {"recall": {"k": "x"}, "wording": {"reminder": 3}}})
    assert str(info.value) == (
        "invalid settings: model_info.memory.recall.k ('x'): Input should be a valid integer, "
        "unable to parse string as an integer; model_info.memory.wording.reminder (3): Input "
        "should be a valid string"
    )


async def test_the_proxy_logs_a_bad_setting_on_one_line(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The proxy reads its settings at the first memory request: with a bad one it passes the
    request through and logs one line naming the setting (pydantic's dump before)."""
    import logging

    import litellm

    from litellm_memory_hook.proxy.hook import MemoryHook
    from tests.support.hook_calls import ALIASES, Auth, chat_request

    monkeypatch.setattr(litellm, "callback_settings", {"memory": {}}, raising=False)
    monkeypatch.setenv("LITELLM_MEMORY_RECALL__K", "abc")
    hook = MemoryHook(alias_lookup=lambda model: ALIASES.get(model))
    data = chat_request()
    with caplog.at_level(logging.ERROR, logger="litellm_memory_hook"):
        out = await hook.async_pre_call_hook(Auth(), None, data, "acompletion")
    assert out is data and hook.counters["config_errors"] == 1
    [record] = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert record.getMessage() == (
        "memory hook: bad configuration for 'demo': invalid setting LITELLM_MEMORY_RECALL__K "
        "('abc'): Input should be a valid integer, unable to parse string as an integer"
    )


def test_an_unknown_timezone_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """LITELLM_MEMORY_TIMEZONE=Mars/Base (or timezone: in the file) was taken silently, and every
    recalled line was then dated in UTC: it is refused as metadata.timezone is (a 400), one
    line naming the setting as it was set."""
    monkeypatch.setenv("LITELLM_MEMORY_TIMEZONE", "Mars/Base")
    with pytest.raises(ConfigError) as info:
        load_settings({})
    assert str(info.value) == (
        "invalid setting LITELLM_MEMORY_TIMEZONE ('Mars/Base'): must be an IANA time zone name "
        "such as Asia/Kolkata or UTC"
    )
    monkeypatch.delenv("LITELLM_MEMORY_TIMEZONE")
    for bad in ("Mars/Base", "Asia/Kolkata ", "../../etc/passwd", "+05:30"):
        with pytest.raises(ConfigError) as info:
            load_settings({"memory": {"timezone": bad}})
        assert str(info.value).startswith("invalid setting callback_settings.memory.timezone (")


@pytest.mark.parametrize("zone", ["Asia/Kolkata", "UTC", "America/Sao_Paulo", "Europe/Berlin"])
def test_known_timezones_are_taken(monkeypatch: pytest.MonkeyPatch, zone: str) -> None:
    """IANA names this system knows, from the file or the environment."""
    assert load_settings({"memory": {"timezone": zone}}).timezone == zone
    monkeypatch.setenv("LITELLM_MEMORY_TIMEZONE", zone)
    assert load_settings({}).timezone == zone


def test_an_empty_timezone_still_means_utc(monkeypatch: pytest.MonkeyPatch) -> None:
    """Unset is UTC; empty is taken as before and dates lines in UTC."""
    from litellm_memory_hook.core.time_labels import time_label

    monkeypatch.delenv("LITELLM_MEMORY_TIMEZONE", raising=False)
    assert load_settings({}).timezone == "UTC"
    empty = load_settings({"memory": {"timezone": ""}}).timezone
    assert empty == ""
    assert time_label(1_683_554_160_000, empty) == time_label(1_683_554_160_000, "UTC")


@pytest.mark.parametrize("key", ["extraction.quiet_s", "write_buffer.max_age_s"])
def test_an_infinite_time_is_a_config_error(key: str) -> None:
    """``.inf`` in config.yaml (or ``inf`` in the environment) passed validation and doctor
    said ok, then the post-call write failed on int(inf) (no extraction was ever scheduled)
    and every forget failed (CLI: OverflowError; memory API: 503)."""
    group, name = key.split(".")
    with pytest.raises(ConfigError, match=key):
        load_settings({"memory": {group: {name: float("inf")}}})
