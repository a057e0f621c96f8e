"""E13 (../shared/cases/field-cases.md, third round): rotating an app's virtual key must not lose
every end user's memory. The tenant comes from the most stable identity LiteLLM gives the hook:
team, then the key's owner, then the key's alias, then the token; ``litellm-memory tenant move``
moves a tenant's keys to a new tenant id (SCAN, on a real Redis)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from litellm.proxy._types import UserAPIKeyAuth
from typer.testing import CliRunner

from litellm_memory_hook.proxy.identity import tenant_from_auth
from litellm_memory_hook.store.keys import due_key, is_tenant
from litellm_memory_hook.tools import cli
from litellm_memory_hook.tools.cli_memory import register
from tests.support import harness
from tests.support.redis_url import real_redis_url

register(cli.app)

CASES = [
    # (what the key carries, the tenant)
    ({"api_key": "sk-1", "team_id": "t1", "user_id": "u1", "key_alias": "app"}, "team-t1"),
    ({"api_key": "sk-1", "user_id": "u1", "key_alias": "app"}, "user-u1"),
    ({"api_key": "sk-1", "user_id": "default_user_id", "key_alias": "app"}, "alias-app"),
    ({"api_key": "sk-1", "key_alias": "app"}, "alias-app"),
    ({"api_key": "sk-1", "key_alias": "  "}, None),  # a blank alias: the token's hash
    ({"api_key": "litellm_proxy_master_key"}, "master"),
    ({}, None),  # no identity at all: no tenant, no memory
]


@pytest.mark.parametrize(("fields", "tenant"), CASES)
def test_tenant_is_the_most_stable_identity(fields: dict[str, Any], tenant: str | None) -> None:
    """Team, then owner, then alias, then the token; a caller with none has no tenant."""
    got = tenant_from_auth(UserAPIKeyAuth(**fields))
    if tenant is None and fields.get("api_key"):
        assert got is not None and got.startswith("key-") and is_tenant(got)
    else:
        assert got == tenant
    if got is not None:
        assert is_tenant(got)


def test_a_regenerated_key_with_only_an_alias_keeps_its_tenant() -> None:
    """E13: ``/key/regenerate`` gives the same key (its alias) a new token: same tenant. A key
    with no alias either is still the token's (the documented limit: move it once)."""
    before = UserAPIKeyAuth(api_key="sk-old-token", key_alias="support-bot")
    after = UserAPIKeyAuth(api_key="sk-new-token", key_alias="support-bot")
    assert before.token != after.token
    assert tenant_from_auth(before) == tenant_from_auth(after) == "alias-support-bot"
    bare = (UserAPIKeyAuth(api_key="sk-old-token"), UserAPIKeyAuth(api_key="sk-new-token"))
    assert tenant_from_auth(bare[0]) != tenant_from_auth(bare[1])


@settings(max_examples=60, deadline=None)
@given(
    alias=st.text(min_size=1, max_size=40).filter(lambda s: s.strip()),
    tokens=st.lists(st.text(min_size=1, max_size=30), min_size=2, max_size=2, unique=True),
    team=st.one_of(st.none(), st.text(min_size=1, max_size=12)),
)
def test_any_token_change_keeps_the_tenant(alias: str, tokens: list[str], team: str | None) -> None:
    """For any alias (any script, spaces, colons) and any two tokens, the tenant is the same
    and a valid tenant id; a team always wins over the alias."""
    tenants = {
        tenant_from_auth(UserAPIKeyAuth(api_key="sk-" + t, key_alias=alias, team_id=team))
        for t in tokens
    }
    assert len(tenants) == 1
    (tenant,) = tenants
    assert tenant == (f"team-{team}" if team else f"alias-{alias}")
    assert is_tenant(tenant)


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


def _import(config: Path, tmp_path: Path, tenant: str, user: str, conversation: str) -> None:
    history = tmp_path / f"{uuid.uuid4().hex}.jsonl"
    lines = [
        {"role": "user", "content": f"My cat is called Miso ({conversation})."},
        {"role": "assistant", "content": "A lovely name."},
    ]
    history.write_text("".join(json.dumps(m) + "\n" for m in lines), encoding="utf-8")
    args = ["import", str(history), "--user", user, "--conversation", conversation]
    code, out = run(config, *args, "--tenant", tenant)
    assert code == 0, out


@pytest.mark.redis
def test_tenant_move_moves_every_key_on_a_real_redis(
    config: Path, tmp_path: Path, key_prefix: str
) -> None:
    """E13: the memory of a key-hash tenant moves to the alias tenant: its users and
    conversations are listed there, its turns read back, the meta hash names the new tenant,
    the due set entries follow; nothing is left under the old id. Another tenant is untouched.
    Run again with a straggler whose new name is taken: kept, named, exit 1."""
    old, new = "key-" + "ab" * 12, "alias-support bot"  # the new id is hashed in key form
    _import(config, tmp_path, old, "alice", "trip")
    _import(config, tmp_path, old, "Zoë", "z1")
    _import(config, tmp_path, "team-other", "alice", "trip")
    client: Any = redis.Redis.from_url(real_redis_url(), decode_responses=True)
    try:
        client.zadd(due_key(key_prefix), {f"{old}:alice:trip": 5})
        before = sorted(client.scan_iter(match=f"{key_prefix}:{{{old}:*"))
        due_before = [m for m in client.zrange(due_key(key_prefix), 0, -1) if m.startswith(old)]
        assert before and due_before

        code, out = run(config, "tenant", "move", "--from", old, "--to", new)
        assert code == 0, out
        assert f"moved {len(before)} keys ({len(due_before)} due entries)" in out
        assert not list(client.scan_iter(match=f"{key_prefix}:{{{old}:*"))
        code, out = run(config, "users", "--tenant", new, "--json")
        assert code == 0, out
        assert [u["user"] for u in json.loads(out)["items"]] == ["alice", "Zoë"]
        code, out = run(config, "export", "--user", "alice", "--tenant", new)
        assert code == 0 and "My cat is called Miso (trip)." in out, out
        metas = [k for k in client.scan_iter(match=f"{key_prefix}:*:meta") if ":c:" in k]
        moved = [k for k in metas if not k.startswith(f"{key_prefix}:{{team-other:")]
        assert moved and all(client.hget(k, "tenant") == new for k in moved)
        due = client.zrange(due_key(key_prefix), 0, -1)
        assert not [m for m in due if m.startswith(old + ":")]
        assert [m for m in due if m.endswith(":alice:trip") and m.startswith("h-")]
        code, out = run(config, "users", "--tenant", "team-other", "--json")
        assert [u["user"] for u in json.loads(out)["items"]] == ["alice"]

        _import(config, tmp_path, old, "alice", "trip")  # a straggler under the old tenant
        code, out = run(config, "tenant", "move", "--from", old, "--to", new)
        assert code == 1, out
        assert "kept" in out
    finally:
        client.close()


def test_tenant_move_refuses_a_non_tenant(config: Path) -> None:
    code, out = run(config, "tenant", "move", "--from", "master", "--to", "alice")
    assert code == 2 and "not a tenant id" in out
