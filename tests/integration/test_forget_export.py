"""Forget and export (issue 10 items 1 and 2): the memory API on a real Redis, the HTTP routes
in-process with a fake two-tenant auth, and the CLI commands (`forget`, `export`,
`import --format export`) through typer's CliRunner.

The data is written the way the proxy writes it: chats through the hook (turns, call ids,
recall index, due entries), a pinned memory through the API, an extraction commit (summary,
cursor, extracted memories), a deleted extracted memory (tombstone) and a deleted turn (a gap
in the seqs)."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
import redis.asyncio as aioredis
import yaml
from fastapi import FastAPI, Request
from typer.testing import CliRunner

from litellm_memory_hook.core.indexing import stored_terms
from litellm_memory_hook.core.models import Turn
from litellm_memory_hook.memory_api import (
    ExportDocument,
    MemoryAPI,
    MemoryInputError,
    MemoryNotFoundError,
    MemoryTarget,
    resolve_target,
)
from litellm_memory_hook.proxy import routes
from litellm_memory_hook.proxy.hook import MemoryHook
from litellm_memory_hook.settings import MemorySettings
from litellm_memory_hook.store.forgets import forget_token_ttl_s
from litellm_memory_hook.store.keys import ConversationKeys, UserKeys, due_key
from litellm_memory_hook.store.memory_sets import ExtractionCommit, MemorySetStore
from litellm_memory_hook.store.redis_store import MemoryStore
from litellm_memory_hook.tools import cli
from litellm_memory_hook.tools.cli_memory import register
from tests.support.harness import REPO, free_port
from tests.support.hook_calls import Auth, chat_request, model_response
from tests.support.redis_servers import RedisServer, free_ports, redis_binaries
from tests.support.redis_url import real_redis_url

pytestmark = pytest.mark.redis

REDIS_URL = real_redis_url()
ALIASES: dict[str, dict[str, Any]] = {
    "demo": {"memory": {"enabled": True}},
    "private": {"memory": {"enabled": True, "memory_scope": "conversation"}},
}
register(cli.app)


@pytest.fixture
async def client(key_prefix: str) -> AsyncIterator[aioredis.Redis]:
    """A real Redis client; the test's keys are deleted afterwards."""
    redis_client = aioredis.from_url(REDIS_URL, decode_responses=False)
    yield redis_client
    async for key in redis_client.scan_iter(match=f"{key_prefix}:*", count=1000):
        await redis_client.delete(key)
    await redis_client.aclose()


@pytest.fixture
def hook(client: aioredis.Redis, key_prefix: str) -> MemoryHook:
    """A hook with a user-scoped alias (demo) and a conversation-scoped one (private)."""
    return MemoryHook(
        settings=MemorySettings(key_prefix=key_prefix, redis_url=REDIS_URL, worker_in_proxy=False),
        redis=client,
        alias_lookup=lambda name: ALIASES.get(name),
    )


def target(
    hook: MemoryHook,
    user: str = "alice",
    *,
    tenant: str = "master",
    model: str = "demo",
    conversation: str | None = None,
) -> MemoryTarget:
    """The memory API's target for a user of a tenant."""
    return resolve_target(
        hook.settings,
        hook.alias_config,
        tenant=tenant,
        user=user,
        model=model,
        conversation=conversation,
    )


async def chat(
    hook: MemoryHook, text: str, reply: str, call_id: str, user: str = "alice", **extra: Any
) -> None:
    """One chat turn through the hook (pre-call, then the stored reply)."""
    data = chat_request(text, user=user, call_id=call_id, **extra)
    out = await hook.async_pre_call_hook(Auth(), None, data, "acompletion")
    assert out is not None
    assert await hook.async_post_call_success_hook(out, Auth(), model_response(reply)) is None


async def populate(hook: MemoryHook, client: aioredis.Redis, user: str = "alice") -> None:
    """Two conversations of demo (the default one with a gap in its seqs, chat-7), one of
    private (its own memory set), a pinned memory, an extraction commit and a tombstone."""
    await chat(hook, "My cat is called Miso.", "Nice name!", f"{user}-1", user)
    await chat(hook, "I collect origami cranes.", "Lovely.", f"{user}-2", user)
    await chat(hook, "Tell me a joke.", "Why did the chicken...", f"{user}-3", user)
    await chat(hook, "Planning a trip to Kyoto.", "Exciting!", f"{user}-4", user)
    meta = {"conversation_id": "chat-7"}
    await chat(hook, "Work is busy this week.", "Hang in there.", f"{user}-5", user, metadata=meta)
    await chat(hook, "Secret diary entry.", "Noted.", f"{user}-6", user, model="private")
    demo = target(hook, user)
    store = MemoryStore(client, ttl_s=3600)
    joke = [t for t in await store.all_turns(demo.conversation) if t.text == "Tell me a joke."]
    assert await store.delete_turns(demo.conversation, [stored_terms(joke[0])]) == 1
    api = MemoryAPI(client, hook.settings)
    await api.pin(demo, "My daughter Asha was born on 3 March.")
    memsets = MemorySetStore(client, ttl_s=3600)
    state = await memsets.read(demo.memory)
    commit = ExtractionCommit(
        read_version=state.version,
        read_cursor=0,
        delete_ids=[],
        add=["User: has a cat called Miso.", "User: collects origami cranes.", "User: wrong."],
        summary="Alice talked about her cat Miso and a trip to Kyoto.",
        cursor=4,
    )
    assert await memsets.commit_extraction(demo.conversation, demo.memory, commit, now_ms=1000)
    wrong = [m for m in (await api.list(demo)).memories if m.text == "User: wrong."]
    await api.delete_memory(demo, wrong[0].id)


async def user_keys_left(client: aioredis.Redis, prefix: str, tag: str) -> list[bytes]:
    """Every key of the user (SCAN over the test prefix; the test's check, not the code's)."""
    return [k async for k in client.scan_iter(match=f"{prefix}:*", count=1000) if tag.encode() in k]


def comparable(document: ExportDocument) -> dict[str, Any]:
    """An export without its export time."""
    data = document.model_dump(mode="json")
    data.pop("exported_ms")
    return data


async def index_state(client: aioredis.Redis, keys: ConversationKeys) -> tuple[Any, ...]:
    """The recall index of a conversation: its postings hash and N."""
    return (await client.hgetall(keys.postings), await client.hget(keys.meta, "idx_n"))


# -- the memory API --------------------------------------------------------------------------------


async def test_export_holds_everything(hook: MemoryHook, client: aioredis.Redis) -> None:
    """The export names the format and version and holds the three conversations with their
    turns (the deleted one missing), the summary and cursor, call ids, the user's memory set
    (pinned, extracted, tombstone) and the private conversation's own set."""
    await populate(hook, client)
    document = await MemoryAPI(client, hook.settings).export(target(hook), whole_user=True)
    data = document.model_dump(mode="json")
    assert data["format"] == "litellm-memory-export" and data["version"] == 1
    assert (data["tenant"], data["user"], data["conversation"]) == ("master", "alice", None)
    by_id = {c["id"]: c for c in data["conversations"]}
    assert set(by_id) == {"demo", "chat-7", "private"}
    demo = by_id["demo"]
    assert [t["seq"] for t in demo["turns"]] == [1, 2, 3, 4, 6, 7, 8]
    assert demo["turns"][0]["text"] == "My cat is called Miso."
    assert (demo["summary"], demo["cursor"], demo["seq"]) == (
        "Alice talked about her cat Miso and a trip to Kyoto.",
        4,
        8,
    )
    assert demo["memory_set"] == "ns:demo" and demo["alias"] == "demo"
    assert demo["calls"]["alice-1"] == 2 and "idx_n" not in demo["meta"]
    assert demo["due_ms"] is not None
    sets = {m["scope"]: m for m in data["memory_sets"]}
    assert set(sets) == {"ns:demo"}  # the private conversation pinned nothing
    assert [p["text"] for p in sets["ns:demo"]["pinned"]] == [
        "My daughter Asha was born on 3 March."
    ]
    assert [m["text"] for m in sets["ns:demo"]["memories"]] == [
        "User: has a cat called Miso.",
        "User: collects origami cranes.",
    ]
    assert len(sets["ns:demo"]["tombstones"]) == 1
    assert by_id["private"]["memory_set"] == "c:private"
    ExportDocument.parse(json.loads(json.dumps(data)))  # valid JSON of the documented shape


@pytest.mark.skipif(redis_binaries() is None, reason="redis-server not installed")
async def test_export_answers_while_redis_refuses_writes(tmp_path: Path, key_prefix: str) -> None:
    """A Redis full under ``noeviction`` refuses every command queued in a MULTI with OOM, but
    answers reads: the export of a user is the same as before it filled (it read meta and calls,
    and each memory set, in a MULTI, and answered 503 while Redis was full)."""
    [port] = free_ports(1)
    server = RedisServer(tmp_path / "redis", port, ("--maxmemory-policy", "noeviction")).start()
    client = aioredis.from_url(server.url, decode_responses=False)
    admin = redis.Redis.from_url(server.url)
    try:
        hook = MemoryHook(
            settings=MemorySettings(
                key_prefix=key_prefix, redis_url=server.url, worker_in_proxy=False
            ),
            redis=client,
            alias_lookup=lambda name: ALIASES.get(name),
        )
        await populate(hook, client)
        api = MemoryAPI(client, hook.settings)
        before = await api.export(target(hook), whole_user=True)
        admin.config_set("maxmemory", 1)
        with pytest.raises(redis.exceptions.RedisError, match="maxmemory"):
            admin.pipeline(transaction=True).hgetall("any").execute()  # how the old one read
        during = await api.export(target(hook), whole_user=True)
        assert comparable(during) == comparable(before)
        assert sorted(len(c.turns) for c in during.conversations) == [2, 2, 7]
    finally:
        admin.config_set("maxmemory", 0)
        admin.close()
        await client.aclose()
        server.stop()


async def test_forget_user_leaves_nothing(
    hook: MemoryHook, client: aioredis.Redis, key_prefix: str
) -> None:
    """forget (whole user) deletes every key with the user's hash tag, their due entries, and
    nothing of theirs comes back from memories, recall or the due queue; another user is
    untouched."""
    await populate(hook, client)
    await chat(hook, "Bob likes chess.", "Checkmate!", "bob-1", user="bob")
    api = MemoryAPI(client, hook.settings)
    result = await api.forget(target(hook), whole_user=True)
    assert (result.conversations, result.memory_sets) == (3, 1)
    assert result.deleted_keys > 10
    user = UserKeys.for_ids(key_prefix, "master", "alice")
    # the one key left: the forget token that refuses writes begun before the forget
    assert await user_keys_left(client, key_prefix, user.hash_tag) == [user.forgets.encode()]
    tokens = await client.hgetall(user.forgets)
    assert sorted(tokens) == [b"n", b"u"] and re.fullmatch(rb"f:\d{13}-[0-9a-f]{16}", tokens[b"u"])
    ttl = forget_token_ttl_s(hook.settings.write_buffer.max_age_s)
    assert ttl - 5 < await client.ttl(user.forgets) <= ttl == 600 + 3600
    due = [m.decode() for m in await client.zrange(due_key(key_prefix), 0, -1)]
    assert due == ["master:bob:demo"]
    listing = await api.list(target(hook))
    assert (listing.pinned, listing.memories, listing.version) == ([], [], 0)
    data = chat_request("What about Kyoto and Miso?", user="alice", call_id="q")
    out = await hook.async_pre_call_hook(Auth(), None, data, "acompletion")
    assert out is not None
    assert "Miso" not in json.dumps(out["messages"][:-1])
    assert (await api.forget(target(hook), whole_user=True)).deleted_keys == 0  # idempotent
    assert await api.list(target(hook, "bob")) is not None
    assert await client.zcard(target(hook, "bob").conversation.turns) == 2


async def test_forget_one_conversation(
    hook: MemoryHook, client: aioredis.Redis, key_prefix: str
) -> None:
    """forget --conversation deletes that conversation's keys and due entry only: the user's
    other conversations and the memories they share stay."""
    await populate(hook, client)
    api = MemoryAPI(client, hook.settings)
    gone = target(hook, conversation="chat-7")
    result = await api.forget(gone, whole_user=False)
    assert (result.conversations, result.memory_sets) == (1, 0)
    assert await client.exists(*gone.conversation.all()) == 0
    assert await client.zscore(due_key(key_prefix), gone.conversation.ref) is None
    members = await client.smembers(gone.conversation.user_keys.index)
    assert b"c:chat-7" not in members and b"c:demo" in members
    assert len((await api.list(target(hook))).pinned) == 1
    private = target(hook, model="private", conversation="private")
    result = await api.forget(private, whole_user=False)
    assert (result.conversations, result.memory_sets) == (1, 0)  # it pinned nothing


async def test_export_forget_import_export_round_trip(
    hook: MemoryHook, client: aioredis.Redis
) -> None:
    """export, forget, import, export gives the same document (turn seqs with their gap,
    memory ids, summary, cursor, version, tombstones, calls, due times), and the recall index
    is rebuilt to exactly what it was; the stored turns are the same bytes (a text stored once
    stays stored once, though the export carries it on every turn)."""
    await populate(hook, client)
    api = MemoryAPI(client, hook.settings)
    demo = target(hook).conversation
    index_before = await index_state(client, demo)
    members_before = await client.zrange(demo.turns, 0, -1)
    assert any(b'"text"' not in m for m in members_before)
    first = await api.export(target(hook), whole_user=True)
    await api.forget(target(hook), whole_user=True)
    seen: list[tuple[int, int]] = []
    result = await api.import_export(
        ExportDocument.parse(json.loads(first.model_dump_json())),
        tenant="master",
        user="alice",
        progress=lambda done, total: seen.append((done, total)),
    )
    assert (result.conversations, result.turns, result.memory_sets) == (3, 11, 1)
    assert seen[-1] == (11, 11)
    second = await api.export(target(hook), whole_user=True)
    assert comparable(second) == comparable(first)
    assert await index_state(client, demo) == index_before
    assert await client.zrange(demo.turns, 0, -1) == members_before
    data = chat_request("Any news about origami?", user="alice", call_id="q2")
    out = await hook.async_pre_call_hook(Auth(), None, data, "acompletion")
    assert out is not None  # the chat still reads the imported conversation
    assert "origami" in json.dumps(out["messages"][:-1])


async def test_a_turn_at_the_size_limits_comes_back_whole(
    hook: MemoryHook, client: aioredis.Redis
) -> None:
    """A fresh-user report: a turn near the 32,000-character text cap came back from an
    import cut in the middle of its JSON (its exact body was bounded like a field of the
    message), and the conversation could no longer be exported. Every member comes back the
    same bytes, valid JSON."""
    await chat(hook, "Second paste: " + "jklmnopqr " * 3400, "Long one.", "big-1", user="big")
    await chat(hook, "x " * 15_900, "Also long.", "big-2", user="big")
    api = MemoryAPI(client, hook.settings)
    keys = target(hook, "big").conversation
    members = await client.zrange(keys.turns, 0, -1)
    assert max(len(m) for m in members) > 32_000
    document = await api.export(target(hook, "big"), whole_user=True)
    await api.forget(target(hook, "big"), whole_user=True)
    parsed = ExportDocument.parse(json.loads(document.model_dump_json()))
    await api.import_export(parsed, tenant="master", user="big")
    assert await client.zrange(keys.turns, 0, -1) == members
    assert all(isinstance(json.loads(m), dict) for m in members)
    again = await api.export(target(hook, "big"), whole_user=True)
    assert comparable(again) == comparable(document)


async def test_a_forgotten_conversation_comes_back_from_its_export(
    hook: MemoryHook, client: aioredis.Redis
) -> None:
    """A fresh-user report: an export of one conversation carries the user's shared memory
    set, so importing it after forgetting that conversation was refused ("already has data").
    The conversation comes back; the live memory set, newer than the export, stays as it is;
    the conversation itself still counts as data already there."""
    await populate(hook, client)
    api = MemoryAPI(client, hook.settings)
    chat7 = target(hook, conversation="chat-7")
    document = await api.export(chat7, whole_user=False)
    assert document.conversation == "chat-7" and len(document.memory_sets) == 1
    members = await client.zrange(chat7.conversation.turns, 0, -1)
    await api.forget(chat7, whole_user=False)
    await api.pin(target(hook), "Pinned after the export.")
    live = await api.list(target(hook))
    with_text = ExportDocument.parse(json.loads(document.model_dump_json()))
    result = await api.import_export(with_text, tenant="master", user="alice")
    assert (result.conversations, result.turns, result.memory_sets) == (1, 2, 0)
    assert await client.zrange(chat7.conversation.turns, 0, -1) == members
    assert await api.list(target(hook)) == live
    with pytest.raises(MemoryInputError, match="already has data in chat-7"):
        await api.import_export(with_text, tenant="master", user="alice")
    result = await api.import_export(with_text, tenant="master", user="alice", fresh=True)
    assert result.memory_sets == 1  # --fresh puts the export's memory set back too
    assert [p.text for p in (await api.list(target(hook))).pinned] == [
        "My daughter Asha was born on 3 March."
    ]


async def test_import_refuses_existing_data_unless_fresh(
    hook: MemoryHook, client: aioredis.Redis
) -> None:
    """Importing over a user who has data in the export's conversations is refused (nothing
    written); --fresh replaces it."""
    await populate(hook, client)
    api = MemoryAPI(client, hook.settings)
    document = await api.export(target(hook), whole_user=True)
    await chat(hook, "A new line after the export.", "Ok.", "alice-9")
    with pytest.raises(MemoryInputError, match="already has data"):
        await api.import_export(document, tenant="master", user="alice")
    assert await client.zcard(target(hook).conversation.turns) == 9
    await api.import_export(document, tenant="master", user="alice", fresh=True)
    assert comparable(await api.export(target(hook), whole_user=True)) == comparable(document)


async def test_import_under_another_user(hook: MemoryHook, client: aioredis.Redis) -> None:
    """An export imported for another user and tenant is read by that user's chats; the raw
    ids in the meta hash are the new ones."""
    await populate(hook, client)
    api = MemoryAPI(client, hook.settings)
    document = await api.export(target(hook), whole_user=True)
    await api.import_export(document, tenant="team-x", user="carol")
    copy = await api.export(target(hook, "carol", tenant="team-x"), whole_user=True)
    assert (copy.tenant, copy.user) == ("team-x", "carol")
    assert [len(c.turns) for c in copy.conversations] == [
        len(c.turns) for c in document.conversations
    ]
    meta = await client.hgetall(target(hook, "carol", tenant="team-x").conversation.meta)
    assert (meta[b"user"], meta[b"tenant"]) == (b"carol", b"team-x")


async def test_export_one_conversation(hook: MemoryHook, client: aioredis.Redis) -> None:
    """Exporting one conversation gives it and the memory set it uses; an unknown one is
    MemoryNotFoundError."""
    await populate(hook, client)
    api = MemoryAPI(client, hook.settings)
    document = await api.export(target(hook, conversation="chat-7"), whole_user=False)
    assert document.conversation == "chat-7"
    assert [c.id for c in document.conversations] == ["chat-7"]
    assert [m.scope for m in document.memory_sets] == ["ns:demo"]
    with pytest.raises(MemoryNotFoundError):
        await api.export(target(hook, conversation="nope"), whole_user=False)


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"format": "other"}, "not a litellm-memory export"),
        ({"version": 2}, "version 2 is not supported"),
        ({"memory_sets": [{"scope": "ns:{x}", "version": 1}]}, "memory_sets.0.scope"),
        ({"conversations": [{"id": "a", "key": "a:b"}]}, "conversations.0.key"),
        ({"surprise": 1}, "surprise"),
    ],
)
def test_bad_documents_are_refused(change: dict[str, Any], needle: str) -> None:
    """A document of another format or version, or with a key id that could move a key out of
    the user's hash tag, is refused with a message naming the problem."""
    base = {
        "format": "litellm-memory-export",
        "version": 1,
        "exported_ms": 1,
        "key_prefix": "mem",
        "tenant": "master",
        "user": "alice",
    }
    with pytest.raises(MemoryInputError, match=needle.replace("{", r"\{").replace(".", r"\.")):
        ExportDocument.parse({**base, **change})


async def test_malformed_turn_is_an_input_error(hook: MemoryHook, client: aioredis.Redis) -> None:
    """A turn without a seq is refused as bad input."""
    document = ExportDocument.parse(
        {
            "format": "litellm-memory-export",
            "version": 1,
            "exported_ms": 1,
            "key_prefix": "mem",
            "tenant": "master",
            "user": "alice",
            "conversations": [{"id": "demo", "key": "demo", "turns": [{"role": "user"}]}],
        }
    )
    with pytest.raises(MemoryInputError, match="seq"):
        await MemoryAPI(client, hook.settings).import_export(
            document, tenant="master", user="alice"
        )


async def test_a_malformed_document_writes_nothing(
    hook: MemoryHook, client: aioredis.Redis
) -> None:
    """A document with one bad turn (in its last conversation) is refused before anything is
    written: no memory set, index or conversation of the user appears, so the corrected
    document then imports without --fresh (a fresh-user test found the memory sets and the
    index written, and the corrected file refused as "already has data")."""
    await populate(hook, client)
    api = MemoryAPI(client, hook.settings)
    good = await api.export(target(hook), whole_user=True)
    assert len(good.conversations) >= 2 and good.memory_sets
    raw = good.model_dump(mode="json")
    raw["conversations"][-1]["turns"][0]["seq"] = "abc"
    bad = ExportDocument.parse(raw)
    with pytest.raises(MemoryInputError, match="positive integer 'seq'"):
        await api.import_export(bad, tenant="team-z", user="zz")
    assert not [k async for k in client.scan_iter(match=f"{hook.settings.storage.key_prefix}:*zz*")]
    await api.import_export(good, tenant="team-z", user="zz")
    copy = await api.export(target(hook, "zz", tenant="team-z"), whole_user=True)
    assert [len(c.turns) for c in copy.conversations] == [len(c.turns) for c in good.conversations]


# -- HTTP ------------------------------------------------------------------------------------------


class TeamAuth:
    """What LiteLLM's ``UserAPIKeyAuth`` gives for a key of a team."""

    def __init__(self, team_id: str) -> None:
        self.team_id = team_id
        self.user_id = None
        self.token = f"hashed-{team_id}"


@pytest.fixture
async def http(hook: MemoryHook) -> AsyncIterator[httpx.AsyncClient]:
    """The memory router with the hook and a fake auth (team from the x-test-tenant header)."""

    async def fake_auth(request: Request) -> TeamAuth:
        return TeamAuth(request.headers.get("x-test-tenant", "a"))

    app = FastAPI()
    app.include_router(routes.router)
    app.dependency_overrides[routes.memory_auth] = fake_auth
    app.dependency_overrides[routes.current_hook] = lambda: hook
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://memory.test") as client:
        yield client


async def test_http_export_and_forget(
    http: httpx.AsyncClient, hook: MemoryHook, client: aioredis.Redis, key_prefix: str
) -> None:
    """GET /export returns the document of the caller's tenant; another tenant's export of the
    same user id is empty and its DELETE deletes nothing; DELETE /users/{user} forgets the user
    (200 with counts), and a second DELETE answers zeros."""
    q = {"user": "alice", "model": "demo"}
    pinned = await http.post("/memory/v1/pinned", json={**q, "text": "I like tea."})
    assert pinned.status_code == 201, pinned.text
    await client.zadd(due_key(key_prefix), {"team-a:alice:demo": 5})
    exported = await http.get("/memory/v1/export", params=q)
    assert exported.status_code == 200, exported.text
    document = exported.json()
    assert (document["format"], document["version"], document["tenant"]) == (
        "litellm-memory-export",
        1,
        "team-a",
    )
    assert document["memory_sets"][0]["pinned"][0]["text"] == "I like tea."
    other = {"x-test-tenant": "b"}
    foreign = (await http.get("/memory/v1/export", params=q, headers=other)).json()
    assert (foreign["conversations"], foreign["memory_sets"]) == ([], [])
    nothing = await http.delete("/memory/v1/users/alice", params={"model": "demo"}, headers=other)
    assert nothing.status_code == 200 and nothing.json()["deleted_keys"] == 0
    forgot = await http.delete("/memory/v1/users/alice", params={"model": "demo"})
    assert forgot.status_code == 200, forgot.text
    assert forgot.json()["user"] == "alice" and forgot.json()["conversation"] is None
    assert forgot.json()["deleted_keys"] >= 2 and forgot.json()["memory_sets"] == 1
    listing = (await http.get("/memory/v1/memories", params=q)).json()
    assert listing == {"pinned": [], "memories": [], "version": 0}
    assert await client.zcard(due_key(key_prefix)) == 0
    again = await http.delete("/memory/v1/users/alice", params={"model": "demo"})
    assert again.json()["deleted_keys"] == 0


async def test_http_forget_one_conversation_and_errors(
    http: httpx.AsyncClient, hook: MemoryHook, client: aioredis.Redis
) -> None:
    """DELETE /users/{user}?conversation=C forgets that conversation only; an unknown model is
    a 400 with a conversation (and not used without one), an export of an unknown conversation
    a 404; user ids with a slash work."""
    keys = target(hook, tenant="team-a", conversation="c1").conversation
    await client.hset(keys.meta, mapping={"seq": 1, "conversation": "c1"})
    await client.sadd(keys.user_keys.index, "c:c1")
    params = {"model": "demo", "conversation": "c1"}
    answer = await http.delete("/memory/v1/users/alice", params=params)
    assert answer.status_code == 200, answer.text
    assert answer.json()["conversation"] == "c1" and answer.json()["conversations"] == 1
    assert await client.exists(keys.meta) == 0
    bad = await http.delete(
        "/memory/v1/users/alice", params={"model": "gpt-unknown", "conversation": "c1"}
    )
    assert bad.status_code == 400 and "gpt-unknown" in bad.json()["detail"]
    # a whole user is forgotten whatever the alias: a model that left the config is not used
    gone = await http.delete("/memory/v1/users/alice", params={"model": "gpt-unknown"})
    assert gone.status_code == 200, gone.text
    missing = await http.get(
        "/memory/v1/export", params={"user": "alice", "model": "demo", "conversation": "zz"}
    )
    assert missing.status_code == 404
    slash = await http.delete("/memory/v1/users/org%2Fbob", params={"model": "demo"})
    assert slash.status_code == 200 and slash.json()["user"] == "org/bob"


async def test_http_forget_of_a_whole_user_needs_no_alias(
    http: httpx.AsyncClient, hook: MemoryHook, client: aioredis.Redis
) -> None:
    """A whole user is forgotten without ``model`` (an alias removed from the config, or memory
    turned off, must not keep their data); one conversation still needs the alias that names
    it (400 without it); a bad user id is a 400."""
    q = {"user": "alice", "model": "demo"}
    assert (await http.post("/memory/v1/pinned", json={**q, "text": "I like tea."})).is_success
    user = target(hook, tenant="team-a").conversation.user_keys
    assert await client.exists(user.index)
    forgot = await http.delete("/memory/v1/users/alice")
    assert forgot.status_code == 200, forgot.text
    assert forgot.json()["memory_sets"] == 1 and forgot.json()["conversation"] is None
    assert (await http.get("/memory/v1/memories", params=q)).json()["pinned"] == []
    assert await client.exists(user.index) == 0
    one = await http.delete("/memory/v1/users/alice", params={"conversation": "c1"})
    assert one.status_code == 400 and "model" in one.json()["detail"]
    bad = await http.delete("/memory/v1/users/%20")
    assert bad.status_code == 400, bad.text


async def test_openapi_documents_forget_and_export(http: httpx.AsyncClient) -> None:
    """/openapi.json lists the two routes and the export document's schema."""
    schema = (await http.get("/openapi.json")).json()
    assert set(schema["paths"]["/memory/v1/users/{user}"]) == {"delete"}
    assert set(schema["paths"]["/memory/v1/export"]) == {"get"}
    assert {"ExportDocument", "ForgetOut"} <= set(schema["components"]["schemas"])


# -- the command line ------------------------------------------------------------------------------


@pytest.fixture
def cli_env(monkeypatch: pytest.MonkeyPatch, key_prefix: str, tmp_path: Path) -> Iterator[Path]:
    """The checkout's config.yaml with the private alias, the test Redis and key prefix."""
    monkeypatch.setenv("LITELLM_MEMORY_STORAGE__KEY_PREFIX", key_prefix)
    monkeypatch.setenv("REDIS_URL", REDIS_URL)
    for name in ("LITELLM_MEMORY_REDIS__URL", "LITELLM_MEMORY_REDIS_URL"):
        monkeypatch.delenv(name, raising=False)
    raw = yaml.safe_load((REPO / "config.yaml").read_text(encoding="utf-8"))
    memory = raw["callback_settings"]["memory"]
    memory.get("storage", {}).pop("key_prefix", None)
    memory.pop("redis", None)
    raw["model_list"].append(
        {
            "model_name": "private",
            "litellm_params": {"model": "openai/x"},
            "model_info": {"memory": {"enabled": True, "memory_scope": "conversation"}},
        }
    )
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    yield path


def run(config: Path, *args: str) -> Any:
    """`litellm-memory ARGS --config CONFIG` in-process; the result has stdout and output."""
    return CliRunner().invoke(cli.app, [*args, "--config", str(config)])


def populate_now(key_prefix: str) -> None:
    """:func:`populate` for a synchronous test (its own event loop, client and hook)."""

    async def main() -> None:
        redis_client = aioredis.from_url(REDIS_URL, decode_responses=False)
        try:
            settings = MemorySettings(
                key_prefix=key_prefix, redis_url=REDIS_URL, worker_in_proxy=False
            )
            hook = MemoryHook(
                settings=settings, redis=redis_client, alias_lookup=lambda n: ALIASES.get(n)
            )
            await populate(hook, redis_client)
        finally:
            await redis_client.aclose()

    asyncio.run(main())


def sync_keys_left(key_prefix: str, tag: str) -> list[bytes]:
    """Every key of the user (SCAN, synchronous)."""
    sync = redis.Redis.from_url(REDIS_URL)
    try:
        return [k for k in sync.scan_iter(match=f"{key_prefix}:*", count=1000) if tag.encode() in k]
    finally:
        sync.close()


def test_cli_export_forget_import(cli_env: Path, key_prefix: str, tmp_path: Path) -> None:
    """`export` writes the JSON document on stdout (only it), `forget --yes` deletes the user,
    `import --format export` writes the file back, and a second export is the same."""
    populate_now(key_prefix)
    exported = run(cli_env, "export", "--user", "alice")
    assert exported.exit_code == 0, exported.output
    first = json.loads(exported.stdout)
    assert first["format"] == "litellm-memory-export" and len(first["conversations"]) == 3
    file = tmp_path / "alice.json"
    file.write_text(exported.stdout, encoding="utf-8")
    refused = run(cli_env, "forget", "--user", "alice")
    assert refused.exit_code == 2 and "--yes" in refused.output
    forgot = run(cli_env, "forget", "--user", "alice", "--yes")
    assert forgot.exit_code == 0 and "3 conversation(s), 1 memory set(s)" in forgot.output
    user = UserKeys.for_ids(key_prefix, "master", "alice")
    assert sync_keys_left(key_prefix, user.hash_tag) == [user.forgets.encode()]
    nothing = run(cli_env, "forget", "--user", "alice", "--yes")
    assert nothing.exit_code == 0 and "nothing stored" in nothing.output
    imported = run(cli_env, "import", str(file), "--format", "export")
    assert imported.exit_code == 0, imported.output
    assert "imported 3 conversation(s), 11 turns, 1 memory set(s)" in imported.output
    # without --format an export is known by its "format" field (a fresh-user test got
    # "--sample-id is required with --format locomo")
    again = run(cli_env, "import", str(file))
    assert again.exit_code == 2 and "already has data" in again.output
    folder = run(cli_env, "import", str(tmp_path))
    assert folder.exit_code == 2 and f"not a file: {tmp_path}" in folder.output
    second = run(cli_env, "export", "--user", "alice", "--output", str(tmp_path / "b.json"))
    assert second.exit_code == 0, second.output
    reread = json.loads((tmp_path / "b.json").read_text(encoding="utf-8"))
    first.pop("exported_ms")
    reread.pop("exported_ms")
    assert reread == first


def test_cli_forget_one_conversation(cli_env: Path, key_prefix: str) -> None:
    """`forget --conversation C --json` forgets that conversation and prints the counts."""
    populate_now(key_prefix)
    result = run(
        cli_env, "forget", "--user", "alice", "--conversation", "chat-7", "--yes", "--json"
    )
    assert result.exit_code == 0, result.output
    counts = json.loads(result.stdout)
    assert counts["conversation"] == "chat-7" and counts["conversations"] == 1
    tag = UserKeys.for_ids(key_prefix, "master", "alice").hash_tag
    left = {k.decode() for k in sync_keys_left(key_prefix, tag)}
    assert not any(":c:chat-7:" in k for k in left)
    assert f"{key_prefix}:{tag}:c:demo:meta" in left


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (None, "file not found"),
        ("{not json", "is not a JSON file"),
        ('{"format": "x"}', "not a litellm-memory export"),
    ],
)
def test_cli_import_bad_files_are_one_line(
    cli_env: Path, tmp_path: Path, content: str | None, needle: str
) -> None:
    """A missing file, a file that is not JSON and a JSON file that is not an export each give
    one error line and exit code 2, never a traceback."""
    file = tmp_path / "in.json"
    if content is not None:
        file.write_text(content, encoding="utf-8")
    result = run(cli_env, "import", str(file), "--format", "export")
    lines = result.output.strip().splitlines()
    assert result.exit_code == 2, result.output
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], lines
    assert "Traceback" not in result.output


def test_cli_redis_down_is_one_line(cli_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With Redis down, export, forget and stats say so in one line, exit code 2."""
    monkeypatch.setenv("REDIS_URL", f"redis://127.0.0.1:{free_port()}/0")
    for args in (
        ("export", "--user", "alice"),
        ("forget", "--user", "alice", "--yes"),
        ("stats",),
    ):
        result = run(cli_env, *args)
        lines = result.output.strip().splitlines()
        assert result.exit_code == 2, result.output
        assert len(lines) == 1 and lines[0].startswith("error: Redis (redis://"), lines
        assert "connecting" in lines[0] or "Connection refused" in lines[0], lines


def tiny_locomo(path: Path) -> None:
    session = [{"speaker": "Ana", "dia_id": "D1:1", "text": "My grandmother taught me origami."}]
    conversation = {
        "speaker_a": "Ana",
        "speaker_b": "Bo",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": session,
    }
    qa = [{"question": "Who taught Ana?", "answer": "grandmother", "evidence": ["D1:1"]}]
    path.write_text(json.dumps([{"sample_id": "tiny", "conversation": conversation, "qa": qa}]))


def test_proxy_down_is_one_line_unless_debug(cli_env: Path, tmp_path: Path) -> None:
    """`replay` against a proxy that is not running: one error line and exit code 1; with
    --debug (anywhere on the line) the traceback."""
    data = tmp_path / "tiny.json"
    tiny_locomo(data)
    port = free_port()
    args = [
        "replay",
        str(data),
        "--sample-id",
        "tiny",
        "--user",
        "ana",
        "--report",
        str(tmp_path / "r.json"),
        "--base-url",
        f"http://127.0.0.1:{port}/v1",
        "--standin-url",
        f"http://127.0.0.1:{port}",
    ]
    result = run(cli_env, *args)
    lines = result.output.strip().splitlines()
    assert result.exit_code == 1, result.output
    assert lines[-1].startswith("error: cannot reach"), lines
    assert "Traceback" not in result.output
    debug = run(cli_env, *args, "--debug")
    assert debug.exit_code != 0 and debug.exception is not None
    assert not isinstance(debug.exception, SystemExit)


def test_help_texts_have_examples_and_plain_usage() -> None:
    """Every command of this issue (and the memory commands) has an example in its help; usage
    lines show arguments as FILE / TEXT / ID, not {file}."""
    runner = CliRunner()
    for command in (
        ["forget"],
        ["export"],
        ["doctor"],
        ["stats"],
        ["import"],
        ["serve"],
        ["worker"],
        ["memories", "list"],
        ["memories", "pin"],
    ):
        result = runner.invoke(cli.app, [*command, "--help"], terminal_width=200)
        assert result.exit_code == 0, result.output
        assert "Example: litellm-memory" in result.output, command
        assert "{" not in result.output.split("Usage:")[1].splitlines()[0], command
    usage = runner.invoke(cli.app, ["import", "--help"], terminal_width=200).output
    assert "import [OPTIONS] FILE" in usage


def test_sync_client_sees_export_keys_prefix(cli_env: Path, key_prefix: str) -> None:
    """The CLI writes under the configured key prefix (LITELLM_MEMORY_STORAGE__KEY_PREFIX here)."""
    result = run(cli_env, "memories", "pin", "I like tea.", "--user", "dora")
    assert result.exit_code == 0, result.output
    sync = redis.Redis.from_url(REDIS_URL)
    try:
        keys = list(sync.scan_iter(match=f"{key_prefix}:*dora*"))
    finally:
        sync.close()
    assert keys
    exported = json.loads(run(cli_env, "export", "--user", "dora").stdout)
    assert exported["key_prefix"] == key_prefix
    assert exported["memory_sets"][0]["pinned"][0]["text"] == "I like tea."


def test_turn_body_is_written_back_exactly() -> None:
    """A dumped turn keeps fields this version's Turn may not know, byte for byte."""
    from litellm_memory_hook.store.transfer import stored_turn

    data = {"seq": 3, "role": "user", "text": "héllo", "ts": 5, "future_field": {"a": [1, 2]}}
    item = stored_turn(data)
    assert item.turn.seq == 3 and item.terms
    assert '{"seq":3,' + item.turn.body_json() == json.dumps(
        data, ensure_ascii=False, separators=(",", ":")
    )
    assert Turn.from_member('{"seq":3,' + item.turn.body_json()).text == "héllo"


def test_a_turn_body_is_bounded_without_being_cut() -> None:
    """Unknown fields come back up to UNKNOWN_FIELDS_CHARS; a turn with more, or one that
    bounding changes, is written from its bounded fields: always whole JSON, never a body cut
    mid-string."""
    from litellm_memory_hook.core.bounds import TurnLimits, bound_turn
    from litellm_memory_hook.core.models import full_member
    from litellm_memory_hook.store.transfer import UNKNOWN_FIELDS_CHARS, stored_turn

    room = UNKNOWN_FIELDS_CHARS - len(',"future":""')
    data = {"seq": 4, "role": "user", "text": "hi", "ts": 5, "future": "f" * room}
    assert '"future"' in stored_turn(data).turn.body_json()
    data["future"] += "f"
    body = stored_turn(data).turn.body_json()
    assert '"future"' not in body and json.loads("{" + body)["text"] == "hi"
    message = {"role": "user", "content": "z" * 40_000}
    big = stored_turn({"seq": 5, "role": "user", "text": "z" * 40_000, "ts": 5, "msg": message})
    bounded = bound_turn(big.turn, TurnLimits())
    stored = full_member(json.loads('{"seq":5,' + bounded.body_json()))
    assert len(stored["text"]) == TurnLimits().text_chars and stored["msg"]["role"] == "user"


def test_cli_forget_of_a_whole_user_needs_no_alias(cli_env: Path, key_prefix: str) -> None:
    """README (Forget and export, for HTTP and the CLI alike): a whole user is forgotten
    "whatever the alias (`model` is needed only with a conversation, so a user is forgotten
    after their alias left the config)". The HTTP route got that; ``litellm-memory forget``
    still resolves ``--model`` (default ``demo``) as a memory-enabled alias of the config, so
    once that alias is gone, forgetting the user fails."""
    populate_now(key_prefix)
    raw = yaml.safe_load(cli_env.read_text(encoding="utf-8"))
    raw["model_list"] = [m for m in raw["model_list"] if m["model_name"] != "demo"]
    cli_env.write_text(yaml.safe_dump(raw), encoding="utf-8")
    forgot = run(cli_env, "forget", "--user", "alice", "--yes")
    assert forgot.exit_code == 0, forgot.output
    user = UserKeys.for_ids(key_prefix, "master", "alice")
    assert sync_keys_left(key_prefix, user.hash_tag) == [user.forgets.encode()]
