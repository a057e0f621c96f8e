"""What the CLI prints of text users wrote (memories, chat turns, user ids, file names) shows as
written: rich markup (``[bold]``, ``[/]``) and emoji codes (``:smile:``) in it are neither
interpreted nor crash a command (a new user's memory with ``[/]`` made `memories list` fail).
Also: a bench option whose 0 crashed the run is a usage error. Through typer's CliRunner on a
real Redis (REDIS_URL) with a test key prefix, as tests/e2e/test_cli_memory.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from litellm_memory_hook.tools import cli
from litellm_memory_hook.tools.cli_memory import register
from tests.support.harness import REPO
from tests.support.redis_url import real_redis_url

pytestmark = pytest.mark.redis

REDIS_URL = real_redis_url()
ID = re.compile(r"\b\d{13}-[0-9a-f]{6}\b")
#: a memory that is not valid rich markup (a closing tag with nothing to close), with tags and
#: an emoji code that would otherwise be rendered.
HOSTILE = "I love [bold]markup[/bold] and :smile: and [/]"
TURN = "my regex is [a-z]+ and [/] and [bold]x[/bold] :thumbs_up:"
register(cli.app)


@pytest.fixture(autouse=True)
def wide_console(monkeypatch: pytest.MonkeyPatch) -> None:
    """A wide console, so table cells and panel lines are not folded and the texts can be
    searched for whole."""
    monkeypatch.setenv("COLUMNS", "400")


@pytest.fixture
def config(tmp_path: Path, key_prefix: str) -> Path:
    """The checkout's config.yaml without its own key prefix or Redis URL."""
    raw = yaml.safe_load((REPO / "config.yaml").read_text(encoding="utf-8"))
    memory = raw["callback_settings"]["memory"]
    memory.get("storage", {}).pop("key_prefix", None)
    memory.pop("redis", None)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    return path


def run(config: Path, *args: str) -> tuple[int, str]:
    """Run `litellm-memory ARGS --config CONFIG`; returns the exit code and the output."""
    result = CliRunner().invoke(cli.app, [*args, "--config", str(config)])
    assert "Traceback" not in result.output, result.output
    return result.exit_code, result.output


def assert_verbatim(out: str, text: str) -> None:
    """TEXT is in OUT as written, its tags and emoji codes included."""
    assert text in out, out
    for piece in ("[bold]", "[/bold]", "[/]", ":smile:", ":thumbs_up:"):
        if piece in text:
            assert piece in out, out
    assert "😄" not in out and "👍" not in out and "🐱" not in out, out


@pytest.mark.parametrize("user", ["rich_u", ":cat:", "[red]x"])
def test_memory_with_markup_shows_as_written(config: Path, user: str) -> None:
    """A pinned memory holding markup and an emoji code, for a user id that is one too: pin
    names the user as written; `memories list` (table) and `show` exit 0 and print the text
    exactly as stored."""
    code, out = run(config, "memories", "pin", HOSTILE, "--user", user)
    assert code == 0, out
    assert f"for user {user!r} of tenant 'master'" in out, out
    item_id = ID.search(out)
    assert item_id, out
    code, out = run(config, "memories", "list", "--user", user)
    assert code == 0, out
    assert_verbatim(out, HOSTILE)
    assert item_id.group(0) in out and f"memories of user {user!r}" in out, out
    code, out = run(config, "show", "--user", user)
    assert code == 0, out
    assert_verbatim(out, f"- {HOSTILE}")
    code, out = run(config, "memories", "edit", item_id.group(0), TURN, "--user", user)
    assert code == 0 and f"for user {user!r}" in out, out
    code, out = run(config, "memories", "list", "--user", user)
    assert code == 0, out
    assert_verbatim(out, TURN)
    code, out = run(config, "memories", "delete", item_id.group(0), "--user", user)
    assert code == 0 and f"of user {user!r}" in out, out


def test_imported_turn_with_markup_shows_as_written(config: Path, tmp_path: Path) -> None:
    """A chat turn with markup and an emoji code, imported from a jsonl file, is printed by
    `show` as it was written."""
    history = tmp_path / "chat.jsonl"
    lines = [
        {"role": "user", "content": TURN},
        {"role": "assistant", "content": "Noted [red]ok[/red] :smile:"},
    ]
    history.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    code, out = run(config, "import", str(history), "--user", "ghost")
    assert code == 0 and "imported 2 turns" in out, out
    code, out = run(config, "show", "--user", "ghost")
    assert code == 0, out
    assert "conversation master:ghost:demo: 2 stored turns" in out, out
    assert_verbatim(out, f"user: {TURN}")
    code, out = run(config, "show", "--user", "ghost", "--message", "[/] :smile: [b]")
    assert code == 0, out
    assert_verbatim(out, "user: [/] :smile: [b]")


def test_status_lines_name_users_as_written(config: Path) -> None:
    """forget's and export's status lines, and an error line, keep markup and emoji codes in
    user ids, alias names and file names as written."""
    code, out = run(config, "forget", "--user", "[red]x:cat:", "--yes")
    assert code == 0, out
    assert "nothing stored for user '[red]x:cat:' of tenant 'master'" in out, out
    code, out = run(config, "memories", "pin", "hi", "--user", "[red]x:cat:")
    assert code == 0, out
    target = config.parent / "[bold]out[red] :smile:.json"
    code, out = run(config, "export", "--user", "[red]x:cat:", "--output", str(target))
    assert code == 0, out
    assert f"of user '[red]x:cat:' of tenant 'master' to {target}" in out, out
    code, out = run(config, "memories", "list", "--user", "alice", "--model", "[/]no:cat:")
    assert code == 2, out
    assert out.strip().splitlines() == ["error: model '[/]no:cat:' is not a memory-enabled alias"]


def test_doctor_table_shows_paths_as_written(tmp_path: Path, key_prefix: str) -> None:
    """doctor's table cells (here the config's path) are printed as written."""
    folder = tmp_path / "[red]conf :cat: [bold]"
    folder.mkdir()
    config = folder / "config.yaml"
    config.write_text("model_list: []\n", encoding="utf-8")
    result = CliRunner().invoke(cli.app, ["doctor", "--config", str(config), "--port", "1"])
    assert result.exit_code in (0, 1), result.output
    assert "Traceback" not in result.output, result.output
    assert str(config) in result.output, result.output


@pytest.mark.parametrize("runs", ["0", "-1"])
def test_bench_latency_runs_below_one_is_a_usage_error(runs: str) -> None:
    """--runs 0 (or less) crashed the run (no median of no timings): it is a usage error,
    exit 2, before anything runs."""
    args = ["bench", "latency", f"--runs={runs}", "--sizes=10", "--no-naive"]
    result = CliRunner().invoke(cli.app, args)
    assert result.exit_code == 2, result.output
    assert "Invalid value for '--runs'" in result.output, result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["latency", "--sizes=10,-5", "--runs=1", "--no-naive"], "bad --sizes"),
        (["recall", "x.json", "--ks=-1,4"], "bad --ks or --budgets"),
        (["recall", "x.json", "--budgets=-100"], "bad --ks or --budgets"),
    ],
)
def test_bench_negative_sizes_are_one_error_line(args: list[str], needle: str) -> None:
    """A negative history size, k or budget is one error line, exit 2 (they used to run and
    report nonsense rows)."""
    result = CliRunner().invoke(cli.app, ["bench", *args])
    lines = result.output.strip().splitlines()
    assert result.exit_code == 2, result.output
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0]


def test_help_paragraphs_wrap_at_the_terminal_not_at_the_source_lines() -> None:
    """A fresh user's finding: typer printed a docstring's line breaks as they were, so `serve
    --help` at 80 columns broke mid-sentence ("... are the same,\\n another\\n serve uses ...").
    Every command's paragraphs are one line each now; the terminal wraps them."""
    from typer.testing import CliRunner

    from litellm_memory_hook.tools.cli import app
    from litellm_memory_hook.tools.cli_errors import reflow

    assert reflow("Run it.\n\n    A long\n    paragraph.\n\n    - one\n    - two\n    ") == (
        "Run it.\n\nA long paragraph.\n\n- one\n- two"
    )
    result = CliRunner().invoke(app, ["serve", "--help"], env={"COLUMNS": "80"}, color=False)
    assert result.exit_code == 0
    lines = [line.strip() for line in result.output.splitlines()]
    assert "another" not in lines and "misspelt (it would" not in lines
    assert any(line.startswith("another serve uses") for line in lines), lines
