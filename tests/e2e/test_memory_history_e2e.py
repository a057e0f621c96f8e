"""Issue 27 item 5 end to end: through a real LiteLLM proxy (its own extraction worker), the
stand-in model answering scripted extraction replies, and a real Redis.

Field case: through a real proxy, a valid extraction reply ``{"memories": []}`` emptied every
user's memory set (24 of 24). Here the same reply leaves the set whole; a reply deleting every
memory (with reasons) removes one of five (20% of 5, at least 1 for an explicit delete); the
removed memory is listed by ``GET /memory/v1/history`` and comes back exactly through ``POST
/memory/v1/history/{id}/restore``.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from litellm_memory_hook.store.keys import due_key
from tests.support import harness

FACTS = [
    "User has a cat called Miso",
    "User's sister Seema lives in Pune",
    "User works at Infosys",
    "User plays chess on Sundays",
    "User is learning Kannada",
]


class HistoryStack(harness.Running):
    """The processes of these tests, with the memory API and extraction helpers."""

    def extraction_count(self) -> int:
        return len(self.standin.get("/_standin/extraction_requests").json())

    def api(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {harness.MASTER_KEY}"}
        return self.http.request(method, f"{self.proxy}/memory/v1{path}", headers=headers, **kwargs)

    def extract(self, user: str, text: str, reply: dict[str, Any]) -> None:
        """Queue ``reply`` for the next extraction call, send ``text`` with a flush, and wait
        until that job has run and left the due set."""
        before = self.extraction_count()
        self.standin.post("/_standin/extraction_replies", json=[json.dumps(reply)])
        client = self.openai()
        client.chat.completions.create(
            model="demo",
            user=user,
            messages=[{"role": "user", "content": text}],
            extra_body={"metadata": {"memory_flush": True}},
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.extraction_count() > before and not self.redis.zcard(due_key(self.prefix)):
                time.sleep(0.3)  # the commit follows the call
                return
            time.sleep(0.1)
        pytest.fail(f"no extraction job ran; log:\n{self.log.read_text()[-3000:]}")

    def memories(self, user: str) -> dict[str, str]:
        listing = self.api("GET", "/memories", params={"user": user, "model": "demo"})
        assert listing.status_code == 200, listing.text
        return {m["id"]: m["text"] for m in listing.json()["memories"]}


@pytest.fixture(scope="module")
def hstack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HistoryStack]:
    """Stand-in + proxy (its in-proxy worker polling every 0.2 s)."""
    folder = tmp_path_factory.mktemp("e2e-history")
    with harness.stack(
        folder,
        stem="e2h",
        kind=HistoryStack,
        memory={"extraction": {"quiet_s": 60.0, "poll_s": 0.2}},
    ) as running:
        yield running


def test_no_reply_erases_memories_and_a_removed_one_is_restored(hstack: HistoryStack) -> None:
    """Five memories; ``{"memories": []}`` keeps all five; deleting all five removes one (the
    bound), which the history lists and a restore brings back with its id and text."""
    user = "u" + uuid.uuid4().hex[:8]
    hstack.extract(user, "Let me tell you about me.", {"memories": FACTS, "summary": "Intro."})
    stored = hstack.memories(user)
    assert sorted(stored.values()) == sorted(FACTS)

    hstack.extract(user, "Nothing new.", {"memories": [], "summary": "Intro."})
    assert hstack.memories(user) == stored
    stats = hstack.redis.hgetall(f"{hstack.prefix}:stats")
    assert int(stats["deletes_refused"]) >= 5

    deletes = [{"old": fact, "because": "The user said it is false"} for fact in FACTS]
    hstack.extract(user, "All of that was a lie.", {"delete": deletes, "summary": "Intro."})
    left = hstack.memories(user)
    assert len(left) == 4
    (gone_id,) = set(stored) - set(left)
    history = hstack.api("GET", "/history", params={"user": user, "model": "demo"})
    assert history.status_code == 200, history.text
    (entry,) = history.json()["history"]
    assert (entry["memory_id"], entry["text"]) == (gone_id, stored[gone_id])
    assert entry["reason"] == "delete" and entry["by"] == "The user said it is false"

    restored = hstack.api(
        "POST", f"/history/{entry['id']}/restore", json={"user": user, "model": "demo"}
    )
    assert restored.status_code == 200, restored.text
    assert (restored.json()["id"], restored.json()["text"]) == (gone_id, stored[gone_id])
    assert hstack.memories(user) == stored
    assert hstack.api("GET", "/history", params={"user": user, "model": "demo"}).json() == {
        "history": []
    }
    assert int(hstack.redis.hget(f"{hstack.prefix}:stats", "memories_restored")) == 1
