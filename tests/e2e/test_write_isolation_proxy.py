"""No write blocks the others, through the real proxy (issue 27 item 6).

One user's turns key holds a string (a poisoned key): that user's chat still answers 200 and
their writes are set aside; every other user's turns are stored (before, 0 of 100 were, while
chat answered 200).
"""

from __future__ import annotations

import time
from pathlib import Path

from tests.support.harness import stack

OTHERS = [f"user-{i:02d}" for i in range(20)]


def test_one_poisoned_key_leaves_every_other_users_writes_stored_through_the_proxy(
    tmp_path: Path,
) -> None:
    with stack(tmp_path, stem="wi") as running:
        poisoned = f"{running.prefix}:{{master:poisoned}}:c:demo:turns"
        running.redis.set(poisoned, "not a sorted set")
        client = running.openai()
        for user in ["poisoned", *OTHERS, "poisoned"]:
            reply = client.chat.completions.create(
                model="demo", user=user, messages=[{"role": "user", "content": f"hi from {user}"}]
            )
            assert reply.choices[0].message.content == f"Noted: hi from {user}"
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and not all(len(running.turns(u)) == 2 for u in OTHERS):
            time.sleep(0.2)
        for user in OTHERS:
            assert [t["text"] for t in running.turns(user)] == [
                f"hi from {user}",
                f"Noted: hi from {user}",
            ]
        assert running.redis.get(poisoned) == "not a sorted set"
        log = running.log.read_text()
        set_aside = [
            line for line in log.splitlines() if "master:poisoned:demo are set aside" in line
        ]
        assert len(set_aside) == 1, set_aside
        assert "another type" in set_aside[0]
