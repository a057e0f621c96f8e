"""What the CLI answers to bad input, each as one ``error: ...`` line (README, "Every command
answers an error with one line"): history files with lines that cannot be turns or none at all
(and the notice of lines left out on purpose), files that are not UTF-8, bad settings, usage
errors. Only the test with a successful import touches Redis (its own key prefix)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml
from typer.testing import CliRunner

from litellm_memory_hook.tools import cli
from litellm_memory_hook.tools.cli_memory import register
from tests.support.harness import REPO
from tests.support.redis_url import real_redis_url

register(cli.app)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No LITELLM_MEMORY_* setting from the outside."""
    for name in (
        "LITELLM_MEMORY_RECALL__K",
        "LITELLM_MEMORY_RECALL_K",
        "LITELLM_MEMORY_WINDOW__MAX_CHARS",
        "LITELLM_MEMORY_RECENT_CHARS",
    ):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def config(tmp_path: Path) -> Path:
    """The checkout's config.yaml without its key prefix (the test's, when it sets one)."""
    raw = yaml.safe_load((REPO / "config.yaml").read_text(encoding="utf-8"))
    raw["callback_settings"]["memory"].get("storage", {}).pop("key_prefix", None)
    raw["callback_settings"]["memory"].pop("redis", None)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    return path


def invoke(*args: str) -> Any:
    """`litellm-memory ARGS` in-process (stdout and stderr apart, and together in output)."""
    return CliRunner().invoke(cli.app, list(args), prog_name="litellm-memory")


def one_error_line(result: Any, code: int = 2) -> str:
    """The single ``error: ...`` line of a failed command (asserting there is nothing else)."""
    lines = result.output.strip().splitlines()
    assert result.exit_code == code, result.output
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    assert "Traceback" not in result.output
    return str(lines[0])


def write_lines(path: Path, *lines: object) -> Path:
    """A jsonl file: dicts and lists as JSON, strings as written."""
    path.write_text(
        "".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines),
        encoding="utf-8",
    )
    return path


#: the import arguments of the LoCoMo sample :func:`write_locomo` writes (with ``--config``)
LOCOMO_ARGS = ("--format", "locomo", "--sample-id", "s1", "--user", "ana")


def write_locomo(path: Path, *turns: dict[str, str]) -> Path:
    """A LoCoMo file of one sample ``s1``: Ana and Bo, one session holding ``turns``."""
    conversation = {
        "speaker_a": "Ana",
        "speaker_b": "Bo",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": list(turns),
    }
    path.write_text(json.dumps([{"sample_id": "s1", "conversation": conversation}]), "utf-8")
    return path


# -- jsonl: refused lines, skipped lines, nothing to import ---------------------------------------


def test_jsonl_with_lines_that_cannot_be_turns_is_refused(config: Path, tmp_path: Path) -> None:
    """The tester's file (a misspelt role, a message without a role, content that is a number,
    beside a system message and two good lines) was imported as 2 turns, rc 0, without a word.
    Now it is refused whole, naming each bad line and why, before Redis is touched."""
    file = write_lines(
        tmp_path / "chat.jsonl",
        {"role": "usr", "content": "typo"},
        {"content": "no role"},
        {"role": "user", "content": 42},
        {"role": "system", "content": "be nice"},
        {"role": "user", "content": "hello"},
        {"role": "assistant", "content": "hi there"},
        '{"role": "user", "content": "cut',
    )
    line = one_error_line(invoke("import", str(file), "--user", "ana", "--config", str(config)))
    assert line == (
        f'error: {file}: 4 lines cannot be imported: line 1: unknown role "usr" (user or '
        "assistant); line 2: no role (user or assistant); line 3: content is a number (42), not "
        "text or a list of parts; and 1 more; fix or remove them (nothing was imported)"
    )
    # a line that is not JSON is named like the others (it stopped the read on its own)
    file.write_text('{"role": "user", "content": "cut\n', encoding="utf-8")
    line = one_error_line(invoke("import", str(file), "--user", "ana", "--config", str(config)))
    assert line.startswith(f"error: {file}: 1 line cannot be imported: line 1: not JSON (")


def test_jsonl_with_only_skipped_lines_is_an_error(config: Path, tmp_path: Path) -> None:
    """A file where nothing can be imported printed "imported 0 turns (seq 0-0)", rc 0: it is
    an error naming what was skipped; an empty file too."""
    file = write_lines(
        tmp_path / "chat.jsonl",
        {"role": "system", "content": "You are Mira."},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1"}]},
        {"role": "user", "content": "   "},
    )
    line = one_error_line(invoke("import", str(file), "--user", "ana", "--config", str(config)))
    assert line == (
        f"error: {file}: nothing to import, 3 lines skipped (line 1: system message; "
        "line 2: tool calls, no text; line 3: no text)"
    )
    empty = write_lines(tmp_path / "empty.jsonl")
    line = one_error_line(invoke("import", str(empty), "--user", "ana", "--config", str(config)))
    assert line == f"error: {empty}: nothing to import (no lines)"


@pytest.mark.redis
def test_skipped_lines_are_listed_on_stderr(config: Path, tmp_path: Path, key_prefix: str) -> None:
    """System messages and messages without text are left out on purpose: the import says so
    on stderr (a count and the first three lines with the reason), stdout keeps the result."""
    file = write_lines(
        tmp_path / "chat.jsonl",
        {"role": "system", "content": "You are Mira."},
        {"role": "user", "content": "My cat is called Miso."},
        {"role": "tool", "content": "42", "tool_call_id": "c1"},
        {"role": "assistant", "content": ""},
        {"role": "developer", "content": "be brief"},
        {"role": "assistant", "content": "Noted."},
    )
    result = invoke("import", str(file), "--user", "ana", "--config", str(config))
    assert result.exit_code == 0, result.output
    assert result.stderr.strip() == (
        f"{file}: 4 lines skipped (line 1: system message; line 3: tool message; "
        "line 4: no text; and 1 more)"
    )
    assert "imported 2 turns (seq 1-2)" in result.stdout
    client = redis.Redis.from_url(real_redis_url())
    try:
        turns = list(client.scan_iter(match=f"{key_prefix}:*:turns", count=1000))
        assert len(turns) == 1 and client.zcard(turns[0]) == 2
    finally:
        client.close()


def test_locomo_turns_of_no_speaker_are_refused(config: Path, tmp_path: Path) -> None:
    """LoCoMo turns without text, or of neither speaker, were dropped or taken as the
    assistant's without a word: the file is refused naming them."""
    file = write_locomo(
        tmp_path / "locomo.json",
        {"speaker": "Ana", "dia_id": "D1:1", "text": "Hi Bo."},
        {"speaker": "Cy", "dia_id": "D1:2", "text": "Hi, I am not in this chat."},
        {"speaker": "Bo", "dia_id": "D1:3"},
    )
    args = (*LOCOMO_ARGS, "--config", str(config))
    line = one_error_line(invoke("import", str(file), *args))
    assert f"{file}: 2 lines cannot be imported" in line
    assert "D1:2: speaker 'Cy' is neither speaker_a 'Ana' nor speaker_b 'Bo'" in line
    assert "D1:3: no 'text' string" in line


def test_a_locomo_sample_of_blank_turns_is_nothing_to_import(config: Path, tmp_path: Path) -> None:
    """Blank LoCoMo turns are left out by the importer, and said so; none left is an error."""
    file = write_locomo(
        tmp_path / "locomo.json",
        {"speaker": "Ana", "dia_id": "D1:1", "text": " "},
        {"speaker": "Bo", "dia_id": "D1:2", "text": "\u200b"},
    )
    args = (*LOCOMO_ARGS, "--config", str(config))
    line = one_error_line(invoke("import", str(file), *args))
    assert line == (
        f"error: {file}: nothing to import, 2 lines skipped (D1:1: no text; D1:2: no text)"
    )


# -- files that are not UTF-8 ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "data", "args", "where"),
    [
        ("chat.jsonl", b'{"role":"user","content":"ok"}\n{"role":"user","content":"caf\xe9"}\n',
         ("--user", "ana"), "byte 0xE9 at offset 60 (line 2)"),
        ("locomo.json", b'[{"sample_id": "s\xff"}]', ("--sample-id", "s", "--user", "ana"),
         "byte 0xFF at offset 17 (line 1)"),
        ("alice.json", b'{"format": "litellm-memory-export", "user": "\xe9"}',
         ("--format", "export"), "byte 0xE9 at offset 45 (line 1)"),
    ],
)  # fmt: skip
def test_a_file_that_is_not_utf8_is_one_handled_line(
    config: Path, tmp_path: Path, name: str, data: bytes, args: tuple[str, ...], where: str
) -> None:
    """Every import format: a UnicodeDecodeError went the unexpected-error way ("error:
    UnicodeDecodeError: ... (run with --debug ...)", rc 1); now one line naming the file and
    the byte, rc 2 as any other bad file."""
    file = tmp_path / name
    file.write_bytes(data)
    line = one_error_line(invoke("import", str(file), *args, "--config", str(config)))
    assert line == f"error: {file} is not UTF-8 text: {where}; save the file as UTF-8"


def test_a_config_that_is_not_utf8_or_not_yaml_is_one_line(tmp_path: Path) -> None:
    """config.yaml with a Latin-1 byte (an unexpected error, rc 1, before) or bad YAML (a
    multi-line YAML message) is one line, rc 2."""
    latin = tmp_path / "latin.yaml"
    latin.write_bytes(b"model_list: []\ncallback_settings: {memory: {key_prefix: caf\xe9}}\n")
    line = one_error_line(invoke("stats", "--config", str(latin)))
    assert line == (
        f"error: {latin} is not UTF-8 text: byte 0xE9 at offset 59 (line 2); save the file as UTF-8"
    )
    broken = tmp_path / "broken.yaml"
    broken.write_text("model_list: [\n  - a: b\n", encoding="utf-8")
    line = one_error_line(invoke("export", "--user", "ana", "--config", str(broken)))
    assert line.startswith(f"error: {broken} is not valid YAML: line 2, column 3: ")


# -- settings -------------------------------------------------------------------------------------


def test_a_bad_setting_is_one_line_naming_it(config: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """LITELLM_MEMORY_RECALL__K=abc printed pydantic's 4-line dump: one line naming the variable,
    its value and what is expected."""
    monkeypatch.setenv("LITELLM_MEMORY_RECALL__K", "abc")
    line = one_error_line(invoke("stats", "--config", str(config)))
    assert line == (
        "error: invalid setting LITELLM_MEMORY_RECALL__K ('abc'): Input should be a valid "
        "integer, unable to parse string as an integer"
    )
    # the benchmarks read the environment's settings too (a ValidationError, rc 1, before)
    line = one_error_line(invoke("bench", "recall", str(config), "--no-curve"))
    assert "LITELLM_MEMORY_RECALL__K ('abc')" in line


def test_a_bad_setting_in_the_file_names_its_key(config: Path) -> None:
    """A value in callback_settings.memory is named by its key there; two problems, one line."""
    raw = yaml.safe_load(config.read_text(encoding="utf-8"))
    raw["callback_settings"]["memory"]["window"]["max_chars"] = 5
    raw["callback_settings"]["memory"]["recall"] = {"mode": "best"}
    config.write_text(yaml.safe_dump(raw), encoding="utf-8")
    line = one_error_line(invoke("stats", "--config", str(config)))
    assert line == (
        "error: invalid settings: callback_settings.memory.window.max_chars (5): Input should be "
        "greater than or equal to 200; callback_settings.memory.recall.mode ('best'): Input "
        "should be 'budget' or 'fixed'"
    )


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("redis://127.0.0.1:99999/0", "has a port that is not a number from 1 to 65535"),
        ("redis://127.0.0.1:0/0", "has port 0"),
    ],
)
def test_a_redis_url_with_an_impossible_port_is_a_bad_setting(
    config: Path, monkeypatch: pytest.MonkeyPatch, url: str, expected: str
) -> None:
    """A port outside 1-65535 is refused as a setting (it passed, then every command failed
    with "ValueError: Port out of range"); the URL itself is not repeated (it may hold a
    password)."""
    monkeypatch.setenv("LITELLM_MEMORY_REDIS__URL", url)
    line = one_error_line(invoke("stats", "--config", str(config)))
    assert "LITELLM_MEMORY_REDIS__URL" in line and expected in line
    assert "127.0.0.1" not in line


@pytest.mark.parametrize("from_file", [False, True])
def test_the_worker_names_where_extraction_was_turned_off(
    config: Path, monkeypatch: pytest.MonkeyPatch, from_file: bool
) -> None:
    """`worker` with extraction off names the setting as it was set: the variable, or the
    file's key (it always named the file's key)."""
    if from_file:
        raw = yaml.safe_load(config.read_text(encoding="utf-8"))
        raw["callback_settings"]["memory"]["Extraction"] = {"enabled": False}
        config.write_text(yaml.safe_dump(raw), encoding="utf-8")
        source = "callback_settings.memory.Extraction.enabled"
    else:
        monkeypatch.setenv("LITELLM_MEMORY_EXTRACTION__ENABLED", "false")
        source = "(LITELLM_MEMORY_EXTRACTION__ENABLED)"
    line = one_error_line(invoke("worker", "--once", "--config", str(config)))
    assert "extraction is off" in line and source in line


# -- usage errors ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["export"], "error: Missing option '--user'; see litellm-memory export --help"),
        (["frob"], "error: No such command 'frob'; see litellm-memory --help"),
        (["memories", "frob"], "error: No such command 'frob'; see litellm-memory memories --help"),
        (["import"], "error: Missing argument 'FILE'; see litellm-memory import --help"),
        (["--bogus"], "error: No such option: --bogus; see litellm-memory --help"),
        (
            ["bench", "recall", "x.json", "--k", "0"],
            "error: Invalid value for '--k': Input should be greater than or equal to 1; "
            "see litellm-memory bench recall --help",
        ),
    ],
)
def test_usage_errors_are_one_line(args: list[str], expected: str) -> None:
    """A missing option, an unknown command or option, a bad value: typer's boxed usage message
    (5 lines) is one error line naming the --help to read, exit code 2 (click's)."""
    assert one_error_line(invoke(*args)) == expected


def test_a_group_without_a_command_still_shows_its_help() -> None:
    """`litellm-memory bench` alone shows the group's help (not an error line)."""
    result = invoke("bench")
    assert "latency" in result.output and "error:" not in result.output


def test_an_error_message_with_line_breaks_is_printed_on_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """An exception's text with line breaks (a library's) still gives one error line."""
    from litellm_memory_hook.tools.cli_errors import fail

    exit_ = fail("while parsing a block\n  in line 3\nexpected <block end>")
    assert exit_.exit_code == 2
    expected = "error: while parsing a block in line 3 expected <block end>\n"
    assert capsys.readouterr().err == expected


# -- lone surrogates and times out of range; ports; the help of every usage error ----------------


def unreachable_redis(config: Path) -> Path:
    """``config`` pointed at a Redis that is not there: a test whose file is refused before
    Redis is touched passes, one that gets as far as Redis fails."""
    raw = yaml.safe_load(config.read_text(encoding="utf-8"))
    raw["callback_settings"]["memory"]["redis"] = {"url": "redis://127.0.0.1:1/0"}
    config.write_text(yaml.safe_dump(raw), encoding="utf-8")
    return config


def test_jsonl_lines_with_a_lone_surrogate_or_a_time_out_of_range_are_refused(
    config: Path, tmp_path: Path
) -> None:
    """The tester's lines: a JSON-escaped lone surrogate was "error: UnicodeEncodeError ... (run
    with --debug ...)" rc 1 (at the Redis write), ts NaN "error: ValueError: cannot convert
    float NaN to integer" rc 1, ts 1e30 and -5 were imported (a 31-digit time, -5000). Each is
    now a refused line, rc 2, before Redis is touched; so is an ISO date outside 1970..3000."""
    file = write_lines(
        tmp_path / "chat.jsonl",
        '{"role":"user","content":"a\\ud800b"}',
        '{"role":"user","content":"n","ts":NaN}',
        '{"role":"user","content":"big","ts":1e30}',
        '{"role":"user","content":"negative","ts":-5}',
        '{"role":"user","content":"old","ts":"0001-01-01T00:00:00"}',
        {"role": "user", "content": "fine", "ts": 1_700_000_000},
    )
    args = ("--format", "jsonl", "--user", "ana", "--config", str(unreachable_redis(config)))
    line = one_error_line(invoke("import", str(file), *args))
    assert line == (
        f"error: {file}: 5 lines cannot be imported: line 1: content holds a lone surrogate "
        "\\ud800 (a JSON escape that is no Unicode text); line 2: timestamp NaN is not a number; "
        "line 3: timestamp 1e+30 is outside 1970-01-01 to 3000-01-01 UTC; and 2 more; fix or "
        "remove them (nothing was imported)"
    )


def test_a_lone_surrogate_in_a_locomo_or_export_file_is_refused(
    config: Path, tmp_path: Path
) -> None:
    """The LoCoMo and export readers let a lone surrogate through to the Redis write too (an
    unexpected UnicodeEncodeError, rc 1): the turn, or the export's place, is named, rc 2."""
    config = unreachable_redis(config)
    locomo = write_locomo(
        tmp_path / "locomo.json",
        {"speaker": "Ana", "dia_id": "D1:1", "text": "Hi Bo."},
        {"speaker": "Bo", "dia_id": "D1:2", "text": "caf\ud800"},
    )
    args = (*LOCOMO_ARGS, "--config", str(config))
    line = one_error_line(invoke("import", str(locomo), *args))
    assert line == (
        f"error: {locomo}: 1 line cannot be imported: D1:2: text holds a lone surrogate \\ud800 "
        "(a JSON escape that is no Unicode text); fix or remove it (nothing was imported)"
    )
    export = tmp_path / "alice.json"
    document = {
        "format": "litellm-memory-export",
        "version": 1,
        "exported_ms": 1_700_000_000_000,
        "key_prefix": "mem",
        "tenant": "master",
        "user": "alice",
        "memory_sets": [
            {"scope": "ns:demo", "version": 1, "pinned": [{"id": "1-a", "text": "x\ud800"}]}
        ],
    }
    export.write_text(json.dumps(document), encoding="utf-8")
    line = one_error_line(invoke("import", str(export), "--config", str(config)))
    assert line == (
        f"error: {export}: bad export at memory_sets.0.pinned.0.text: holds a lone surrogate "
        "\\ud800 (a JSON escape that is no Unicode text)"
    )


def test_an_error_message_with_a_lone_surrogate_is_printable(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A surrogate in a message (a sample id or user id read from a file or argv) would make
    the error line itself fail on a UTF-8 terminal: it is shown as its escape."""
    from litellm_memory_hook.tools.cli_errors import fail

    fail("no sample 'x\ud800'")
    assert capsys.readouterr().err == "error: no sample 'x\\ud800'\n"


@pytest.mark.parametrize("command", ["doctor", "serve"])
def test_the_same_port_for_proxy_and_stand_in_is_a_usage_error(
    command: str, config: Path, tmp_path: Path
) -> None:
    """doctor reported both free (rc 0); serve started the stand-in and printed the proxy's
    traceback (~100 lines), then "the proxy exited with code 3"."""
    args = ("--port", "7490", "--standin-port", "7490", "--config", str(config))
    line = one_error_line(invoke(command, *args, "--data-dir", str(tmp_path / "data")))
    assert line == (
        "error: --port and --standin-port are both 7490: the proxy and the stand-in model need a "
        f"port each (--standin-port 0: no stand-in); see litellm-memory {command} --help"
    )
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["doctor", "--port", "99999"], "'--port': Input should be less than or equal to 65535"),
        (
            ["doctor", "--standin-port", "-1"],
            "'--standin-port': Input should be greater than or equal to 0",
        ),
        (["serve", "--port", "65536"], "'--port': Input should be less than or equal to 65535"),
        (
            ["serve", "--standin-port", "70000"],
            "'--standin-port': Input should be less than or equal to 65535",
        ),
        (["serve", "--port", "0"], "'--port': Input should be greater than or equal to 1"),
        (["standin", "--port", "-4"], "'--port': Input should be greater than or equal to 1"),
    ],
)
def test_a_port_outside_its_range_is_a_usage_error(
    args: list[str], expected: str, tmp_path: Path
) -> None:
    """doctor --port 99999 was "error: OverflowError: bind(): port must be 0-65535." rc 1 (and
    serve would start with it): the option is checked, rc 2 with the --help to read."""
    line = one_error_line(
        invoke(*args, *(["--data-dir", str(tmp_path)] if args[0] != "standin" else []))
    )
    assert line == f"error: Invalid value for {expected}; see litellm-memory {args[0]} --help"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["export", "--user"], "Option '--user' requires an argument; see litellm-memory export"),
        (["export", "-o"], "Option '-o' requires an argument; see litellm-memory export"),
        (
            ["bench", "latency", "--runs"],
            "Option '--runs' requires an argument; see litellm-memory bench latency",
        ),
        (
            ["memories", "list", "--user"],
            "Option '--user' requires an argument; see litellm-memory memories list",
        ),
    ],
)  # fmt: skip
def test_an_option_without_its_value_names_the_help(args: list[str], expected: str) -> None:
    """`export --user` was "error: Option '--user' requires an argument" without the help to
    read (click's parser raises it without the command's context), unlike other usage errors."""
    assert one_error_line(invoke(*args)) == f"error: {expected} --help"
