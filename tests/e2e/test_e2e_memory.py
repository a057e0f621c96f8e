"""End to end, issue 7: the extraction loop and the memory API through a real LiteLLM proxy.

A real proxy process (the package's config.yaml with a short quiet time, two tenants through
``custom_auth``), the stand-in model answering extraction calls (scripted), a real Redis and the
``openai`` client: messages lead to a job in the proxy's own worker, the next request carries the
new memories and summary; quiet and flush trigger jobs; pinned memories written over HTTP reach
the model exactly as typed and no job changes them; a second tenant never sees the first's.
"""

from __future__ import annotations

import json
import shutil
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from litellm_memory_hook.core.models import stored_text
from litellm_memory_hook.store.keys import due_key
from tests.support import harness
from tests.support.paths import SUPPORT
from tests.support.prompt_view import memory_text

KEY_A, KEY_B = "sk-tenant-a", "sk-tenant-b"


class MemoryStack(harness.Running):
    """The processes and clients of these tests."""

    def client(self, key: str = KEY_A) -> openai.OpenAI:
        """An openai client of the proxy with a tenant's key."""
        return self.openai(key)

    def extraction_requests(self) -> list[dict[str, Any]]:
        """Extraction calls the stand-in received."""
        return list(self.standin.get("/_standin/extraction_requests").json())

    def script_extraction(self, *replies: Any) -> None:
        """Queue replies for extraction calls, once the jobs of earlier steps are done
        (:meth:`settle`): the stand-in answers extraction calls from one queue, so a late job of
        an earlier step would take a reply queued for the next one."""
        self.settle()
        self.standin.post("/_standin/extraction_replies", json=list(replies)).raise_for_status()

    def settle(self, quiet_s: float = 1.5, timeout_s: float = 30.0) -> None:
        """Wait until no extraction job is due or running: the due set is empty and the stand-in
        received no extraction call for ``quiet_s`` seconds (more than the 1 s quiet trigger and
        the 0.2 s poll of this stack)."""
        deadline = time.monotonic() + timeout_s
        count, since = len(self.extraction_requests()), time.monotonic()
        while time.monotonic() < deadline:
            time.sleep(0.1)
            seen = len(self.extraction_requests())
            if seen != count:
                count, since = seen, time.monotonic()
            elif not self.redis.zcard(due_key(self.prefix)) and time.monotonic() - since >= quiet_s:
                return
        pytest.fail(f"extraction jobs still due or running after {timeout_s} s")

    def wait_extractions(self, count: int, timeout_s: float = 20.0) -> list[dict[str, Any]]:
        """Wait until the stand-in has received ``count`` extraction calls."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            found = self.extraction_requests()
            if len(found) >= count:
                return found
            time.sleep(0.1)
        pytest.fail(f"{count} extraction call(s) expected; log:\n{self.log.read_text()[-3000:]}")

    def api(self, method: str, path: str, key: str = KEY_A, **kwargs: Any) -> httpx.Response:
        """Call the memory API with a tenant's key."""
        headers = {"Authorization": f"Bearer {key}"}
        return self.http.request(method, f"{self.proxy}/memory/v1{path}", headers=headers, **kwargs)


@pytest.fixture(scope="module")
def mstack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MemoryStack]:
    """Stand-in + proxy with a 1 s quiet trigger and two tenants (custom_auth)."""
    folder = tmp_path_factory.mktemp("e2e-memory")
    shutil.copy(SUPPORT / "custom_auth_two_tenants.py", folder / "custom_auth_two_tenants.py")
    with harness.stack(
        folder,
        stem="e2m",
        kind=MemoryStack,
        memory={"extraction": {"quiet_s": 1.0, "poll_s": 0.2}},
        general={"custom_auth": "custom_auth_two_tenants.user_api_key_auth"},
    ) as running:
        yield running


def _user() -> str:
    return "u" + uuid.uuid4().hex[:8]


def _extraction(memories: list[str], summary: str) -> str:
    return json.dumps({"memories": memories, "summary": summary})


def _system(body: dict[str, Any]) -> str:
    return memory_text(body["messages"])


def test_thirteen_messages_lead_to_one_job_and_the_next_request_carries_it(
    mstack: MemoryStack,
) -> None:
    """13 messages since the cursor (past the 12-message trigger) make one extraction call in
    the proxy's own worker; its memories reach the head of the user's next conversation at once
    and of this one at its next epoch (the cache layout); the extraction call itself got no
    memory and was not stored."""
    user = _user()
    client = mstack.client()
    before = len(mstack.extraction_requests())
    mstack.script_extraction(
        _extraction(["Has a cat called Miso.", "Lives in Pune."], "They talked about Miso.")
    )
    for i in range(7):  # 7 turns = 14 stored messages; the 13th message crosses the trigger
        client.chat.completions.create(
            model="demo",
            user=user,
            messages=[{"role": "user", "content": f"turn {i}: my cat Miso"}],
        )
    calls = mstack.wait_extractions(before + 1)
    assert len(calls) == before + 1
    extraction = calls[-1]
    assert _system(extraction).startswith("[memory-extraction]")
    assert "user" not in extraction or not extraction.get("user")
    assert "turn 0: my cat Miso" in json.dumps(extraction, ensure_ascii=False)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        meta = mstack.redis.hgetall(f"{mstack.prefix}:{{team-a:{user}}}:c:demo:meta")
        if meta.get("summary"):
            break
        time.sleep(0.1)
    assert meta["summary"] == "They talked about Miso."
    client.chat.completions.create(
        model="demo", user=user, messages=[{"role": "user", "content": "Where do I live?"}]
    )
    body = mstack.chat_calls()[-1]
    # the cache layout: the job's memories and summary wait for the conversation's next epoch
    # (its window still holds the turns they were drawn from), so the prompt's head stays the
    # provider's cached prefix; the tail adds a memory that shares words with the question ...
    head = str(body["messages"][0]["content"])
    assert "Lives in Pune." not in head and "They talked about Miso." not in head
    assert "Lives in Pune." in _system(body) and "They talked about Miso." not in _system(body)
    # ... and a new conversation of the user starts with the newest memories (the summary is
    # the other conversation's)
    client.chat.completions.create(
        model="demo",
        user=user,
        messages=[{"role": "user", "content": "Where do I live?"}],
        extra_body={"metadata": {"conversation_id": "another"}},
    )
    system = _system(mstack.chat_calls()[-1])
    assert "Lives in Pune." in system and "They talked about Miso." not in system
    turns = mstack.redis.zrange(f"{mstack.prefix}:{{team-a:{user}}}:c:demo:turns", 0, -1)
    assert not any("memory-extraction" in t for t in turns)


def test_quiet_and_flush_each_trigger_a_job(mstack: MemoryStack) -> None:
    """One message and 1 s of quiet (configured) trigger a job; metadata.memory_flush and the
    HTTP flush each trigger one at once."""
    client = mstack.client()
    user = _user()
    before = len(mstack.extraction_requests())
    mstack.script_extraction(_extraction(["Likes tea."], "Tea."))
    client.chat.completions.create(
        model="demo", user=user, messages=[{"role": "user", "content": "I like tea."}]
    )
    mstack.wait_extractions(before + 1, timeout_s=10)

    user2 = _user()
    mstack.script_extraction(_extraction(["Plays chess."], "Chess."))
    client.chat.completions.create(
        model="demo",
        user=user2,
        messages=[{"role": "user", "content": "I play chess."}],
        extra_body={"metadata": {"memory_flush": True}},
    )
    mstack.wait_extractions(before + 2, timeout_s=3)

    mstack.script_extraction(_extraction(["Plays chess.", "Plays on Sundays."], "Chess."))
    client.chat.completions.create(
        model="demo", user=user2, messages=[{"role": "user", "content": "On Sundays."}]
    )
    flushed = mstack.api("POST", "/flush", json={"user": user2, "model": "demo"})
    assert flushed.status_code == 202, flushed.text
    mstack.wait_extractions(before + 3, timeout_s=3)


def test_pinned_memories_reach_the_model_exactly_and_jobs_never_change_them(
    mstack: MemoryStack,
) -> None:
    """A memory pinned over HTTP reaches the model exactly as typed (as data), is shown to the
    extractor as fixed, and survives a job whose reply repeats and rewrites it."""
    client = mstack.client()
    user = _user()
    typed = "मेरी बहन का नाम सीमा है — she lives in Pune (since 2019)"
    created = mstack.api("POST", "/pinned", json={"user": user, "model": "demo", "text": typed})
    assert created.status_code == 201, created.text
    item = created.json()
    mstack.script_extraction(_extraction([typed, "Sister Seema moved to Delhi."], "Family."))
    before = len(mstack.extraction_requests())
    client.chat.completions.create(
        model="demo",
        user=user,
        messages=[{"role": "user", "content": "सीमा कहाँ रहती है?"}],
        extra_body={"metadata": {"memory_flush": True}},
    )
    assert typed in _system(mstack.chat_calls()[-1])
    extraction = mstack.wait_extractions(before + 1)[-1]
    assert typed in json.dumps(extraction, ensure_ascii=False)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        listing = mstack.api("GET", "/memories", params={"user": user, "model": "demo"}).json()
        if listing["memories"]:
            break
        time.sleep(0.1)
    assert listing["pinned"] == [{**item}] or [p["text"] for p in listing["pinned"]] == [typed]
    assert [m["text"] for m in listing["memories"]] == ["Sister Seema moved to Delhi."]


def test_a_second_tenant_never_reads_or_changes_the_first_tenants_memories(
    mstack: MemoryStack,
) -> None:
    """The same user id under two keys (two tenants by custom_auth): tenant B lists nothing of
    tenant A's, gets 404 editing or deleting A's ids, and its chat requests carry none of A's
    memories; a missing or wrong key gets 401, bad input a 4xx naming the problem."""
    user = _user()
    pinned = mstack.api("POST", "/pinned", json={"user": user, "model": "demo", "text": "Secret A"})
    assert pinned.status_code == 201
    item_id = pinned.json()["id"]
    listing_b = mstack.api("GET", "/memories", KEY_B, params={"user": user, "model": "demo"})
    assert listing_b.status_code == 200 and listing_b.json()["pinned"] == []
    for method, path, body in (
        ("PATCH", f"/pinned/{item_id}", {"user": user, "model": "demo", "text": "hacked"}),
        ("DELETE", f"/pinned/{item_id}", None),
    ):
        answer = mstack.api(method, path, KEY_B, json=body, params={"user": user, "model": "demo"})
        assert answer.status_code in (403, 404), answer.text
    mstack.client(KEY_B).chat.completions.create(
        model="demo", user=user, messages=[{"role": "user", "content": "What is my secret?"}]
    )
    assert "Secret A" not in _system(mstack.chat_calls()[-1])
    listing_a = mstack.api("GET", "/memories", params={"user": user, "model": "demo"}).json()
    assert [p["text"] for p in listing_a["pinned"]] == ["Secret A"]
    assert (
        mstack.http.get(
            f"{mstack.proxy}/memory/v1/memories", params={"user": user, "model": "demo"}
        ).status_code
        == 401
    )
    assert (
        mstack.api(
            "GET", "/memories", "sk-wrong", params={"user": user, "model": "demo"}
        ).status_code
        == 401
    )
    empty = mstack.api("POST", "/pinned", json={"user": user, "model": "demo", "text": "  "})
    assert empty.status_code == 400 and "text" in empty.text
    schema = mstack.http.get(f"{mstack.proxy}/openapi.json").json()
    assert "/memory/v1/pinned" in schema["paths"]


def test_the_same_user_under_two_tenants_never_shares_chat_or_recall(mstack: MemoryStack) -> None:
    """Issue 9 item 9: one ``user`` id under two keys that custom_auth maps to two tenants.
    Tenant A's history (seeded by a whole-history request, long enough that the secret line is
    only reachable by recall) is recalled for A, and for B never: not in the window, not
    recalled, not as a memory; B's turns and pinned memories stay B's; neither tenant's writes
    change the other's keys."""
    user = _user()
    filler = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"we talked about trains {i}"}
        for i in range(60)
    ]
    history = [
        {"role": "user", "content": "My locker code is 4711 and my dog is Bruno."},
        {"role": "assistant", "content": "Noted."},
        *filler,
        {"role": "user", "content": "Tell me about trains."},
    ]
    client_a, client_b = mstack.client(KEY_A), mstack.client(KEY_B)
    client_a.chat.completions.create(model="demo", user=user, messages=history)  # type: ignore[arg-type]
    client_a.chat.completions.create(
        model="demo", user=user, messages=[{"role": "user", "content": "What is my locker code?"}]
    )
    seen_by_a = json.dumps(mstack.chat_calls()[-1], ensure_ascii=False)
    assert "4711" in seen_by_a.split("<earlier_lines>")[1]  # recalled, outside the window

    pinned = mstack.api(
        "POST", "/pinned", KEY_B, json={"user": user, "model": "demo", "text": "B likes jazz."}
    )
    assert pinned.status_code == 201, pinned.text
    for text in ("What is my locker code?", "What is my dog called?"):
        client_b.chat.completions.create(
            model="demo", user=user, messages=[{"role": "user", "content": text}]
        )
        seen_by_b = json.dumps(mstack.chat_calls()[-1], ensure_ascii=False)
        assert "4711" not in seen_by_b and "Bruno" not in seen_by_b and "trains" not in seen_by_b
        assert "B likes jazz." in seen_by_b
    client_a.chat.completions.create(
        model="demo", user=user, messages=[{"role": "user", "content": "Any music for me?"}]
    )
    assert "B likes jazz." not in json.dumps(mstack.chat_calls()[-1], ensure_ascii=False)

    turns_a = mstack.redis.zrange(f"{mstack.prefix}:{{team-a:{user}}}:c:demo:turns", 0, -1)
    turns_b = mstack.redis.zrange(f"{mstack.prefix}:{{team-b:{user}}}:c:demo:turns", 0, -1)
    assert len(turns_a) == len(history) + 1 + 2 + 2  # the seed, its reply, two more pairs
    assert [stored_text(json.loads(t)) for t in turns_b] == [
        "What is my locker code?",
        "Noted: What is my locker code?",
        "What is my dog called?",
        "Noted: What is my dog called?",
    ]
    summary_b = mstack.api("GET", "/summary", KEY_B, params={"user": user, "model": "demo"})
    assert summary_b.status_code == 200 and summary_b.json()["seq"] == 4
