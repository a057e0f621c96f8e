"""The HTTP memory API (``/memory/v1``) in-process on a real Redis, with LiteLLM's key check
replaced by two fake tenants. LiteLLM's real key check and mounting on its real proxy app:
tests/e2e/test_routes.py."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis
from fastapi import FastAPI, HTTPException, Request

from litellm_memory_hook.core.indexing import indexed_chain
from litellm_memory_hook.core.models import Turn
from litellm_memory_hook.memory_api import MemoryTarget, resolve_target
from litellm_memory_hook.proxy import routes
from litellm_memory_hook.proxy.hook import MemoryHook
from litellm_memory_hook.settings import MemorySettings
from litellm_memory_hook.store.keys import ConversationKeys, due_key
from tests.support.redis_url import real_redis_url

pytestmark = pytest.mark.redis

REDIS_URL = real_redis_url()
ALIASES: dict[str, dict[str, Any]] = {"demo": {"memory": {"enabled": True}}}
TENANT_HEADER = "x-test-tenant"


class FakeAuth:
    """What LiteLLM's ``UserAPIKeyAuth`` gives for a key of team ``team_id``."""

    def __init__(self, team_id: str) -> None:
        self.team_id = team_id
        self.user_id = None
        self.token = f"hashed-{team_id}"


async def fake_auth(request: Request) -> FakeAuth:
    """Stand-in for :func:`routes.memory_auth`: the team named by a test header (default a)."""
    return FakeAuth(request.headers.get(TENANT_HEADER, "a"))


@pytest.fixture
async def redis_client(key_prefix: str) -> AsyncIterator[aioredis.Redis]:
    """A real Redis client; every key under the test's prefix is deleted afterwards."""
    client = aioredis.from_url(REDIS_URL, decode_responses=False)
    yield client
    async for key in client.scan_iter(match=f"{key_prefix}:*", count=1000):
        await client.delete(key)
    await client.aclose()


@pytest.fixture
def hook(redis_client: aioredis.Redis, key_prefix: str) -> MemoryHook:
    """A memory hook on the real Redis with one memory-enabled alias, ``demo``."""
    return MemoryHook(
        settings=MemorySettings(key_prefix=key_prefix, redis_url=REDIS_URL, worker_in_proxy=False),
        redis=redis_client,
        alias_lookup=lambda name: ALIASES.get(name),
    )


@pytest.fixture
async def client(hook: MemoryHook) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client of an app with the memory router, the hook and the fake auth."""
    app = FastAPI()
    app.include_router(routes.router)
    app.dependency_overrides[routes.memory_auth] = fake_auth
    app.dependency_overrides[routes.current_hook] = lambda: hook
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://memory.test") as http:
        yield http


def target(hook: MemoryHook, user: str = "alice", tenant: str = "team-a") -> MemoryTarget:
    """The memory set the API resolves for ``user`` of ``tenant`` on ``demo``."""
    return resolve_target(hook.settings, hook.alias_config, tenant=tenant, user=user, model="demo")


Q = {"user": "alice", "model": "demo"}


async def test_pin_list_edit_delete_round_trip(client: httpx.AsyncClient) -> None:
    """A pinned memory can be created (201), listed, edited and deleted (204), and is gone."""
    created = await client.post("/memory/v1/pinned", json={**Q, "text": "My cat is called Miso."})
    assert created.status_code == 201, created.text
    item = created.json()
    assert set(item) == {"id", "text", "created_ms"}
    assert item["text"] == "My cat is called Miso."
    assert item["created_ms"] > 1_600_000_000_000

    listing = (await client.get("/memory/v1/memories", params=Q)).json()
    assert listing["pinned"] == [item]
    assert listing["memories"] == []
    assert listing["version"] >= 1

    edited = await client.patch(
        f"/memory/v1/pinned/{item['id']}", json={**Q, "text": "My cat is called Mochi."}
    )
    assert edited.status_code == 200, edited.text
    assert edited.json() == {**item, "text": "My cat is called Mochi."}
    listing2 = (await client.get("/memory/v1/memories", params=Q)).json()
    assert [p["text"] for p in listing2["pinned"]] == ["My cat is called Mochi."]
    assert listing2["version"] > listing["version"]

    deleted = await client.delete(f"/memory/v1/pinned/{item['id']}", params=Q)
    assert deleted.status_code == 204
    assert deleted.content == b""
    assert (await client.get("/memory/v1/memories", params=Q)).json()["pinned"] == []
    again = await client.delete(f"/memory/v1/pinned/{item['id']}", params=Q)
    assert again.status_code == 404


async def test_exact_text_kept_trimmed(client: httpx.AsyncClient) -> None:
    """Pinned text is stored trimmed at the ends but otherwise exactly (accents, emoji,
    Devanagari with its vowel signs)."""
    texts = ["  Mi cumpleaños es el 3 de marzo 🎂  ", "मेरी बहन का नाम सीमा है।\t"]
    for text in texts:
        answer = await client.post("/memory/v1/pinned", json={**Q, "text": text})
        assert answer.status_code == 201, answer.text
        assert answer.json()["text"] == text.strip()
    listing = (await client.get("/memory/v1/memories", params=Q)).json()
    assert [p["text"] for p in listing["pinned"]] == [t.strip() for t in texts]


async def test_empty_text_is_400_naming_text(client: httpx.AsyncClient) -> None:
    """An empty or blank text is a 400 whose detail names 'text', when pinning and editing."""
    for text in ("", "   \n "):
        answer = await client.post("/memory/v1/pinned", json={**Q, "text": text})
        assert answer.status_code == 400
        assert "'text'" in answer.json()["detail"]
    item = (await client.post("/memory/v1/pinned", json={**Q, "text": "x"})).json()
    answer = await client.patch(f"/memory/v1/pinned/{item['id']}", json={**Q, "text": " "})
    assert answer.status_code == 400
    assert "'text'" in answer.json()["detail"]


async def test_over_limit_text_is_400_with_the_limit(
    client: httpx.AsyncClient, hook: MemoryHook
) -> None:
    """A text longer than ``pinned_item_chars`` is a 400 that states the limit."""
    limit = hook.settings.memories.max_pinned_item_chars
    answer = await client.post("/memory/v1/pinned", json={**Q, "text": "a" * (limit + 1)})
    assert answer.status_code == 400
    detail = answer.json()["detail"]
    assert "'text'" in detail and str(limit) in detail
    exact = await client.post("/memory/v1/pinned", json={**Q, "text": "a" * limit})
    assert exact.status_code == 201


async def test_missing_or_wrong_fields(client: httpx.AsyncClient) -> None:
    """A body without 'text' or with a 'tenant' field is FastAPI's 422 naming the field; a
    blank user is a 400 naming 'user'."""
    missing = await client.post("/memory/v1/pinned", json=Q)
    assert missing.status_code == 422
    assert "text" in json.dumps(missing.json())
    smuggled = await client.post("/memory/v1/pinned", json={**Q, "text": "x", "tenant": "b"})
    assert smuggled.status_code == 422
    assert "tenant" in json.dumps(smuggled.json())
    blank_user = await client.get("/memory/v1/memories", params={"user": " ", "model": "demo"})
    assert blank_user.status_code == 400
    assert "'user'" in blank_user.json()["detail"]


async def test_unknown_id_is_404(client: httpx.AsyncClient) -> None:
    """Editing or deleting an id that does not exist is a 404."""
    answers = [
        await client.patch("/memory/v1/pinned/0000000000001-abcdef", json={**Q, "text": "x"}),
        await client.delete("/memory/v1/pinned/0000000000001-abcdef", params=Q),
        await client.delete("/memory/v1/memories/0000000000001-abcdef", params=Q),
    ]
    assert [a.status_code for a in answers] == [404, 404, 404]
    assert all("0000000000001-abcdef" in a.json()["detail"] for a in answers)


async def test_unknown_model_is_400(client: httpx.AsyncClient) -> None:
    """A model that is not a memory-enabled alias is a 400 naming it, on every route."""
    bad = {"user": "alice", "model": "gpt-unknown"}
    answers = [
        await client.get("/memory/v1/memories", params=bad),
        await client.post("/memory/v1/pinned", json={**bad, "text": "x"}),
        await client.get("/memory/v1/summary", params=bad),
        await client.post("/memory/v1/flush", json=bad),
    ]
    for answer in answers:
        assert answer.status_code == 400
        assert "gpt-unknown" in answer.json()["detail"]


async def test_tenants_are_isolated(client: httpx.AsyncClient) -> None:
    """A second tenant sees an empty list for the same user and gets 404 on the first
    tenant's ids (edit, delete of pinned and extracted); the first tenant's data is intact."""
    item = (await client.post("/memory/v1/pinned", json={**Q, "text": "secret"})).json()
    other = {TENANT_HEADER: "b"}
    listing = await client.get("/memory/v1/memories", params=Q, headers=other)
    assert listing.json() == {"pinned": [], "memories": [], "version": 0}
    edit = await client.patch(
        f"/memory/v1/pinned/{item['id']}", json={**Q, "text": "hacked"}, headers=other
    )
    delete = await client.delete(f"/memory/v1/pinned/{item['id']}", params=Q, headers=other)
    delete_extracted = await client.delete(
        f"/memory/v1/memories/{item['id']}", params=Q, headers=other
    )
    assert [edit.status_code, delete.status_code, delete_extracted.status_code] == [404] * 3
    mine = (await client.get("/memory/v1/memories", params=Q)).json()
    assert mine["pinned"] == [item]


async def test_editing_an_extracted_memory_says_what_it_is(
    client: httpx.AsyncClient, hook: MemoryHook, redis_client: aioredis.Redis
) -> None:
    """PATCH /pinned/{id} of an extracted memory is a 400 saying only pinned memories can be
    edited (a fresh-user test read "no pinned memory" for a memory it could see); the memory
    is unchanged; an unknown id stays a 404; a placeholder user id is named as such."""
    memory = target(hook).memory
    await redis_client.hset(memory.memories, "1718000000000-aaaaaa", "Alice likes tea.")
    answer = await client.patch(
        "/memory/v1/pinned/1718000000000-aaaaaa", json={**Q, "text": "Alice likes coffee."}
    )
    assert answer.status_code == 400, answer.text
    assert "is an extracted memory: only pinned memories can be edited" in answer.text
    assert await redis_client.hget(memory.memories, "1718000000000-aaaaaa") == b"Alice likes tea."
    missing = await client.patch("/memory/v1/pinned/1718000000000-bbbbbb", json={**Q, "text": "x"})
    assert missing.status_code == 404
    placeholder = await client.get("/memory/v1/memories", params={**Q, "user": "null"})
    assert placeholder.status_code == 400
    assert "placeholder such as 'null'" in placeholder.json()["detail"]


async def test_delete_extracted_memory_leaves_tombstone(
    client: httpx.AsyncClient, hook: MemoryHook, redis_client: aioredis.Redis
) -> None:
    """DELETE /memories/{id} removes an extracted memory (listed under 'memories') and leaves
    its tombstone, so it is not extracted again; a pinned id there is a 404."""
    memory = target(hook).memory
    await redis_client.hset(memory.memories, "1718000000000-aaaaaa", "Alice likes tea.")
    listing = (await client.get("/memory/v1/memories", params=Q)).json()
    assert listing["memories"] == [
        {"id": "1718000000000-aaaaaa", "text": "Alice likes tea.", "created_ms": 1718000000000}
    ]
    answer = await client.delete("/memory/v1/memories/1718000000000-aaaaaa", params=Q)
    assert answer.status_code == 204
    assert (await client.get("/memory/v1/memories", params=Q)).json()["memories"] == []
    assert await redis_client.hlen(memory.tombs) == 1
    pinned = (await client.post("/memory/v1/pinned", json={**Q, "text": "x"})).json()
    wrong_kind = await client.delete(f"/memory/v1/memories/{pinned['id']}", params=Q)
    assert wrong_kind.status_code == 404


async def test_flush_makes_conversation_due(
    client: httpx.AsyncClient,
    hook: MemoryHook,
    redis_client: aioredis.Redis,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """POST /flush answers 202 with the due time, puts the conversation in the due set at
    that time, wakes the in-proxy worker, and the summary route shows the due time; a
    conversation with no stored turns is a 404 that schedules nothing, and so is its summary."""

    class Worker:
        woken = 0

        def wake(self) -> None:
            Worker.woken += 1

    monkeypatch.setattr(MemoryHook, "worker", property(lambda self: Worker()))
    unknown = await client.get("/memory/v1/summary", params=Q)
    assert unknown.status_code == 404, unknown.text
    assert unknown.json()["detail"] == "no conversation 'demo' for user 'alice'"
    missing = await client.post("/memory/v1/flush", json={**Q, "conversation": "chat-7"})
    assert missing.status_code == 404, missing.text
    assert (
        missing.json()["detail"] == "no conversation 'chat-7' for user 'alice': nothing to extract"
    )
    assert await redis_client.zcard(due_key(hook.settings.storage.key_prefix)) == 0
    keys = resolve_target(
        hook.settings,
        hook.alias_config,
        tenant="team-a",
        user="alice",
        model="demo",
        conversation="chat-7",
    ).conversation
    await hook.store.append(keys, indexed_chain([Turn(role="user", text="Hello.", ts_ms=1)]))
    answer = await client.post("/memory/v1/flush", json={**Q, "conversation": "chat-7"})
    assert answer.status_code == 202, answer.text
    due_ms = answer.json()["due_ms"]
    ref = keys.ref
    assert await redis_client.zscore(due_key(hook.settings.storage.key_prefix), ref) == due_ms
    assert Worker.woken == 1
    summary = await client.get("/memory/v1/summary", params={**Q, "conversation": "chat-7"})
    assert summary.json()["due_ms"] == due_ms
    fresh = (await client.get("/memory/v1/summary", params={**Q, "conversation": "chat-7"})).json()
    assert fresh == {"summary": "", "cursor": 0, "seq": 1, "due_ms": due_ms}
    # the default conversation was not touched
    assert (await client.get("/memory/v1/summary", params=Q)).status_code == 404


async def test_redis_down_is_503(key_prefix: str) -> None:
    """With Redis unreachable every route answers 503 with a clear detail, never 500."""
    dead = aioredis.from_url(
        "redis://127.0.0.1:1/0", socket_connect_timeout=0.2, decode_responses=False
    )
    hook = MemoryHook(
        settings=MemorySettings(key_prefix=key_prefix, redis_url="redis://127.0.0.1:1/0"),
        redis=dead,
        alias_lookup=lambda name: ALIASES.get(name),
    )
    app = FastAPI()
    app.include_router(routes.router)
    app.dependency_overrides[routes.memory_auth] = fake_auth
    app.dependency_overrides[routes.current_hook] = lambda: hook
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://memory.test") as http:
        answers = [
            await http.get("/memory/v1/memories", params=Q),
            await http.post("/memory/v1/pinned", json={**Q, "text": "x"}),
            await http.get("/memory/v1/summary", params=Q),
            await http.post("/memory/v1/flush", json=Q),
        ]
    await dead.aclose()
    for answer in answers:
        assert answer.status_code == 503, answer.text
        assert "unavailable" in answer.json()["detail"]


async def test_openapi_lists_the_routes(client: httpx.AsyncClient) -> None:
    """/openapi.json documents every memory route, tagged 'memory', with the body models."""
    schema = (await client.get("/openapi.json")).json()
    paths = schema["paths"]
    expected = {
        "/memory/v1/memories": {"get"},
        "/memory/v1/pinned": {"post"},
        "/memory/v1/pinned/{id}": {"patch", "delete"},
        "/memory/v1/memories/{id}": {"delete"},
        "/memory/v1/summary": {"get"},
        "/memory/v1/flush": {"post"},
    }
    for path, methods in expected.items():
        assert set(paths[path]) == methods, path
        for method in methods:
            assert paths[path][method]["tags"] == ["memory"]
    for model in ("PinIn", "EditIn", "FlushIn", "MemoryItemOut", "MemoryListOut", "SummaryOut"):
        assert model in schema["components"]["schemas"]


def test_auth_failure_conversion() -> None:
    """LiteLLM's auth failures become 401 for a missing or wrong key (also its 500 and
    400 "No connected db."), and keep 403 / 429 for a valid key it refuses."""
    from litellm.proxy._types import ProxyException

    missing = routes.auth_failure(ProxyException("boom", "auth_error", None, 500), key_sent=False)
    assert missing.status_code == 401 and "missing API key" in str(missing.detail)
    assert missing.headers == {"WWW-Authenticate": "Bearer"}
    no_db = routes.auth_failure(
        ProxyException("No connected db.", "auth_error", None, 400), key_sent=True
    )
    assert (no_db.status_code, no_db.detail) == (401, "invalid API key")
    crash = routes.auth_failure(RuntimeError("'NoneType' has no attribute"), key_sent=True)
    assert (crash.status_code, crash.detail) == (401, "invalid API key")
    expired = routes.auth_failure(
        ProxyException("Authentication Error - Expired Key.", "auth_error", None, 401),
        key_sent=True,
    )
    assert expired.status_code == 401 and "Expired Key" in str(expired.detail)
    refused = routes.auth_failure(HTTPException(403, "route not allowed"), key_sent=True)
    assert refused.status_code == 403 and "route not allowed" in str(refused.detail)
    limited = routes.auth_failure(
        ProxyException("Budget exceeded", "budget_exceeded", None, 429), key_sent=True
    )
    assert (limited.status_code, limited.detail) == (429, "Budget exceeded")


def test_mount_outside_a_proxy_does_nothing(hook: MemoryHook) -> None:
    """mount() returns False (and imports nothing) when no LiteLLM proxy is loaded."""
    if "litellm.proxy.proxy_server" in sys.modules:
        pytest.skip("another test imported the proxy server into this process")
    from litellm_memory_hook.proxy import mounting

    assert mounting.mount(hook) is False
    assert "litellm.proxy.proxy_server" not in sys.modules


def test_a_tenant_no_key_can_have_is_refused(hook: MemoryHook) -> None:
    """resolve_target (the CLI's --tenant, imports) takes only the tenant forms the proxy gives
    keys; a fresh-user test wrote memory under "bad tenant!", which no key can reach. Every
    tenant tenant_from_auth gives is accepted."""
    from litellm_memory_hook.memory_api import MemoryInputError
    from litellm_memory_hook.proxy.identity import tenant_from_auth
    from litellm_memory_hook.store.keys import is_tenant

    for bad in ("bad tenant!", "", "team-", "key-xyz", "Master", "key-" + "A" * 24):
        with pytest.raises(MemoryInputError, match="is not a tenant id"):
            resolve_target(hook.settings, hook.alias_config, tenant=bad, user="a", model="demo")
    for auth in (FakeAuth("a b"), FakeAuth(""), FakeAuth("x")):
        auth.team_id = auth.team_id or None  # type: ignore[assignment]
        auth.token = "sk-some-key"
        assert is_tenant(tenant_from_auth(auth)), tenant_from_auth(auth)
    for good in ("master", "team-a", "user-bob", "key-" + "0a" * 12):
        assert (
            resolve_target(
                hook.settings, hook.alias_config, tenant=good, user="a", model="demo"
            ).tenant
            == good
        )


async def test_a_forget_also_drops_this_proxys_buffered_writes(
    client: httpx.AsyncClient, hook: MemoryHook, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The forget route removes the target's writes from the proxy's outage buffer (whole user,
    or one conversation), so they are not written after it."""
    calls: list[tuple[str, str, bool]] = []

    @contextlib.asynccontextmanager
    async def record(keys: ConversationKeys, *, whole_user: bool) -> AsyncIterator[list[Any]]:
        calls.append((keys.prefix, keys.ref, whole_user))
        yield []

    monkeypatch.setattr(hook, "forgetting", record)
    assert (
        await client.delete("/memory/v1/users/alice", params={"model": "demo"})
    ).status_code == 200
    one = {"model": "demo", "conversation": "trip"}
    assert (await client.delete("/memory/v1/users/alice", params=one)).status_code == 200
    user_ref = target(hook).conversation.ref.rsplit(":", 1)[0]  # tenant:user
    assert calls[0][0] == hook.settings.storage.key_prefix and calls[0][2] is True
    assert calls[0][1].rsplit(":", 1)[0] == user_ref
    assert calls[1][2] is False and calls[1][1].endswith(":trip")
