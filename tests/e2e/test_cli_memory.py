"""`litellm-memory memories list|pin|edit|delete|flush`, `stats` and `worker` through typer's
CliRunner on a real Redis (REDIS_URL), with a test key prefix (LITELLM_MEMORY_STORAGE__KEY_PREFIX)
and a copy of the checkout's config.yaml; the worker also against the package's stand-in model."""

from __future__ import annotations

import json
import re
import signal
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis
import yaml
from typer.testing import CliRunner

from litellm_memory_hook.tools import cli
from litellm_memory_hook.tools.cli_memory import register
from tests.support.harness import REPO, free_port, start_standin, start_worker, stop
from tests.support.redis_url import real_redis_url

pytestmark = pytest.mark.redis

REDIS_URL = real_redis_url()
ID = re.compile(r"\b\d{13}-[0-9a-f]{6}\b")
register(cli.app)


@pytest.fixture
def config(tmp_path: Path, key_prefix: str) -> Path:
    """The checkout's config.yaml without its own key prefix, and with an alias without memory
    (``plain``)."""
    raw = yaml.safe_load((REPO / "config.yaml").read_text(encoding="utf-8"))
    memory = raw["callback_settings"]["memory"]
    memory.get("storage", {}).pop("key_prefix", None)
    memory.pop("redis", None)
    raw["model_list"].append({"model_name": "plain", "litellm_params": {"model": "openai/x"}})
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    return path


@pytest.fixture
def sync_redis() -> Iterator[redis.Redis]:
    """A synchronous client of the test Redis."""
    client = redis.Redis.from_url(REDIS_URL)
    yield client
    client.close()


def run(config: Path, *args: str) -> tuple[int, str]:
    """Run `litellm-memory ARGS --config CONFIG`; returns the exit code and the output."""
    result = CliRunner().invoke(cli.app, [*args, "--config", str(config)])
    return result.exit_code, result.output


def pin(config: Path, text: str, *extra: str) -> str:
    """Pin TEXT for alice; returns the new id."""
    code, out = run(config, "memories", "pin", text, "--user", "alice", *extra)
    assert code == 0, out
    found = ID.search(out)
    assert found, out
    return found.group(0)


def listing(config: Path, *extra: str) -> dict[str, object]:
    """`memories list --json` for alice."""
    code, out = run(config, "memories", "list", "--user", "alice", "--json", *extra)
    assert code == 0, out
    data: dict[str, object] = json.loads(out)
    return data


def test_pin_list_edit_delete(config: Path) -> None:
    """pin prints the new id; list shows it (table and JSON, text exact); edit replaces the
    text; delete removes it."""
    text = "  Mi cumpleaños es el 3 de marzo 🎂 "
    item_id = pin(config, text)
    code, out = run(config, "memories", "list", "--user", "alice")
    assert code == 0, out
    assert item_id in out and "pinned" in out and "1 pinned, 0 extracted" in out
    data = listing(config)
    assert data["pinned"] == [
        {"id": item_id, "text": text.strip(), "created_ms": int(item_id.split("-")[0])}
    ]
    code, out = run(
        config, "memories", "edit", item_id, "मेरी बहन का नाम सीमा है।", "--user", "alice"
    )
    assert code == 0 and f"edited {item_id}" in out, out
    pinned = listing(config)["pinned"]
    assert isinstance(pinned, list) and pinned[0]["text"] == "मेरी बहन का नाम सीमा है।"
    code, out = run(config, "memories", "delete", item_id, "--user", "alice")
    assert code == 0 and "deleted pinned memory" in out, out
    assert listing(config)["pinned"] == []


def test_delete_extracted_memory(config: Path, key_prefix: str, sync_redis: redis.Redis) -> None:
    """delete falls back to the extracted memories (leaving a tombstone); an id that is
    neither is one error line, exit 2."""
    from litellm_memory_hook.memory_api import resolve_target
    from litellm_memory_hook.tools.proxyconfig import ProxyConfig

    loaded = ProxyConfig.load(config)
    assert loaded.settings.storage.key_prefix == key_prefix
    target = resolve_target(
        loaded.settings,
        lambda name: loaded.alias(name),
        tenant="master",
        user="alice",
        model="demo",
    )
    sync_redis.hset(target.memory.memories, "1718000000000-abcdef", "User: My cat is Miso.")
    code, out = run(config, "memories", "list", "--user", "alice")
    assert "extracted" in out and "1718000000000-abcdef" in out, out
    code, out = run(config, "memories", "delete", "1718000000000-abcdef", "--user", "alice")
    assert code == 0 and "deleted extracted memory" in out, out
    assert sync_redis.hlen(target.memory.tombs) == 1
    code, out = run(config, "memories", "delete", "1718000000000-abcdef", "--user", "alice")
    assert code == 2
    assert out.strip().splitlines() == [
        "error: no memory '1718000000000-abcdef' (pinned or extracted)"
    ]


def test_tenants_and_conversations_are_separate(config: Path) -> None:
    """A memory pinned for tenant master is not listed for another tenant: there the user does
    not exist (one line, exit 1, not an empty table)."""
    pin(config, "secret")
    code, out = run(config, "memories", "list", "--user", "alice", "--tenant", "team-b")
    assert (code, out.strip()) == (
        1,
        "error: no such user 'alice' in tenant 'team-b' (`litellm-memory users` lists them)",
    )
    assert [p["text"] for p in listing(config)["pinned"]] == ["secret"]  # type: ignore[index]


def test_empty_text_is_one_error_line(config: Path) -> None:
    """An empty or over-limit text, an unknown alias and an alias without memory each exit 2
    with one 'error:' line and no traceback."""
    cases = [
        ("memories", "pin", "", "--user", "alice"),
        ("memories", "pin", "x" * 501, "--user", "alice"),
        ("memories", "list", "--user", "alice", "--model", "nope"),
        ("memories", "list", "--user", "alice", "--model", "plain"),
        ("memories", "list", "--user", "  "),
    ]
    expected = ["'text' is empty", "the limit is 500", "'nope'", "'plain'", "'user'"]
    for args, needle in zip(cases, expected, strict=True):
        code, out = run(config, *args)
        lines = out.strip().splitlines()
        assert code == 2, out
        assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], out
        assert "Traceback" not in out


def test_bench_latency_without_its_data_says_what_to_pass(tmp_path: Path) -> None:
    """bench latency checks --sizes first, then names the LoCoMo file it needs: one line each,
    exit 2, before touching Redis."""
    for args, needle in (
        (["--sizes", "100,abc"], "bad --sizes"),
        (["--data", str(tmp_path / "none.json")], "no LoCoMo file at"),
    ):
        result = CliRunner().invoke(cli.app, ["bench", "latency", *args])
        lines = result.output.strip().splitlines()
        assert result.exit_code == 2, result.output
        assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0]


def test_import_names_every_format_it_reads(config: Path, tmp_path: Path) -> None:
    """An unknown --format is one error line listing locomo, jsonl and export."""
    history = tmp_path / "chat.csv"
    history.write_text("role,content\n", encoding="utf-8")
    code, out = run(config, "import", str(history), "--format", "csv", "--user", "alice")
    lines = out.strip().splitlines()
    assert code == 2 and len(lines) == 1, out
    assert lines[0] == "error: unknown format 'csv' (locomo, jsonl, export)"


def test_bad_config_is_one_error_line(tmp_path: Path) -> None:
    """A missing config.yaml is one error line, exit 2."""
    code, out = run(tmp_path / "missing.yaml", "stats")
    assert code == 2
    assert out.startswith("error: cannot read") and "Traceback" not in out


def test_flush_and_stats(
    config: Path, tmp_path: Path, key_prefix: str, sync_redis: redis.Redis
) -> None:
    """flush of a conversation with no stored turns is an error and schedules nothing (a
    fresh-user test found a mistyped id reported "due"); of a stored one it puts the
    conversation in the due set; stats shows the counters and the due count, as a table and
    as JSON."""
    code, out = run(config, "memories", "flush", "--user", "alice", "--conversation", "chat-7")
    assert code == 2, out
    assert "no conversation 'chat-7' for user 'alice': nothing to extract" in out, out
    assert sync_redis.zcard(f"{key_prefix}:due") == 0
    history = tmp_path / "chat.jsonl"
    history.write_text(json.dumps({"role": "user", "content": "Hello."}) + "\n", encoding="utf-8")
    code, out = run(config, "import", str(history), "--user", "alice", "--conversation", "chat-7")
    assert code == 0, out
    sync_redis.delete(f"{key_prefix}:due")  # the import scheduled it after the quiet time
    code, out = run(config, "memories", "flush", "--user", "alice", "--conversation", "chat-7")
    assert code == 0 and "is due for extraction" in out, out
    due = sync_redis.zrange(f"{key_prefix}:due", 0, -1)
    assert due == [b"master:alice:chat-7"]
    sync_redis.hincrby(f"{key_prefix}:stats", "jobs_run", 3)
    code, out = run(config, "stats")
    assert code == 0, out
    assert re.search(r"jobs_run\s*│\s*3", out), out
    assert re.search(r"due \(conversations waiting\)\s*│\s*1", out), out
    code, out = run(config, "stats", "--json")
    assert code == 0, out
    data = json.loads(out)
    assert (data["counters"], data["due"]) == ({"jobs_run": 3}, 1), out
    assert (data["store"]["conversations"], data["store"]["users"]) == (1, 1), out
    assert data["store"]["keys"] >= 5, out  # the conversation's keys, the index, due, stats
    assert data["memory"]["used_memory"] > 0, out


def test_worker_once_extracts_with_the_standin(
    config: Path, tmp_path: Path, key_prefix: str, sync_redis: redis.Redis
) -> None:
    """worker --once runs the due job against an OpenAI-compatible model (the stand-in), prints
    the outcome, and `memories list` then shows the extracted memory; with nothing due it says
    so."""
    port = free_port()
    standin = start_standin(port, tmp_path / "standin.log")
    try:
        raw = yaml.safe_load(config.read_text(encoding="utf-8"))
        raw["callback_settings"]["memory"]["extraction"] = {
            "base_url": f"http://127.0.0.1:{port}/v1"
        }
        config.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
        history = tmp_path / "chat.jsonl"
        lines = [
            {"role": "user", "content": "My cat is called Miso."},
            {"role": "assistant", "content": "Noted: Miso."},
        ]
        history.write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
        # no --format: a .jsonl file is read as jsonl (found by a fresh-user test)
        code, out = run(config, "import", str(history), "--user", "alice")
        assert code == 0, out
        run(config, "memories", "flush", "--user", "alice")
        code, out = run(config, "worker", "--once")
        assert code == 0, out
        assert "committed" in out, out
        memories = listing(config)["memories"]
        assert isinstance(memories, list)
        assert any("Miso" in m["text"] for m in memories), memories
        code, out = run(config, "stats", "--json")
        assert json.loads(out)["counters"]["jobs_committed"] == 1
        code, out = run(config, "worker", "--once")
        assert code == 0 and "nothing due" in out, out
        # a job whose model call fails (503s, more than the client retries): exit 1, so cron
        # and scripts see it
        httpx.post(
            f"http://127.0.0.1:{port}/_standin/extraction_replies",
            json=[{"content": "down", "status": 503}] * 6,
            timeout=10,
        ).raise_for_status()
        more = tmp_path / "more.jsonl"
        more.write_text(json.dumps({"role": "user", "content": "I moved to Pune."}) + "\n")
        assert run(config, "import", str(more), "--user", "alice")[0] == 0
        run(config, "memories", "flush", "--user", "alice")
        code, out = run(config, "worker", "--once")
        assert code == 1 and "failed" in out, out
    finally:
        stop(standin)


def test_worker_stops_on_sigterm(config: Path, tmp_path: Path) -> None:
    """`worker` runs until SIGTERM, then stops after its current job and exits 0."""
    process, seen = start_worker(config, tmp_path)
    try:
        process.send_signal(signal.SIGTERM)
        rest, _ = process.communicate(timeout=30)
        assert process.returncode == 0, seen + rest
        assert "worker stopped" in rest
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_register_is_idempotent() -> None:
    """register() twice adds memories, stats and worker once."""
    register(cli.app)
    names = [c.name for c in cli.app.registered_commands]
    assert names.count("stats") == 1 and names.count("worker") == 1
    assert [g.name for g in cli.app.registered_groups].count("memories") == 1


def test_edit_corrects_an_extracted_memory(
    config: Path, key_prefix: str, sync_redis: redis.Redis
) -> None:
    """`memories edit` of an extracted memory does what the inspector's Edit does: the new text
    is pinned, the extracted memory deleted with a tombstone (so it is not extracted again)."""
    from litellm_memory_hook.memory_api import resolve_target
    from litellm_memory_hook.tools.proxyconfig import ProxyConfig

    loaded = ProxyConfig.load(config)
    target = resolve_target(
        loaded.settings,
        lambda name: loaded.alias(name),
        tenant="master",
        user="alice",
        model="demo",
    )
    sync_redis.hset(target.memory.memories, "1718000000000-abcdef", "User: My cat is Miso.")
    code, out = run(
        config, "memories", "edit", "1718000000000-abcdef", "My cat is Mochi.", "--user", "alice"
    )
    assert code == 0, out
    assert "corrected extracted memory 1718000000000-abcdef" in out and "pinned as" in out, out
    data = listing(config)
    assert [p["text"] for p in data["pinned"]] == ["My cat is Mochi."]  # type: ignore[union-attr,index]
    assert data["memories"] == []
    assert sync_redis.hlen(target.memory.tombs) == 1


def test_declining_forget_prints_not_forgotten(config: Path, tmp_path: Path) -> None:
    """At a terminal, answering no to forget's prompt prints a plain "not forgotten" line (no
    red error:), exits 1 and keeps the user."""
    import os
    import subprocess
    import sys

    pin(config, "I like tea.")
    main, child = os.openpty()
    script = "from litellm_memory_hook.tools.cli import main; main()"
    process = subprocess.Popen(
        [sys.executable, "-c", script, "forget", "--user", "alice", "--config", str(config)],
        stdin=child,
        stdout=child,
        stderr=child,
        env={**os.environ, "NO_COLOR": "1", "TERM": "dumb"},
    )
    os.close(child)
    seen = b""
    while b"undone" not in seen:
        seen += os.read(main, 4096)
    os.write(main, b"n\n")
    assert process.wait(timeout=60) == 1
    try:
        while chunk := os.read(main, 4096):
            seen += chunk
    except OSError:
        pass
    os.close(main)
    text = seen.decode("utf-8", "replace")
    assert "not forgotten: user 'alice' of tenant 'master' is kept" in text, text
    assert "error" not in text, text
    assert [p["text"] for p in listing(config)["pinned"]] == ["I like tea."]  # type: ignore[union-attr,index]
