"""The extraction worker says a Redis refusal for what it is (issue 27 item 2, field case E07).

A private redis-server with ACL users: one without the due set's key, one without
``@scripting``. The polling worker must not log the refusal as "Redis unreachable" once and then
go quiet forever: it names the permission, once per ``redis_refusal_log_s`` with how many polls
it refused meanwhile, counts it by kind, and extracts again as soon as the permission is granted.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from litellm_memory_hook.extraction.worker import ExtractionWorker
from litellm_memory_hook.store.client import redis_client
from litellm_memory_hook.store.errors import RedisFault
from litellm_memory_hook.store.keys import due_key
from tests.integration.test_worker import ScriptedModel, _lookup, _memories, _reply, _talk
from tests.support.hook_calls import make_hook
from tests.support.redis_servers import (
    RedisServer,
    add_acl_user,
    free_ports,
    redis_binaries,
    set_acl_rules,
)

pytestmark = pytest.mark.skipif(redis_binaries() is None, reason="redis-server not installed")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisServer]:
    """A private Redis (ACL users need a server of our own), stopped afterwards."""
    [port] = free_ports(1)
    srv = RedisServer(tmp_path / "redis", port).start()
    yield srv
    srv.stop()


def _worker(client: aioredis.Redis, prefix: str, model: Any, **settings: Any) -> ExtractionWorker:
    from litellm_memory_hook.settings import MemorySettings

    return ExtractionWorker(
        client,
        MemorySettings(
            key_prefix=prefix,
            extraction_poll_s=0.05,
            extraction_heartbeat_s=0.2,
            redis_refusal_log_s=0.4,
            **settings,
        ),
        model,
        alias_lookup=_lookup,
    )


async def _due_conversation(server: RedisServer, prefix: str) -> aioredis.Redis:
    """An admin client, and a conversation whose extraction is due (14 stored messages)."""
    admin = redis_client(server.url)
    hook = make_hook(admin, prefix)
    await _talk(hook, 7)
    await hook.drain()
    assert await admin.zcard(due_key(prefix)) == 1
    return admin


async def _run_for(worker: ExtractionWorker, seconds: float) -> asyncio.Task[None]:
    task = asyncio.create_task(worker.run_forever())
    await asyncio.sleep(seconds)
    return task


async def _stop(worker: ExtractionWorker, task: asyncio.Task[None]) -> None:
    await worker.stop()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


def _lines(caplog: pytest.LogCaptureFixture, text: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if text in r.getMessage()]


async def test_a_worker_without_the_due_set_says_the_permission_each_period_not_unreachable(
    server: RedisServer, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The user may touch the conversations' keys but not ``<prefix>:due``: every poll is
    refused with NOPERM. It is said as a missing permission naming the key, once per period
    with the count of the polls held back (not once, and never as an outage), counted by
    kind; once granted, polling resumes and the due job runs."""
    caplog.set_level(logging.INFO, logger="litellm_memory_hook")
    admin = await _due_conversation(server, prefix)
    url = add_acl_user(server, "worker", "pw", f"~{prefix}:{{*", "&*", "+@all")
    client = redis_client(url)
    model = ScriptedModel([_reply(["Has a garden."])])
    worker = _worker(client, prefix, model)
    try:
        task = await _run_for(worker, 1.3)
        said = _lines(caplog, "polling refused (noperm")
        # 1.3 s at one line per 0.4 s: the first at once, then one per period with the count
        assert 2 <= len(said) <= 4, said
        assert all("lacks a permission" in line for line in said)
        assert all(f"(noperm in read {prefix}:due)" in line for line in said), said
        assert "more since the last line" in said[-1]
        assert _lines(caplog, "unreachable") == []
        assert worker.redis_faults[RedisFault.NOPERM] >= 10  # a poll every 0.05 s
        assert worker.redis_faults[RedisFault.UNREACHABLE] == 0
        assert model.calls == []

        set_acl_rules(server, "worker", "~*")
        deadline = asyncio.get_running_loop().time() + 5
        while not await _memories(admin, prefix):
            assert asyncio.get_running_loop().time() < deadline, "the job never ran"
            await asyncio.sleep(0.05)
        assert _lines(caplog, "a poll worked again after Redis refused (noperm)") != []
        assert await _memories(admin, prefix) == ["Has a garden."]
        await _stop(worker, task)
    finally:
        await client.aclose()
        await admin.aclose()


async def test_a_worker_without_scripting_says_the_command_and_keeps_the_job(
    server: RedisServer, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    """E07 for the worker: a user allowed everything but ``@scripting``. The job's scripted
    writes are refused: said as a missing permission naming the command (never as an
    outage), rate-limited, counted; nothing of the conversation is lost and the job stays
    due."""
    caplog.set_level(logging.INFO, logger="litellm_memory_hook")
    admin = await _due_conversation(server, prefix)
    url = add_acl_user(server, "worker", "pw", "~*", "&*", "+@all", "-@scripting")
    client = redis_client(url)
    model = ScriptedModel([_reply(["Has a garden."])] * 20)
    worker = _worker(client, prefix, model)
    try:
        task = await _run_for(worker, 1.0)
        await _stop(worker, task)
        said = _lines(caplog, "refused (noperm in")
        assert said and all("no permissions to run the 'evalsha' command" in s for s in said)
        assert len(said) <= 6, said  # rate-limited per cause and period, not one per poll
        assert _lines(caplog, "unreachable") == []
        assert worker.redis_faults[RedisFault.NOPERM] >= 1
        assert await _memories(admin, prefix) == []  # nothing written half-way
        assert await admin.zcard(due_key(prefix)) == 1  # the job stays due
    finally:
        await client.aclose()
        await admin.aclose()
