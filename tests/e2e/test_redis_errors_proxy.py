"""Field case E07 through the real proxy: a Redis user allowed every command but ``@scripting``.

A private redis-server with that ACL user behind a real LiteLLM proxy and the stand-in model:
chat answers 200, the refusal is said in one clear line per period naming the command (not as
an outage), counted in ``/memory/metrics``, and no turn is dropped: once the permission is
granted, every turn is stored.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.support.harness import MASTER_KEY, stack
from tests.support.redis_servers import (
    RedisServer,
    add_acl_user,
    free_ports,
    redis_binaries,
    set_acl_rules,
)

pytestmark = pytest.mark.skipif(redis_binaries() is None, reason="redis-server not installed")

USERS = ("alice", "bob", "carol")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisServer]:
    [port] = free_ports(1)
    srv = RedisServer(tmp_path / "redis", port).start()
    yield srv
    srv.stop()


def test_a_user_without_scripting_chats_and_loses_nothing_through_the_proxy(
    server: RedisServer, tmp_path: Path
) -> None:
    """E07: every chat answers 200 with the model's reply; the log says the missing
    permission once for the reads and once for the writes (within the period), never
    'unreachable'; the refusals are counted by kind in /memory/metrics; after ``ACL SETUSER
    +@scripting`` the set-aside turns are all stored, in order."""
    url = add_acl_user(server, "memhook", "pw", "~*", "&*", "+@all", "-@scripting")
    admin = redis.Redis(port=server.port, decode_responses=True)
    with stack(
        tmp_path,
        stem="e7",
        redis_env={"REDIS_URL": url},
        keys=admin,
        memory={"write_buffer": {"refused_retry_s": 0.5}},
    ) as running:
        client = running.openai()
        for user in USERS:
            reply = client.chat.completions.create(
                model="demo", user=user, messages=[{"role": "user", "content": f"I am {user}."}]
            )
            assert reply.choices[0].message.content == f"Noted: I am {user}."
        time.sleep(2.0)  # the set-aside writes are tried again a few times
        log = running.log.read_text()
        said = [line for line in log.splitlines() if "lacks a permission" in line]
        assert len(said) == 2, said
        assert all("no permissions to run the 'evalsha' command" in line for line in said)
        assert "Redis is unreachable" not in log
        assert all(running.turns(user) == [] for user in USERS)  # not stored yet, but held
        metrics = running.http.get(
            f"{running.proxy}/memory/metrics", headers={"Authorization": f"Bearer {MASTER_KEY}"}
        ).text
        counted = re.search(
            r'litellm_memory_redis_refusals_total\{kind="noperm"[^}]*\} (\S+)', metrics
        )
        assert counted is not None and float(counted.group(1)) >= 6  # 3 reads, 3+ writes

        set_acl_rules(server, "memhook", "+@scripting")
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and not all(len(running.turns(u)) == 2 for u in USERS):
            time.sleep(0.2)
        for user in USERS:
            assert [t["text"] for t in running.turns(user)] == [
                f"I am {user}.",
                f"Noted: I am {user}.",
            ]
        assert "dropped" not in running.log.read_text()
