"""Extraction worker liveness: every running worker's heartbeat in Redis (``mem:{workers}``),
read by the metrics, `litellm-memory doctor` / `stats` and the queue route; on fakeredis and on
the real Redis (REDIS_URL). Real worker and proxy processes: tests/e2e/test_worker_heartbeat.py."""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

import pytest
import redis.asyncio as aioredis

from litellm_memory_hook.extraction.worker import ExtractionWorker
from litellm_memory_hook.proxy.metrics import HookMetrics
from litellm_memory_hook.settings import MemorySettings, parse_alias_config
from litellm_memory_hook.store.keys import (
    ConversationKeys,
    due_key,
    worker_beat_key,
    workers_index_key,
)
from litellm_memory_hook.store.queue import ExtractionQueue
from litellm_memory_hook.store.workers import (
    HEARTBEAT_TTL_BEATS,
    INDEX_KEEP_BEATS,
    KIND_PROXY,
    KIND_STANDALONE,
    WorkerBeat,
    WorkerHealth,
    read_workers,
    worker_health,
    write_beat,
)
from litellm_memory_hook.tools import cli
from litellm_memory_hook.tools.cli_doctor_redis import WORKERS_CHECK, workers_check
from litellm_memory_hook.tools.cli_memory import register
from tests.support.hook_calls import ALIASES, make_hook

register(cli.app)

#: a short heartbeat interval, so that a killed worker ages out within a second.
BEAT_S = 0.2


def _beat(
    worker: str = "h:1:aa", *, at_ms: int, interval_ms: int = 200, **fields: Any
) -> WorkerBeat:
    return WorkerBeat(
        id=worker,
        kind=fields.pop("kind", KIND_STANDALONE),
        host="h",
        pid=1,
        started_ms=at_ms - 1000,
        beat_ms=at_ms,
        interval_ms=interval_ms,
        **fields,
    )


def _now_ms() -> int:
    return int(time.time() * 1000)


class NoModel:
    """A model that is never called (nothing is due in these tests)."""

    async def complete(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("no model call expected")


def _worker(client: aioredis.Redis, prefix: str, **kwargs: Any) -> ExtractionWorker:
    settings = MemorySettings(key_prefix=prefix, extraction_heartbeat_s=BEAT_S)
    return ExtractionWorker(
        client,
        settings,
        NoModel(),
        alias_lookup=lambda name: parse_alias_config(ALIASES.get(name)),
        **kwargs,
    )


async def _wait_for(predicate: Any, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not await predicate():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


# -- the keys and the heartbeat ----------------------------------------------------------------


def test_heartbeat_keys_share_one_slot_apart_from_every_user() -> None:
    """Both keys carry the hash tag ``{workers}`` (one Cluster slot, a pipeline reaches one
    node) whatever the worker id holds; no user's tag (``{t:u}``) can equal it."""
    from redis.crc import key_slot

    odd = "host{x}:12:ab"
    slots = {key_slot(k.encode()) for k in (workers_index_key("mem"), worker_beat_key("mem", odd))}
    assert len(slots) == 1
    assert worker_beat_key("mem", odd) == "mem:{workers}:w:host{x}:12:ab"
    assert ":" not in "{workers}"


async def test_a_beat_is_readable_expires_and_is_removed_by_a_clean_stop(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """A beat's hash lives 3 intervals (then the worker is not alive); the index lives 30."""
    now = _now_ms()
    await write_beat(any_redis, prefix, _beat(at_ms=now, jobs_done=4, jobs_failed=1))
    [read] = await read_workers(any_redis, prefix)
    assert read == _beat(at_ms=now, jobs_done=4, jobs_failed=1)
    ttl = await any_redis.pttl(worker_beat_key(prefix, read.id))
    assert 0 < ttl <= 200 * HEARTBEAT_TTL_BEATS
    index_ttl = await any_redis.pttl(workers_index_key(prefix))
    assert 200 * HEARTBEAT_TTL_BEATS < index_ttl <= 200 * INDEX_KEEP_BEATS
    await asyncio.sleep(0.2 * HEARTBEAT_TTL_BEATS + 0.1)
    assert await read_workers(any_redis, prefix) == []  # expired: a killed worker ages out


async def test_a_beat_prunes_index_members_of_long_dead_workers(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """Index members 30 intervals old leave at the next beat of any worker; younger ones (a
    host whose clock is a little behind) stay."""
    now = _now_ms()
    index = workers_index_key(prefix)
    await any_redis.zadd(index, {"dead": now - 200 * INDEX_KEEP_BEATS - 1, "skewed": now - 2000})
    await write_beat(any_redis, prefix, _beat("live", at_ms=now))
    members = {m.decode() for m in await any_redis.zrange(index, 0, -1)}
    assert members == {"live", "skewed"}


async def test_a_damaged_heartbeat_is_skipped(any_redis: aioredis.Redis, prefix: str) -> None:
    """A hash that is not a heartbeat (written by hand) counts as no worker."""
    now = _now_ms()
    await write_beat(any_redis, prefix, _beat("good", at_ms=now))
    await any_redis.zadd(workers_index_key(prefix), {"bad": now})
    await any_redis.hset(worker_beat_key(prefix, "bad"), mapping={"id": "bad", "beat_ms": "x"})
    assert [w.id for w in await read_workers(any_redis, prefix)] == ["good"]


async def test_a_running_worker_beats_and_its_stop_deletes_the_beat(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """From start to stop the worker is alive, with its kind, pid, start time and job counts;
    stop deletes the hash and the index member at once (not after the TTL)."""
    worker = _worker(any_redis, prefix, kind=KIND_PROXY)
    worker.start()

    async def alive() -> bool:
        return len(await read_workers(any_redis, prefix)) == 1

    await _wait_for(alive)
    [beat] = await read_workers(any_redis, prefix)
    assert (beat.id, beat.kind, beat.pid) == (worker.worker_id, KIND_PROXY, os.getpid())
    assert beat.interval_ms == int(BEAT_S * 1000) and beat.started_ms == worker.started_ms
    first = beat.beat_ms
    worker.jobs_done, worker.jobs_failed = 3, 1

    async def beat_again() -> bool:
        found = await read_workers(any_redis, prefix)
        return bool(found) and found[0].beat_ms > first

    await _wait_for(beat_again)
    [beat] = await read_workers(any_redis, prefix)
    assert (beat.jobs_done, beat.jobs_failed) == (3, 1)
    await worker.stop()
    assert await any_redis.exists(worker_beat_key(prefix, worker.worker_id)) == 0
    assert await any_redis.zscore(workers_index_key(prefix), worker.worker_id) is None


async def test_a_cancelled_worker_task_deletes_its_beat(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """The loop cancelled without stop (the event loop closing) still deletes the beat."""
    worker = _worker(any_redis, prefix)
    task = asyncio.get_running_loop().create_task(worker.run_forever())

    async def alive() -> bool:
        return bool(await read_workers(any_redis, prefix))

    await _wait_for(alive)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await read_workers(any_redis, prefix) == []


async def test_a_worker_counts_its_jobs(any_redis: aioredis.Redis, prefix: str) -> None:
    """A job that finished counts as done, a failed one as failed (the beat carries both)."""
    worker = _worker(any_redis, prefix)
    keys = ConversationKeys.for_ids(prefix, "master", "nobody", "demo")
    await ExtractionQueue(any_redis, prefix).schedule(keys, 0)
    outcome = await worker.run_job(keys.ref)  # no stored user: discarded, done
    assert outcome.status == "discarded"
    assert (worker.jobs_done, worker.jobs_failed) == (1, 0)


async def test_worker_health_reports_stranded_jobs(any_redis: aioredis.Redis, prefix: str) -> None:
    """Jobs queued and no heartbeat: stranded; a heartbeat: not stranded, with its age."""
    now = _now_ms()
    await any_redis.zadd(due_key(prefix), {"t:u:c": now - 1000, "t:u:d": now + 60_000})
    health = await worker_health(any_redis, prefix, now_ms=now)
    assert (health.due, health.overdue, health.stranded) == (2, 1, True)
    assert health.oldest_beat_age_s is None
    await write_beat(any_redis, prefix, _beat(at_ms=now - 150))
    health = await worker_health(any_redis, prefix, now_ms=now)
    assert not health.stranded and health.oldest_beat_age_s == pytest.approx(0.15)
    assert health.kinds() == "1 standalone"


# -- the readers --------------------------------------------------------------------------------


def _gauge(metrics: HookMetrics, name: str) -> float | None:
    for family in metrics.families():
        for sample in family.samples:
            if sample.name == name:
                return float(sample.value)
    return None


async def test_the_scrape_has_a_gauge_of_live_workers(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """``litellm_memory_extraction_workers`` counts live heartbeats (0 without any); the age of
    the oldest is rendered while one is alive."""
    metrics = HookMetrics()
    queue = ExtractionQueue(any_redis, prefix)
    now = _now_ms()
    assert await metrics.refresh(queue, now_ms=now)
    assert _gauge(metrics, "litellm_memory_extraction_workers") == 0
    assert _gauge(metrics, "litellm_memory_extraction_worker_heartbeat_age_seconds") is None
    await write_beat(any_redis, prefix, _beat("a", at_ms=now - 400))
    await write_beat(any_redis, prefix, _beat("b", at_ms=now - 100, kind=KIND_PROXY))
    assert await metrics.refresh(queue, now_ms=now)
    assert _gauge(metrics, "litellm_memory_extraction_workers") == 2
    age = _gauge(metrics, "litellm_memory_extraction_worker_heartbeat_age_seconds")
    assert age == pytest.approx(0.4)


async def test_the_queue_route_says_how_many_workers_are_alive(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """`GET /memory/v1/queue` carries ``workers``: 0, then 1 while a worker beats."""
    import httpx
    from fastapi import FastAPI

    from litellm_memory_hook.proxy import routes, ui
    from tests.integration.test_ui import Q, fake_auth

    hook = make_hook(any_redis, prefix)
    app = FastAPI()
    app.include_router(routes.router)
    ui.include_once(app, ui.router)
    app.dependency_overrides[routes.memory_auth] = fake_auth
    app.dependency_overrides[routes.current_hook] = lambda: hook
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://proxy.test") as http:
        first = (await http.get("/memory/v1/queue", params=Q)).json()
        await write_beat(any_redis, prefix, _beat(at_ms=_now_ms(), interval_ms=5000))
        second = (await http.get("/memory/v1/queue", params=Q)).json()
    assert (first["workers"], second["workers"]) == (0, 1)


def _health(workers: list[WorkerBeat], due: int, overdue: int = 0) -> WorkerHealth:
    return WorkerHealth(workers, due, overdue, _now_ms())


def test_the_doctor_warns_when_jobs_are_queued_and_no_worker_is_alive() -> None:
    """warn (jobs wait) naming what to start; info with nothing queued or extraction off; ok
    with a worker alive."""
    on = {"extraction_enabled": True, "worker_in_proxy": False}
    stranded = workers_check(_health([], 3, 2), **on)
    assert stranded.status == "warn" and stranded.name == WORKERS_CHECK
    assert "none alive and 3 conversation(s) queued, 2 overdue" in stranded.detail
    assert "litellm-memory worker" in stranded.detail
    in_proxy = workers_check(_health([], 3, 2), extraction_enabled=True, worker_in_proxy=True)
    assert in_proxy.status == "warn" and "start the proxy" in in_proxy.detail
    assert workers_check(_health([], 0), **on).status == "info"
    off = workers_check(_health([], 3), extraction_enabled=False, worker_in_proxy=True)
    assert off.status == "info" and "extraction.enabled is false" in off.detail
    alive = workers_check(_health([_beat(at_ms=_now_ms())], 3), **on)
    assert alive.status == "ok" and alive.detail.startswith("1 alive (1 standalone)")


async def test_the_in_proxy_worker_beats_as_proxy_until_the_hook_shuts_down(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """``worker_in_proxy``: the hook's worker beats with kind ``proxy``; the hook's shutdown
    (the proxy's) deletes the beat."""
    hook = make_hook(any_redis, prefix, worker_in_proxy=True, extraction_heartbeat_s=BEAT_S)
    hook.ensure_worker()

    async def alive() -> bool:
        return bool(await read_workers(any_redis, prefix))

    await _wait_for(alive)
    [beat] = await read_workers(any_redis, prefix)
    assert beat.kind == KIND_PROXY
    await hook.shutdown()
    assert await read_workers(any_redis, prefix) == []
