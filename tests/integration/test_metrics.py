"""Prometheus metrics (``GET /memory/metrics``): rendered from the hook's counters, its
per-request observations and ``mem:stats`` at scrape time; scraped in-process after traffic on a
real Redis. Through a real proxy: tests/e2e/test_metrics.py."""

from __future__ import annotations

import asyncio
import logging
import os
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis
from fastapi import FastAPI, Request

from litellm_memory_hook.proxy import routes, ui
from litellm_memory_hook.proxy.hook import MemoryHook
from litellm_memory_hook.proxy.metrics import (
    LAYERS,
    HookMetrics,
    MetricsPublisher,
    log_event,
)
from litellm_memory_hook.proxy.metrics_snapshot import Snapshot
from litellm_memory_hook.settings import MemorySettings
from litellm_memory_hook.store.queue import ExtractionQueue
from tests.support.harness import free_port
from tests.support.hook_calls import chat_request, make_hook, model_response
from tests.support.metrics_samples import by_process, hook_is_wired, processes, samples, value

# -- rendering ----------------------------------------------------------------------------------


def test_render_counters_observations_and_store_stats(caplog: pytest.LogCaptureFixture) -> None:
    """Counters map to requests / fail-open / Redis-error families, observations to the layer
    and hook-time histograms, mem:stats to the extraction families; one structured log line."""
    counters: Counter[str] = Counter(
        rebuilt=3,
        no_user_passthrough=2,
        precall_errors=1,
        breaker_passthrough=4,
        breaker_trips=1,
        api_store_errors=2,
        turns_stored=6,
        chars_window=900,
    )
    metrics = HookMetrics(counters)
    with caplog.at_level(logging.DEBUG, logger="litellm_memory_hook"):
        metrics.observe_rebuild("master:alice:demo", {"rules": 40, "window": 700}, 1.7, recalled=2)
        metrics.observe_rebuild("master:alice:demo", {"rules": 40, "window": 90}, 0.4, recalled=0)
    metrics.store_stats = {
        "jobs_run": 5,
        "jobs_committed": 3,
        "jobs_failed": 1,
        "dropped_pinned": 2,
        "tokens_prompt": 1200,
        "swept": 1,
        "due": 4,
        "due_now": 1,
    }
    found = samples(metrics.render().decode())

    assert value(found, "litellm_memory_requests_total", outcome="memory") == 3
    assert value(found, "litellm_memory_requests_total", outcome="no_user") == 2
    assert value(found, "litellm_memory_requests_total", outcome="fail_open_error") == 1
    assert value(found, "litellm_memory_fail_open_total", reason="error") == 1
    assert value(found, "litellm_memory_fail_open_total", reason="breaker") == 4
    assert value(found, "litellm_memory_fail_open_total", reason="config") == 0
    assert value(found, "litellm_memory_redis_errors_total", source="hook") == 1
    assert value(found, "litellm_memory_redis_errors_total", source="api") == 2
    assert value(found, "litellm_memory_hook_events_total", event="turns_stored") == 6
    assert not by_process(found, "litellm_memory_hook_events_total", event="chars_window")

    assert value(found, "litellm_memory_layer_characters_count", layer="window") == 2
    assert value(found, "litellm_memory_layer_characters_sum", layer="window") == 790
    assert value(found, "litellm_memory_layer_characters_bucket", layer="window", le="100.0") == 1
    for layer in LAYERS:  # every layer is there from the start, so dashboards see zeros
        assert by_process(found, "litellm_memory_layer_characters_count", layer=layer)
    assert value(found, "litellm_memory_hook_duration_milliseconds_count") == 2
    assert value(found, "litellm_memory_hook_duration_milliseconds_bucket", le="0.5") == 1
    assert value(found, "litellm_memory_recall_hits_total") == 1
    assert value(found, "litellm_memory_recalled_lines_total") == 2

    assert value(found, "litellm_memory_store_up") == 1
    assert value(found, "litellm_memory_extraction_jobs_total", outcome="committed") == 3
    assert value(found, "litellm_memory_extraction_jobs_total", outcome="failed") == 1
    assert value(found, "litellm_memory_extraction_jobs_total", outcome="conflict") == 0
    assert value(found, "litellm_memory_extraction_runs_total") == 5
    assert value(found, "litellm_memory_extraction_dropped_items_total", rule="pinned") == 2
    assert value(found, "litellm_memory_extraction_tokens_total", kind="prompt") == 1200
    assert value(found, "litellm_memory_extraction_counter_total", counter="swept") == 1
    assert value(found, "litellm_memory_extraction_due_conversations") == 4
    assert value(found, "litellm_memory_extraction_overdue_conversations") == 1

    events = [r for r in caplog.records if getattr(r, "memory_event", "") == "memory.rebuilt"]
    assert len(events) == 2
    assert events[0].getMessage().startswith('{"event":"memory.rebuilt","ref":"master:alice:demo"')
    assert events[0].memory_fields["layers"] == {"rules": 40, "window": 700}  # type: ignore[attr-defined]


def test_two_hooks_have_separate_registries() -> None:
    """Each hook's metrics live in their own registry (never the global one)."""
    first, second = HookMetrics(), HookMetrics()
    first.observe_rebuild("a:b:c", {"window": 10}, 1.0, recalled=1)
    assert value(samples(second.render().decode()), "litellm_memory_recall_hits_total") == 0
    from prometheus_client import REGISTRY

    assert REGISTRY.get_sample_value("litellm_memory_recall_hits_total") is None


def test_log_event_skips_disabled_levels(caplog: pytest.LogCaptureFixture) -> None:
    """A structured line at a disabled level is not formatted; values that are not JSON are
    logged as text."""
    with caplog.at_level(logging.WARNING, logger="litellm_memory_hook"):
        log_event("quiet", logging.DEBUG, x=1)
        log_event("loud", logging.WARNING, path=Path("/x"))
    assert [r.getMessage() for r in caplog.records] == ['{"event":"memory.loud","path":"/x"}']


# -- per-process snapshots in Redis --------------------------------------------------------------


def _process_with(rebuilt: int, layer_chars: int = 0) -> HookMetrics:
    """Metrics of one process that counted ``rebuilt`` requests rebuilt from memory (and
    observed one with a window of ``layer_chars`` characters when not 0)."""
    metrics = HookMetrics(Counter(rebuilt=rebuilt, turns_stored=2 * rebuilt))
    if layer_chars:
        metrics.observe_rebuild("t:u:c", {"window": layer_chars}, 1.5, recalled=2)
    return metrics


def test_process_ids_are_new_per_instance_and_safe_in_a_key() -> None:
    """``<host>:<pid>:<random>``: a restarted process (same pid) is a new series; the host part
    holds no brace, so the key's hash tag stays ``{metrics}``."""
    first, second = HookMetrics().process, HookMetrics().process
    assert first != second
    host, pid, suffix = first.split(":")
    assert pid == str(os.getpid()) and len(suffix) == 6
    assert "{" not in host and "}" not in host


def test_snapshot_round_trip() -> None:
    """A snapshot decodes to the same families, types, help and samples; what is not a snapshot
    of this version decodes to None."""
    metrics = _process_with(3, layer_chars=700)
    metrics.own["scrape_store_errors"] = 1
    snapshot = metrics.snapshot(now_ms=1_700_000_000_000)
    blob = snapshot.encode()
    back = Snapshot.decode(blob)
    assert back is not None
    assert (back.process, back.at_ms) == (metrics.process, 1_700_000_000_000)

    def shape(families: Any) -> list[Any]:
        return [
            (f.name, f.type, f.documentation, [(x.name, x.labels, x.value) for x in f.samples])
            for f in families
        ]

    assert shape(back.families) == shape(snapshot.families)
    names = {f.name for f in back.families}
    assert {"litellm_memory_requests", "litellm_memory_layer_characters"} <= names
    assert not any(
        n.startswith("litellm_memory_extraction") or n.endswith("store_up") for n in names
    )
    assert Snapshot.decode(blob.decode()) is not None  # a decode_responses client gives str
    assert Snapshot.decode(b"not json") is None
    assert Snapshot.decode(blob.replace(b'"v":1', b'"v":99')) is None


@pytest.mark.redis
async def test_two_processes_are_rendered_with_their_labels(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """A scrape answered by either process renders both processes' series, each with its
    ``process`` label; the Redis figures carry none."""
    queue = ExtractionQueue(any_redis, prefix)
    first, second = _process_with(3, layer_chars=700), _process_with(5)
    assert await first.publish(any_redis, prefix)
    assert await second.refresh(queue)
    found = samples(second.render().decode())
    assert by_process(found, "litellm_memory_requests_total", outcome="memory") == {
        first.process: 3,
        second.process: 5,
    }
    assert by_process(found, "litellm_memory_hook_events_total", event="turns_stored") == {
        first.process: 6,
        second.process: 10,
    }
    assert by_process(found, "litellm_memory_layer_characters_count", layer="window") == {
        first.process: 1,
        second.process: 0,
    }
    assert value(found, "litellm_memory_recalled_lines_total") == 2
    assert by_process(found, "litellm_memory_store_up") == {"": 1}
    assert by_process(found, "litellm_memory_extraction_runs_total") == {"": 0}

    # the other way round: the figures are the same (the second published at its scrape)
    assert await first.refresh(queue)
    again = samples(first.render().decode())
    assert by_process(again, "litellm_memory_requests_total", outcome="memory") == {
        first.process: 3,
        second.process: 5,
    }


@pytest.mark.redis
async def test_a_series_never_goes_down_whichever_process_answers(
    any_redis: aioredis.Redis, prefix: str
) -> None:
    """A scrape renders its process's figures as it published them, so a later scrape answered
    by another process renders at least as much (never an older snapshot), even when requests
    were served between the publish and the render."""
    queue = ExtractionQueue(any_redis, prefix)
    first, second = _process_with(1), _process_with(0)
    assert await first.publish(any_redis, prefix)  # the background publish: 1
    first.counters["rebuilt"] += 4  # 5 requests, not yet published by the background task
    await first.refresh(queue)
    mine = samples(first.render().decode())
    assert by_process(mine, "litellm_memory_requests_total", outcome="memory")[first.process] == 5
    first.counters["rebuilt"] += 1  # served after the scrape published: the next scrape's
    again = samples(first.render().decode())
    assert value(again, "litellm_memory_requests_total", outcome="memory") == 5
    await second.refresh(queue)
    theirs = samples(second.render().decode())
    assert by_process(theirs, "litellm_memory_requests_total", outcome="memory")[first.process] == 5


@pytest.mark.redis
async def test_an_expired_process_is_not_rendered(any_redis: aioredis.Redis, prefix: str) -> None:
    """A process that stopped publishing is no longer rendered once its snapshot expired, and
    its index member is dropped by the next publish."""
    from litellm_memory_hook.store.keys import metrics_index_key, metrics_snapshot_key

    queue = ExtractionQueue(any_redis, prefix)
    gone, alive = _process_with(3), _process_with(5)
    assert await gone.publish(any_redis, prefix, ttl_s=0.3)
    assert 0 < await any_redis.pttl(metrics_snapshot_key(prefix, gone.process)) <= 300
    await asyncio.sleep(0.6)
    assert await alive.refresh(queue)
    found = samples(alive.render().decode())
    assert by_process(found, "litellm_memory_requests_total", outcome="memory") == {
        alive.process: 5
    }
    members = await any_redis.zrange(metrics_index_key(prefix), 0, -1)
    assert members == [alive.process.encode()]
    assert 0 < await any_redis.pttl(metrics_index_key(prefix)) <= 15_000


@pytest.mark.redis
async def test_a_damaged_snapshot_is_skipped(any_redis: aioredis.Redis, prefix: str) -> None:
    """A snapshot that cannot be read (another version, damaged) leaves that process out."""
    from litellm_memory_hook.store.keys import metrics_index_key, metrics_snapshot_key

    queue = ExtractionQueue(any_redis, prefix)
    await any_redis.zadd(metrics_index_key(prefix), {"other:1:abcdef": 1})
    await any_redis.set(metrics_snapshot_key(prefix, "other:1:abcdef"), b"{broken", px=5000)
    mine = _process_with(2)
    assert await mine.refresh(queue)
    assert processes(samples(mine.render().decode())) == {mine.process}


async def test_redis_down_renders_own_figures_and_publish_never_raises(prefix: str) -> None:
    """Redis not answering: the publisher counts the failure (redis_errors{source="metrics"})
    and carries on; a scrape renders this process's own series only, labelled."""
    dead = aioredis.from_url(
        f"redis://127.0.0.1:{free_port()}/0", socket_timeout=0.2, socket_connect_timeout=0.2
    )
    metrics = _process_with(4)
    metrics.peers = [_process_with(9).snapshot()]  # from an earlier scrape: must be dropped
    assert await metrics.publish(dead, prefix) is None
    assert await metrics.refresh(ExtractionQueue(dead, prefix)) is False
    await dead.aclose()
    found = samples(metrics.render().decode())
    assert by_process(found, "litellm_memory_requests_total", outcome="memory") == {
        metrics.process: 4
    }
    assert value(found, "litellm_memory_redis_errors_total", source="metrics") == 2
    assert value(found, "litellm_memory_store_up") == 0


@pytest.mark.redis
async def test_publisher_publishes_periodically_and_at_stop(
    real_redis: aioredis.Redis, prefix: str
) -> None:
    """The background task publishes at once and then every period; stop() publishes the last
    figures, which stay readable until they expire."""
    from litellm_memory_hook.store.keys import metrics_snapshot_key

    metrics = _process_with(1)
    publisher = MetricsPublisher(metrics, real_redis, prefix, period_s=0.1)
    publisher.start()
    key = metrics_snapshot_key(prefix, metrics.process)
    for _ in range(50):
        if await real_redis.exists(key):
            break
        await asyncio.sleep(0.02)
    first = Snapshot.decode(await real_redis.get(key))
    assert first is not None and publisher.running
    await asyncio.sleep(0.25)
    later = Snapshot.decode(await real_redis.get(key))
    assert later is not None and later.at_ms > first.at_ms
    metrics.counters["rebuilt"] = 7
    await publisher.stop()
    assert not publisher.running
    last = Snapshot.decode(await real_redis.get(key))
    assert last is not None
    reader = _process_with(0)
    await reader.refresh(ExtractionQueue(real_redis, prefix))
    found = samples(reader.render().decode())
    assert (
        by_process(found, "litellm_memory_requests_total", outcome="memory")[metrics.process] == 7
    )
    assert 0 < await real_redis.pttl(key) <= 300


@pytest.mark.redis
async def test_the_publisher_starts_with_the_proxy_and_stops_at_shutdown(
    real_redis: aioredis.Redis, prefix: str
) -> None:
    """mounting.start_worker_soon starts the hook's publisher once the proxy's router exists;
    hook.shutdown() stops it with a last publish."""
    from types import SimpleNamespace

    from litellm_memory_hook.proxy import mounting
    from litellm_memory_hook.store.keys import metrics_snapshot_key

    hook = make_hook(real_redis, prefix)
    assert mounting.start_worker_soon(SimpleNamespace(llm_router=object()), hook)
    for _ in range(100):
        if hook.metrics_publisher is not None:
            break
        await asyncio.sleep(0.02)
    assert hook.metrics_publisher is not None and hook.metrics_publisher.running
    hook.counters["rebuilt"] = 2
    await hook.shutdown()
    assert hook.metrics_publisher is None
    raw = await real_redis.get(metrics_snapshot_key(prefix, hook.metrics.process))
    last = Snapshot.decode(raw)
    assert last is not None
    requests = next(f for f in last.families if f.name == "litellm_memory_requests")
    assert {x.labels["outcome"]: x.value for x in requests.samples}["memory"] == 2


# -- the route, in-process ----------------------------------------------------------------------


class AdminAuth:
    """What LiteLLM's ``UserAPIKeyAuth`` gives for the master key."""

    token = "litellm_proxy_master_key"
    api_key = "litellm_proxy_master_key"
    team_id = None
    user_id = "default_user_id"
    user_role = "proxy_admin"


class TeamAuth:
    """A team's virtual key: not an admin."""

    token = "hashed-team-a"
    api_key = "hashed-team-a"
    team_id = "a"
    user_id = None
    user_role = "internal_user"


async def fake_auth(request: Request) -> Any:
    """The master key unless the test header asks for a team key."""
    return TeamAuth() if request.headers.get("x-test-team") else AdminAuth()


def app_for(hook: MemoryHook) -> httpx.AsyncClient:
    """An HTTP client of an app with the memory routes, this hook and the fake auth."""
    app = FastAPI()
    app.include_router(routes.router)
    ui.include_once(app, ui.router)
    app.dependency_overrides[routes.memory_auth] = fake_auth
    app.dependency_overrides[routes.current_hook] = lambda: hook
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://proxy.test")


@pytest.fixture
async def redis_hook(real_redis: aioredis.Redis, prefix: str) -> AsyncIterator[MemoryHook]:
    """A hook on the real Redis (no in-proxy worker)."""
    hook = make_hook(real_redis, prefix)
    yield hook
    await hook.drain()


async def _chat(hook: MemoryHook, text: str, user: Any, call_id: str) -> None:
    data = chat_request(text, user=user, call_id=call_id)
    from tests.support.hook_calls import Auth

    data = await hook.async_pre_call_hook(Auth(), None, data, "acompletion") or data
    await hook.async_post_call_success_hook(data, Auth(), model_response("Noted."))


@pytest.mark.redis
async def test_scrape_after_traffic(redis_hook: MemoryHook) -> None:
    """After real traffic through the hook and extraction counts in Redis, a scrape shows the
    requests with memory, the pass-throughs, the job outcomes and the due set."""
    await _chat(redis_hook, "My cat is called Miso.", "u-metrics", "m1")
    await _chat(redis_hook, "I live in Pune with my sister Seema.", "u-metrics", "m2")
    await _chat(redis_hook, "Hello there", None, "m3")  # no user: passed through
    await redis_hook.queue.count(jobs_run=2, jobs_committed=1, jobs_failed=1)
    async with app_for(redis_hook) as http:
        answer = await http.get("/memory/metrics")
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/plain; version=0.0.4")
    found = samples(answer.text)
    assert value(found, "litellm_memory_requests_total", outcome="memory") == 2
    assert value(found, "litellm_memory_requests_total", outcome="no_user") == 1
    assert value(found, "litellm_memory_hook_events_total", event="turns_stored") == 4
    assert value(found, "litellm_memory_store_up") == 1
    assert value(found, "litellm_memory_extraction_jobs_total", outcome="committed") == 1
    assert value(found, "litellm_memory_extraction_jobs_total", outcome="failed") == 1
    assert value(found, "litellm_memory_extraction_runs_total") == 2
    assert value(found, "litellm_memory_extraction_due_conversations") == 1  # after the quiet time
    assert value(found, "litellm_memory_extraction_overdue_conversations") == 0


@pytest.mark.redis
async def test_scrape_has_per_request_histograms(
    redis_hook: MemoryHook, caplog: pytest.LogCaptureFixture
) -> None:
    """With the hook wired to its metrics, each rebuilt request adds to the layer and hook-time
    histograms and logs one structured line."""
    if not hook_is_wired():
        pytest.skip("hook.py does not create HookMetrics yet (issue 10 item 4: lines to add)")
    with caplog.at_level(logging.DEBUG, logger="litellm_memory_hook"):
        await _chat(redis_hook, "My cat is called Miso.", "u-hist", "h1")
        await _chat(redis_hook, "What is my cat called?", "u-hist", "h2")
    async with app_for(redis_hook) as http:
        found = samples((await http.get("/memory/metrics")).text)
    assert value(found, "litellm_memory_hook_duration_milliseconds_count") == 2
    assert value(found, "litellm_memory_layer_characters_count", layer="window") == 2
    assert value(found, "litellm_memory_layer_characters_sum", layer="rules") > 0
    assert value(found, "litellm_memory_recall_hits_total") >= 0
    events = [r for r in caplog.records if getattr(r, "memory_event", "") == "memory.rebuilt"]
    assert len(events) == 2


@pytest.mark.redis
async def test_metrics_need_an_admin_key(redis_hook: MemoryHook) -> None:
    """A tenant's key gets 403 (the figures cover every tenant)."""
    async with app_for(redis_hook) as http:
        answer = await http.get("/memory/metrics", headers={"x-test-team": "1"})
    assert answer.status_code == 403
    assert "master key" in answer.json()["detail"]


async def test_scrape_with_redis_down(prefix: str) -> None:
    """Redis not answering: still 200, store_up 0, the scrape's Redis error counted, no
    extraction figures (rather than stale ones)."""
    dead = aioredis.from_url(
        f"redis://127.0.0.1:{free_port()}/0", socket_timeout=0.2, socket_connect_timeout=0.2
    )
    hook = MemoryHook(
        settings=MemorySettings(key_prefix=prefix, worker_in_proxy=False),
        redis=dead,
        alias_lookup=lambda model: None,
    )
    async with app_for(hook) as http:
        answer = await http.get("/memory/metrics")
    await dead.aclose()
    assert answer.status_code == 200
    found = samples(answer.text)
    assert value(found, "litellm_memory_store_up") == 0
    assert value(found, "litellm_memory_redis_errors_total", source="metrics") == 1
    assert not any(name.startswith("litellm_memory_extraction") for name, _ in found)
    # this process's own figures only, still labelled
    assert processes(found) == {hook.metrics.process}


@pytest.mark.redis
async def test_openmetrics_when_asked(redis_hook: MemoryHook) -> None:
    """A scraper that accepts OpenMetrics gets it."""
    async with app_for(redis_hook) as http:
        answer = await http.get(
            "/memory/metrics", headers={"accept": "application/openmetrics-text; version=1.0.0"}
        )
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("application/openmetrics-text")
    assert answer.text.rstrip().endswith("# EOF")


async def test_scrape_with_a_bad_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    """A bad setting (here LITELLM_MEMORY_RECALL__K=abc) makes every memory request fail open
    with reason ``config``; the scrape must still answer, so that counter can be seen (it
    answered 500 Internal Server Error, ConfigError raised from hook.settings via hook.queue)."""
    from tests.support.hook_calls import ALIASES, Auth

    monkeypatch.setenv("LITELLM_MEMORY_RECALL__K", "abc")
    hook = MemoryHook(alias_lookup=lambda model: ALIASES.get(model))
    data = chat_request("My cat is called Miso.", user="u-cfg", call_id="cfg1")
    await hook.async_pre_call_hook(Auth(), None, data, "acompletion")
    assert hook.counters  # the request was counted as a fail-open
    async with app_for(hook) as http:
        answer = await http.get("/memory/metrics")
    assert answer.status_code == 200, answer.text
    found = samples(answer.text)
    assert value(found, "litellm_memory_fail_open_total", reason="config") == 1


async def test_scrape_with_the_cluster_down(prefix: str) -> None:
    """``redis_cluster: true`` and no node answering (the proxy started during a Cluster outage,
    or a standalone Redis behind it): redis-py raises RedisClusterException, which is no
    RedisError; the scrape must still answer 200 with store_up 0 (it answered 500)."""
    from litellm_memory_hook.store.client import redis_client

    dead = redis_client(f"redis://127.0.0.1:{free_port()}/0", cluster=True, timeout_s=0.2)
    hook = MemoryHook(
        settings=MemorySettings(key_prefix=prefix, worker_in_proxy=False, redis_cluster=True),
        redis=dead,
        alias_lookup=lambda model: None,
    )
    async with app_for(hook) as http:
        answer = await http.get("/memory/metrics")
    assert answer.status_code == 200
    assert value(samples(answer.text), "litellm_memory_store_up") == 0
