"""Users and conversations are listable and searchable: the memory API (SCAN, per tenant, paged)
on a real Redis and the CLI (`users`, `conversations`, a mistyped `--user`). The HTTP route
through a real proxy: tests/e2e/test_users_list.py."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import pytest
import redis.asyncio as aioredis
import yaml
from typer.testing import CliRunner

from litellm_memory_hook.memory_api import MemoryAPI, MemoryInputError, MemoryNotFoundError
from litellm_memory_hook.settings import MemorySettings
from litellm_memory_hook.store.keys import UserKeys
from litellm_memory_hook.tools import cli
from litellm_memory_hook.tools.cli_memory import register
from tests.support import harness

pytestmark = pytest.mark.redis

register(cli.app)


@pytest.fixture
def config(tmp_path: Path, key_prefix: str) -> Path:
    raw = yaml.safe_load((harness.REPO / "config.yaml").read_text(encoding="utf-8"))
    raw["callback_settings"]["memory"].get("storage", {}).pop("key_prefix", None)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    return path


def run(config: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli.app, [*args, "--config", str(config)])
    return result.exit_code, result.output


def _import(config: Path, tmp_path: Path, user: str, conversation: str, *extra: str) -> None:
    history = tmp_path / f"{uuid.uuid4().hex}.jsonl"
    lines = [{"role": "user", "content": f"Hello from {conversation}."}]
    lines.append({"role": "assistant", "content": "Hi."})
    history.write_text("".join(json.dumps(m) + "\n" for m in lines), encoding="utf-8")
    args = ["import", str(history), "--user", user, "--conversation", conversation, *extra]
    code, out = run(config, *args)
    assert code == 0, out


def test_cli_lists_users_and_conversations_per_tenant(config: Path, tmp_path: Path) -> None:
    _import(config, tmp_path, "bob", "b1")
    _import(config, tmp_path, "alice", "trip")
    time.sleep(0.01)
    _import(config, tmp_path, "alice", "recipes")
    _import(config, tmp_path, "Zoë Müller", "z1")  # a hashed key form: shown as sent
    _import(config, tmp_path, "carol", "c1", "--tenant", "team-x")

    code, out = run(config, "users", "--json")
    assert code == 0, out
    data = json.loads(out)
    assert [u["user"] for u in data["items"]] == ["alice", "bob", "Zoë Müller"]
    assert [u["conversations"] for u in data["items"]] == [2, 1, 1]
    assert data["items"][2]["key"].startswith("h-")
    assert (data["total"], data["offset"], data["next_offset"]) == (3, 0, None)

    code, out = run(config, "users", "--search", "MÜL", "--json")
    assert [u["user"] for u in json.loads(out)["items"]] == ["Zoë Müller"]
    code, out = run(config, "users", "--tenant", "team-x", "--json")
    assert [u["user"] for u in json.loads(out)["items"]] == ["carol"]

    code, out = run(config, "users", "--limit", "2")
    assert code == 0, out
    assert "alice" in out and "bob" in out and "Zoë" not in out
    assert "3 users; shown: 1-2 (next page: --offset 2)" in out
    code, out = run(config, "users", "--limit", "2", "--offset", "2", "--json")
    assert [u["user"] for u in json.loads(out)["items"]] == ["Zoë Müller"]

    code, out = run(config, "conversations", "--user", "alice", "--json")
    assert code == 0, out
    listed = json.loads(out)["items"]
    assert [(c["id"], c["turns"], c["alias"]) for c in listed] == [
        ("recipes", 2, "demo"),
        ("trip", 2, "demo"),
    ]
    code, out = run(config, "conversations", "--user", "alice", "--search", "TRI")
    assert code == 0 and "trip" in out and "recipes" not in out, out


def test_mistyped_user_says_no_such_user(config: Path, tmp_path: Path) -> None:
    _import(config, tmp_path, "alice", "trip")
    expected = "error: no such user 'alicee' in tenant 'master' (`litellm-memory users` lists them)"
    code, out = run(config, "conversations", "--user", "alicee")
    assert (code, out.strip()) == (1, expected)
    code, out = run(config, "memories", "list", "--user", "alicee")
    assert (code, out.strip()) == (1, expected)
    code, out = run(config, "memories", "list", "--user", "alice")
    assert code == 0 and "0 pinned, 0 extracted" in out, out
    # pinning for a new user is how a user starts: not refused
    code, out = run(config, "memories", "pin", "I like tea.", "--user", "newcomer")
    assert code == 0, out
    code, out = run(config, "memories", "list", "--user", "newcomer")
    assert code == 0 and "1 pinned" in out, out
    code, out = run(config, "show", "--user", "alicee")
    assert code == 0 and "no such user 'alicee' in tenant 'master'" in out, out


async def test_api_pages_walk_every_user_once(real_redis: aioredis.Redis, prefix: str) -> None:
    """130 users by SCAN: pages of 50 hold each once, in order; other tenants and other
    prefixes are not listed; a bad tenant is refused."""
    names = sorted(f"user{n:03d}" for n in range(130))
    for name in names:
        await real_redis.sadd(UserKeys.for_ids(prefix, "master", name).index, "ns:demo")
    await real_redis.sadd(UserKeys.for_ids(prefix, "team-y", "other").index, "ns:demo")
    await real_redis.sadd(UserKeys.for_ids(prefix + "x", "master", "elsewhere").index, "ns:demo")
    api = MemoryAPI(real_redis, MemorySettings(key_prefix=prefix))
    seen: list[str] = []
    offset: int | None = 0
    sizes = []
    while offset is not None:
        page = await api.users("master", offset=offset, limit=50)
        assert page.total == 130
        seen += [u.user for u in page.items]
        sizes.append(len(page.items))
        offset = page.next_offset
    assert seen == names and sizes == [50, 50, 30]
    assert all(u.memory_sets == 1 for u in (await api.users("master", limit=3)).items)
    page = await api.users("master", search="user12", limit=50)
    assert [u.user for u in page.items] == [f"user{n}" for n in range(120, 130)]
    assert [u.user for u in (await api.users("team-y")).items] == ["other"]
    with pytest.raises(MemoryInputError):
        await api.users("nobody")
    with pytest.raises(MemoryNotFoundError, match="no such user 'ghost' in tenant 'master'"):
        await api.conversations("master", "ghost")
