"""The benchmarks run from a clone (issue 29 item 6): their data in the repository (LoCoMo by one
command, `bench fetch-locomo`), the embedded Redis of a running `serve` when no Redis URL is
set, `--sample-id FILE:ID`, tables never cut when piped, `--json -` for machines."""

from __future__ import annotations

import http.server
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from rich.table import Table
from typer.testing import CliRunner

from benchmarks import options as bench_options
from benchmarks.options import (
    FETCH_COMMAND,
    LOCOMO_FILE,
    MULTILING_DEV,
    bench_redis,
    human_console,
    pick_samples,
)
from litellm_memory_hook.errors import DatasetError
from litellm_memory_hook.store.embedded import ServeLock, start_embedded
from litellm_memory_hook.tools import cli
from litellm_memory_hook.tools.cli_common import print_table
from litellm_memory_hook.tools.histories import list_locomo_samples
from litellm_memory_hook.tools.processes import ServeRecord
from tests.support.paths import REPO
from tests.support.redis_url import real_redis_url

REDIS_VARS = ("REDIS_URL", "LITELLM_MEMORY_REDIS__URL", "LITELLM_MEMORY_REDIS_URL")


@pytest.fixture
def no_redis_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No Redis URL in the environment (a new user's shell)."""
    for name in REDIS_VARS:
        monkeypatch.delenv(name, raising=False)


def _run(*args: str) -> object:
    return CliRunner().invoke(cli.app, list(args), env={"COLUMNS": "80"})


# -- data --------------------------------------------------------------------------------------


def test_the_multilingual_set_is_in_the_repository_and_locomo_is_not() -> None:
    assert MULTILING_DEV == REPO / "benchmarks" / "data" / "multiling" / "multiling-dev.json"
    assert list_locomo_samples(MULTILING_DEV) == ["ml-1", "ml-3"]
    assert LOCOMO_FILE == REPO / "benchmarks" / "data" / "locomo" / "locomo10.json"
    ignored = (REPO / ".gitignore").read_text(encoding="utf-8").splitlines()
    assert "benchmarks/data/locomo/*.json" in ignored
    notes = (LOCOMO_FILE.parent / "README.md").read_text(encoding="utf-8")
    assert "CC BY-NC 4.0" in notes and FETCH_COMMAND in notes and "Maharana" in notes


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """An HTTP server on loopback serving ``tmp_path/www``; yields its URL and the folder."""
    www = tmp_path / "www"
    www.mkdir()

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, directory=str(www), **kwargs)  # type: ignore[arg-type]

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", www
    finally:
        server.shutdown()
        server.server_close()


def test_fetch_locomo_downloads_checks_and_names_the_licence(
    served: tuple[str, Path], tmp_path: Path
) -> None:
    """The one-line download: written only once every sample reads; the licence is printed; a
    second run keeps the file; what is not LoCoMo is refused and nothing is written."""
    url, www = served
    (www / "locomo10.json").write_bytes(MULTILING_DEV.read_bytes())  # LoCoMo's format
    (www / "page.json").write_text('{"not": "locomo"}', encoding="utf-8")
    target = tmp_path / "data" / "locomo" / "locomo10.json"

    first = _run("bench", "fetch-locomo", "--url", f"{url}/locomo10.json", "--to", str(target))
    assert first.exit_code == 0, first.output
    assert target.read_bytes() == MULTILING_DEV.read_bytes()
    assert "downloaded; 2 samples (ml-1, ml-3), 49 questions" in first.output
    assert "CC BY-NC 4.0" in first.output and "non-commercial" in first.output

    again = _run("bench", "fetch-locomo", "--url", f"{url}/page.json", "--to", str(target))
    assert again.exit_code == 0 and "already there" in again.output, again.output

    other = tmp_path / "other.json"
    refused = _run("bench", "fetch-locomo", "--url", f"{url}/page.json", "--to", str(other))
    assert refused.exit_code == 2 and "is not LoCoMo's QA file" in refused.output
    missing = _run("bench", "fetch-locomo", "--url", f"{url}/none.json", "--to", str(other))
    assert missing.exit_code == 2 and "cannot download" in missing.output
    assert not other.exists() and not other.with_name("other.json.part").exists()


def test_without_locomo_the_one_sample_benchmarks_use_the_repository_set(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(bench_options, "LOCOMO_FILE", tmp_path / "absent.json")
    assert bench_options.one_sample(None, None) == (MULTILING_DEV, "ml-1")
    assert bench_options.one_sample(None, "ml-3") == (MULTILING_DEV, "ml-3")
    assert bench_options.one_sample(None, "multiling-dev.json:ml-3") == (MULTILING_DEV, "ml-3")
    assert bench_options.one_sample(None, None, need_locomo=True)[0] == tmp_path / "absent.json"
    with pytest.raises(DatasetError, match="names another file than --data"):
        bench_options.one_sample(tmp_path / "a.json", f"{MULTILING_DEV}:ml-1")


@pytest.mark.redis
def test_bench_latency_runs_from_a_clone_and_extraction_says_how_to_get_locomo(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(bench_options, "LOCOMO_FILE", tmp_path / "absent.json")
    monkeypatch.chdir(tmp_path)
    latency = _run(
        "bench", "latency", "--sizes", "10", "--runs", "2", "--no-naive",
        "--redis-url", real_redis_url(),
    )  # fmt: skip
    assert latency.exit_code == 0, latency.output
    assert "multiling-dev.json:ml-1" in latency.output
    extraction = _run("bench", "extraction", "--redis-url", real_redis_url())
    assert extraction.exit_code == 2
    assert f"no LoCoMo file at {tmp_path / 'absent.json'}" in extraction.output
    assert FETCH_COMMAND in extraction.output


# -- which samples -----------------------------------------------------------------------------


def test_sample_id_file_colon_id_picks_one_sample_of_one_file(tmp_path: Path) -> None:
    other = tmp_path / "other.json"
    other.write_bytes(MULTILING_DEV.read_bytes())
    both = [MULTILING_DEV, other]
    assert pick_samples(both, []) == [(MULTILING_DEV, []), (other, [])]
    assert pick_samples(both, ["ml-1"]) == [(MULTILING_DEV, ["ml-1"]), (other, ["ml-1"])]
    assert pick_samples(both, [f"{other}:ml-3"]) == [(MULTILING_DEV, []), (other, ["ml-3"])]
    # by name or stem; a file named only in FILE:ID is run, the defaults are not
    assert pick_samples(both, ["other:ml-3", "multiling-dev.json:ml-1"]) == [
        (MULTILING_DEV, ["ml-1"]),
        (other, ["ml-3"]),
    ]
    assert pick_samples([], [f"{other}:ml-1"], [MULTILING_DEV]) == [(other, ["ml-1"])]
    assert pick_samples([], ["multiling-dev:ml-3"], []) == [(MULTILING_DEV, ["ml-3"])]
    assert pick_samples([], [], [MULTILING_DEV]) == [(MULTILING_DEV, [])]
    with pytest.raises(DatasetError, match=r"no file missing\.json"):
        pick_samples([], ["missing.json:ml-1"])


@pytest.mark.redis
def test_bench_recall_runs_the_one_sample_named_and_json_dash_is_the_report_alone(
    tmp_path: Path,
) -> None:
    """`--sample-id multiling-dev.json:ml-3 --json -`: stdout is the report of ml-3 alone (its
    24 questions), the table is on stderr."""
    result = CliRunner().invoke(
        cli.app,
        [
            "bench", "recall", "--no-curve", "--sample-id", "multiling-dev.json:ml-3",
            "--redis-url", real_redis_url(), "--json", "-",
        ],
        env={"COLUMNS": "80"},
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["samples"] == ["ml-3"] and len(report["questions"]) == 24
    assert report["source"] == str(MULTILING_DEV)
    assert "evidence recall/cover" in result.stderr and "24 questions" in result.stderr
    assert not (tmp_path / "-").exists()


# -- tables when piped ---------------------------------------------------------------------------


def test_a_piped_table_is_printed_whole_at_any_columns(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    table = Table(title="wide")
    headers = [f"column number {n} with a long header" for n in range(8)]
    for header in headers:
        table.add_column(header)
    table.add_row(*[f"value {n} " * 4 for n in range(8)])
    out = human_console(None)
    print_table(table, out)
    printed = capsys.readouterr().out
    lines = printed.splitlines()
    assert any(all(header in line for header in headers) for line in lines), printed
    assert any(all(f"value {n} " * 3 in line for n in range(8)) for line in lines), printed
    assert "…" not in printed


def test_a_piped_long_line_is_not_wrapped(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    line = "x " * 100
    human_console(None).print(line)
    assert capsys.readouterr().out == line + "\n"


# -- which Redis ----------------------------------------------------------------------------------


def test_bench_redis_order(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, no_redis_env: None
) -> None:
    assert bench_redis("redis://x:1/0", tmp_path).source == "--redis-url"
    default = bench_redis(None, tmp_path)
    assert default.url == "redis://127.0.0.1:6379/0" and default.source.startswith("default")
    monkeypatch.setenv("REDIS_URL", "redis://elsewhere:6380/2")
    assert bench_redis(None, tmp_path) == bench_options.BenchRedis(
        "redis://elsewhere:6380/2", "REDIS_URL"
    )


@pytest.mark.redis
def test_benchmarks_use_a_running_serves_embedded_redis(tmp_path: Path, no_redis_env: None) -> None:
    """A serve holds the data folder, its record written and its Redis up: with no Redis URL,
    `bench recall --data-dir` runs on that Redis (and says so) and deletes its keys there."""
    folder = tmp_path / "serve-data"
    lock = ServeLock.acquire(folder)
    embedded = start_embedded(folder, owner=True)
    try:
        ServeRecord(os.getpid(), "127.0.0.1", 1, 0, str(tmp_path / "config.yaml")).write(folder)
        chosen = bench_redis(None, folder)
        assert chosen.url == f"unix://{embedded.socket}"
        assert chosen.source == f"embedded Redis of serve pid {os.getpid()}"
        result = CliRunner().invoke(
            cli.app,
            ["bench", "recall", "--no-curve", "--sample-id", "ml-1", "--data-dir", str(folder)],
            env={"COLUMNS": "80"},
        )
        assert result.exit_code == 0, result.output
        assert f"redis: unix://{embedded.socket} (embedded Redis of serve pid" in result.output
        assert "25 questions" in result.output
        client = redis.Redis(unix_socket_path=str(embedded.socket))
        assert not list(client.scan_iter(match="membench*"))
        client.close()
    finally:
        embedded.stop()
        lock.release()


def test_bench_without_the_benchmarks_says_where_they_run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """An installed wheel has no benchmarks package: every `bench` command, its help included,
    says in one line that they run from a clone, exit code 2."""
    from litellm_memory_hook.tools import cli_bench

    monkeypatch.setattr(cli_bench, "_clones", lambda: [tmp_path / "benchmarks"])
    for args in (["bench"], ["bench", "--help"], ["bench", "latency", "--sizes", "10"]):
        result = CliRunner().invoke(cli.app, args, env={"COLUMNS": "80"})
        assert result.exit_code == 2, result.output
        assert result.output.splitlines() == [f"error: {cli_bench.NOT_IN_A_CLONE}"]
    listed = CliRunner().invoke(cli.app, ["--help"], env={"COLUMNS": "80"})
    assert listed.exit_code == 0 and cli_bench.BENCH_HELP in listed.output
