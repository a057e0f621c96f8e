"""The memory inspector: its read-only JSON routes in-process on a real Redis (preview, the
user's conversations, last turns, the due queue, models; tenant scope; nothing written), the
page and its assets. The page in headless Chromium: tests/e2e/test_ui.py."""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis
from fastapi import FastAPI, Request

from litellm_memory_hook.proxy import routes, ui
from litellm_memory_hook.proxy.hook import MemoryHook
from litellm_memory_hook.store.keys import due_key
from tests.support.harness import free_port
from tests.support.hook_calls import Auth, chat_request, make_hook, model_response
from tests.support.prompt_view import is_tail

STATIC = Path(ui.__file__).resolve().parent / "static"
TENANT_HEADER = "x-test-tenant"


class TeamAuth:
    """A key of team ``b`` (another tenant)."""

    token = "hashed-team-b"
    team_id = "b"
    user_id = None


async def fake_auth(request: Request) -> Any:
    """The master key (tenant ``master``, as the hook's test traffic), or team b on request."""
    return TeamAuth() if request.headers.get(TENANT_HEADER) == "b" else Auth()


@pytest.fixture
async def hook(real_redis: aioredis.Redis, prefix: str) -> AsyncIterator[MemoryHook]:
    """A hook on the real Redis with the test aliases (demo, tiny, strict, plain)."""
    made = make_hook(real_redis, prefix)
    yield made
    await made.drain()


@pytest.fixture
async def http(hook: MemoryHook) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client of an app with the memory API and the inspector routes."""
    app = FastAPI()
    app.include_router(routes.router)
    assert ui.include_once(app, ui.router)
    assert not ui.include_once(app, ui.router)  # once only
    app.dependency_overrides[routes.memory_auth] = fake_auth
    app.dependency_overrides[routes.current_hook] = lambda: hook
    app.dependency_overrides[ui.proxy_model_names] = lambda: ["demo", "plain", "tiny"]
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://proxy.test") as client:
        yield client


async def chat(
    hook: MemoryHook,
    text: str,
    *,
    user: str = "alice",
    model: str = "demo",
    conversation: str | None = None,
    reply: str = "Noted.",
) -> None:
    """One chat turn through the hook (pre-call, then post-call with ``reply``)."""
    metadata = {"conversation_id": conversation} if conversation else {}
    data = chat_request(text, user=user, model=model, call_id=uuid.uuid4().hex, metadata=metadata)
    data = await hook.async_pre_call_hook(Auth(), None, data, "acompletion") or data
    await hook.async_post_call_success_hook(data, Auth(), model_response(reply))
    await hook.drain()


async def snapshot(client: aioredis.Redis, prefix: str) -> dict[bytes, Any]:
    """Every key of the test with its serialized value, and the due set."""
    found: dict[bytes, Any] = {}
    async for key in client.scan_iter(match=f"{prefix}:*", count=1000):
        found[key] = await client.dump(key)
    return found


Q = {"user": "alice", "model": "demo"}


@pytest.mark.redis
async def test_preview_is_what_the_hook_sends_and_writes_nothing(
    hook: MemoryHook, http: httpx.AsyncClient, real_redis: aioredis.Redis, prefix: str
) -> None:
    """The preview's messages are the hook's rebuild for that message (system message with the
    pinned memory, the window, the new message last), with sizes per layer; no key changes."""
    await chat(hook, "My cat is called Miso.")
    await chat(hook, "I live in Pune.")
    pinned = await http.post("/memory/v1/pinned", json={**Q, "text": "I am <b>vegetarian</b>."})
    assert pinned.status_code == 201
    before = await snapshot(real_redis, prefix)
    ttl_before = await real_redis.pttl(f"{prefix}:{{master:alice}}:c:demo:turns")

    answer = await http.get("/memory/v1/preview", params={**Q, "message": "What do I eat?"})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    # the cache layout's tail (a system message just before the question) aside
    shown = [m for m in body["messages"] if not is_tail(m["message"])]
    assert is_tail(body["messages"][-2]["message"])
    roles = [m["role"] for m in shown]
    assert roles[-5:] == ["user", "assistant", "user", "assistant", "user"]
    assert set(roles[:-5]) == {"system"}
    assert body["messages"][-1]["text"] == "What do I eat?"
    assert body["messages"][-1]["message"] == {"role": "user", "content": "What do I eat?"}
    system = "\n".join(m["text"] for m in body["messages"] if m["role"] == "system")
    assert "I am ‹b›vegetarian‹/b›." in system  # escaped as data, exactly as the hook does
    assert body["layers"]["fixed_memories"] > 0
    assert body["layers"]["window"] == sum(len(m["text"]) for m in shown[-5:])
    assert body["total_chars"] == sum(len(m["text"]) for m in body["messages"])
    assert body["stored_turns"] == 4
    assert body["placeholder"] is False

    # the hook itself, read-only, gives the same messages
    data = chat_request("What do I eat?", user="alice", metadata={"memory_mode": "read_only"})
    data = await hook.async_pre_call_hook(Auth(), None, data, "acompletion") or data
    assert [m["message"] for m in body["messages"]] == data["messages"]

    assert await snapshot(real_redis, prefix) == before
    assert await real_redis.pttl(f"{prefix}:{{master:alice}}:c:demo:turns") <= ttl_before


@pytest.mark.redis
@pytest.mark.redis
async def test_preview_shows_the_turns_waiting_in_the_outage_buffer(
    hook: MemoryHook, http: httpx.AsyncClient
) -> None:
    """A turn answered while Redis refused writes waits in this proxy's outage buffer; the next
    request has it in its window, and so has the preview (fresh-user report: the preview left
    it out, though the page promises the next request exactly as the model receives it)."""
    await chat(hook, "My cat is called Miso.")
    gate = asyncio.Event()
    write = hook.engine.buffer._write

    async def held(item: Any) -> None:  # Redis still refuses it
        await gate.wait()
        await write(item)

    hook.engine.buffer._write = held
    hook.engine.health.trip()  # the write goes to the buffer, as when Redis is down
    data = chat_request("I moved to Goa.", user="alice", call_id="b1")
    data = await hook.async_pre_call_hook(Auth(), None, data, "acompletion") or data
    await hook.async_post_call_success_hook(data, Auth(), model_response("Goa is lovely."))
    assert len(hook.engine.buffer) == 1
    hook.engine.health.ok()
    params = {**Q, "message": "Where do I live?"}
    body = (await http.get("/memory/v1/preview", params=params)).json()
    window = [m["text"] for m in body["messages"] if m["role"] != "system"]
    assert window == [
        "My cat is called Miso.",
        "Noted.",
        "I moved to Goa.",
        "Goa is lovely.",
        "Where do I live?",
    ]
    nxt = chat_request("Where do I live?", user="alice", metadata={"memory_mode": "read_only"})
    nxt = await hook.async_pre_call_hook(Auth(), None, nxt, "acompletion") or nxt
    assert [m["message"] for m in body["messages"]] == nxt["messages"]
    gate.set()


async def test_preview_placeholder_and_recall(hook: MemoryHook, http: httpx.AsyncClient) -> None:
    """Without a message the preview uses a placeholder; a message recalls older lines outside
    the window (alias ``tiny``: 4 messages)."""
    await chat(hook, "My sister Seema studies medicine in Manipal.", model="tiny")
    for i in range(4):
        await chat(hook, f"Small talk number {i} about the weather.", model="tiny")
    bare = (await http.get("/memory/v1/preview", params={**Q, "model": "tiny"})).json()
    assert bare["placeholder"] is True
    assert bare["messages"][-1]["text"] == "(next message)"
    assert bare["recalled"] == []
    asked = await http.get(
        "/memory/v1/preview",
        params={**Q, "model": "tiny", "message": "What does Seema study?"},
    )
    body = asked.json()
    assert [t["text"] for t in body["recalled"]] == ["My sister Seema studies medicine in Manipal."]
    assert body["layers"]["earlier_lines"] > 0


@pytest.mark.redis
async def test_conversations_turns_and_queue(hook: MemoryHook, http: httpx.AsyncClient) -> None:
    """The user's conversations (raw ids, also hashed ones), the last turns of one, and its
    place in the due queue; a flush moves it to now."""
    await chat(hook, "Hello from the default chat.")
    await chat(hook, "Planning a trip to Goa.", conversation="trip")
    await chat(hook, "Notes with spaces.", conversation="notes: 2024 / Q1")
    listing = await http.get("/memory/v1/conversations", params=Q)
    assert listing.status_code == 200, listing.text
    found = {c["id"]: c for c in listing.json()["conversations"]}
    assert set(found) == {"demo", "trip", "notes: 2024 / Q1"}
    assert found["trip"]["alias"] == "demo"
    assert found["trip"]["turns"] == 2
    assert found["trip"]["seq"] == 2
    assert found["trip"]["updated_ms"] >= found["trip"]["created_ms"] > 0

    turns = await http.get(
        "/memory/v1/turns", params={**Q, "conversation": "notes: 2024 / Q1", "limit": 1}
    )
    assert turns.json()["total"] == 2
    assert [(t["seq"], t["role"], t["text"]) for t in turns.json()["turns"]] == [
        (2, "assistant", "Noted.")
    ]
    all_turns = (await http.get("/memory/v1/turns", params={**Q, "conversation": "trip"})).json()
    assert [t["text"] for t in all_turns["turns"]] == ["Planning a trip to Goa.", "Noted."]

    queue = (await http.get("/memory/v1/queue", params={**Q, "conversation": "trip"})).json()
    assert queue["queued"] == 3
    assert queue["due_ms"] > queue["now_ms"]  # after the quiet time
    assert queue["position"] in (1, 2, 3)
    assert queue["overdue"] == 0
    assert queue["leased"] is False
    flushed = await http.post("/memory/v1/flush", json={**Q, "conversation": "trip"})
    assert flushed.status_code == 202
    queue = (await http.get("/memory/v1/queue", params={**Q, "conversation": "trip"})).json()
    assert queue["position"] == 1
    assert queue["overdue"] == 1
    assert queue["due_ms"] <= queue["now_ms"]


@pytest.mark.redis
async def test_queue_of_an_unscheduled_conversation(http: httpx.AsyncClient) -> None:
    """A conversation with nothing stored is not in the queue."""
    queue = (await http.get("/memory/v1/queue", params=Q)).json()
    assert (queue["due_ms"], queue["position"], queue["queued"]) == (None, None, 0)
    assert (await http.get("/memory/v1/conversations", params=Q)).json() == {"conversations": []}
    empty = (await http.get("/memory/v1/turns", params=Q)).json()
    assert empty == {"turns": [], "total": 0}


@pytest.mark.redis
async def test_another_tenant_sees_nothing(
    hook: MemoryHook, http: httpx.AsyncClient, real_redis: aioredis.Redis, prefix: str
) -> None:
    """Team b's key naming the same user sees none of the master tenant's data."""
    await chat(hook, "My cat is called Miso.")
    await http.post("/memory/v1/pinned", json={**Q, "text": "Secret of the master tenant."})
    b = {TENANT_HEADER: "b"}
    assert (await http.get("/memory/v1/conversations", params=Q, headers=b)).json() == {
        "conversations": []
    }
    assert (await http.get("/memory/v1/turns", params=Q, headers=b)).json()["total"] == 0
    preview = (await http.get("/memory/v1/preview", params=Q, headers=b)).json()
    text = " ".join(m["text"] for m in preview["messages"])
    assert "Secret" not in text and "Miso" not in text
    assert preview["stored_turns"] == 0
    queue = (await http.get("/memory/v1/queue", params=Q, headers=b)).json()
    assert queue["position"] is None
    assert await real_redis.zcard(due_key(prefix)) == 1  # the master tenant's only


@pytest.mark.redis
async def test_bad_input_and_models(http: httpx.AsyncClient) -> None:
    """Unknown aliases and placeholder users are 400 naming the problem; the models route lists
    the memory-enabled aliases of the proxy."""
    for params, word in (
        ({**Q, "model": "plain"}, "memory-enabled"),
        ({**Q, "user": "default_user_id"}, "user"),
    ):
        for path in ("preview", "conversations", "turns", "queue"):
            answer = await http.get(f"/memory/v1/{path}", params=params)
            assert answer.status_code == 400, (path, answer.text)
            assert word in answer.json()["detail"]
    too_many = await http.get("/memory/v1/turns", params={**Q, "limit": 1000})
    assert too_many.status_code == 422
    models = (await http.get("/memory/v1/models")).json()["models"]
    assert [(m["name"], m["namespace"], m["memory_scope"]) for m in models] == [
        ("demo", "demo", "user"),
        ("tiny", "tiny", "user"),
    ]


async def test_redis_down_is_503(prefix: str) -> None:
    """Redis not answering: the JSON routes answer 503, never 500."""
    dead = aioredis.from_url(
        f"redis://127.0.0.1:{free_port()}/0", socket_timeout=0.2, socket_connect_timeout=0.2
    )
    hook = make_hook(dead, prefix)
    app = FastAPI()
    ui.include_once(app, ui.router)
    app.dependency_overrides[routes.memory_auth] = fake_auth
    app.dependency_overrides[routes.current_hook] = lambda: hook
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://proxy.test") as client:
        for path in ("preview", "conversations", "turns", "queue"):
            answer = await client.get(f"/memory/v1/{path}", params=Q)
            assert answer.status_code == 503, (path, answer.text)
    await dead.aclose()


# -- the page -----------------------------------------------------------------------------------


async def test_page_and_assets(http: httpx.AsyncClient) -> None:
    """The page needs no key and holds no data; it names its own script and style, under a
    strict Content-Security-Policy (no inline script); unknown assets are 404."""
    page = await http.get("/memory/ui")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert page.headers["content-security-policy"] == ui.PAGE_CSP
    assert "script-src 'self'" in ui.PAGE_CSP and "unsafe-inline" not in ui.PAGE_CSP
    assert page.headers["x-content-type-options"] == "nosniff"
    assert '<script src="/memory/ui/inspector.js" defer></script>' in page.text
    assert 'data-api="/memory/v1"' in page.text
    assert re.search(r"<script>", page.text) is None  # no inline script
    script = await http.get("/memory/ui/inspector.js")
    assert script.status_code == 200
    assert script.headers["content-type"].startswith("text/javascript")
    style = await http.get("/memory/ui/inspector.css")
    assert style.headers["content-type"].startswith("text/css")
    assert (await http.get("/memory/ui/other.js")).status_code == 404
    assert (await http.get("/memory/ui/..%2Fui.py")).status_code == 404


async def test_page_under_a_root_path(hook: MemoryHook) -> None:
    """Behind a path prefix (LiteLLM's SERVER_ROOT_PATH), the page's links carry it."""
    app = FastAPI()
    ui.include_once(app, ui.router)
    transport = httpx.ASGITransport(app=app, root_path="/proxy")
    async with httpx.AsyncClient(transport=transport, base_url="http://proxy.test") as client:
        page = await client.get("/proxy/memory/ui")
    assert '<script src="/proxy/memory/ui/inspector.js" defer></script>' in page.text
    assert 'data-api="/proxy/memory/v1"' in page.text


def test_script_never_writes_html() -> None:
    """Data reaches the page as text only: the script has no HTML sinks."""
    script = (STATIC / "inspector.js").read_text()
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
        assert sink not in script, sink
    assert "localStorage" not in script  # the key stays in the tab's sessionStorage


def test_static_files_are_package_data() -> None:
    """The page's files sit inside the package folder: hatch puts them in the wheel."""
    for name in ("inspector.html", "inspector.js", "inspector.css"):
        assert (STATIC / name).is_file(), name
