"""The doctor's checks of a Redis: reachable, version (6.2+), cluster or not, Lua, the user's
permissions on the package's keys, persistence (AOF/RDB), ``maxmemory-policy``, and the
extraction workers alive (their heartbeats); a Sentinel's master first when Sentinels are
configured. None needs ``CONFIG`` (managed Redis forbids it).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from redis.exceptions import AuthenticationError, RedisError

from litellm_memory_hook.errors import MemoryHookError
from litellm_memory_hook.settings import MemorySettings
from litellm_memory_hook.store.workers import WorkerHealth
from litellm_memory_hook.tools.cli_connect import mask_url
from litellm_memory_hook.tools.cli_errors import describe

#: the oldest Redis the store works with (ZADD LT / GT, ZRANGE BYSCORE).
MIN_REDIS = (6, 2)


@dataclass
class Check:
    """One line of the doctor's report."""

    name: str
    status: str  # ok, warn, fail, info
    detail: str


def _version_tuple(text: str) -> tuple[int, ...]:
    out: list[int] = []
    for part in text.split("."):
        digits = "".join(ch for ch in part if ch.isdigit())
        out.append(int(digits or 0))
    return tuple(out)


def _persistence_check(info: dict[str, Any], config: dict[str, str]) -> Check:
    aof = str(info.get("aof_enabled", "0")) == "1"
    save = config.get("save")
    fsync = config.get("appendfsync")
    if aof:
        detail = "AOF on" + (f" (appendfsync {fsync})" if fsync else "")
        if fsync == "no":
            return Check("persistence", "warn", detail + ": recommend appendfsync everysec")
        return Check("persistence", "ok", detail + (f"; RDB save {save!r}" if save else ""))
    if save:
        return Check(
            "persistence",
            "warn",
            f"RDB snapshots only (save {save!r}): a crash loses the writes since the last "
            "snapshot; recommend appendonly yes, appendfsync everysec",
        )
    if save is None:
        return Check(
            "persistence",
            "warn",
            "AOF off; RDB rules unknown (CONFIG not allowed): recommend appendonly yes",
        )
    return Check(
        "persistence",
        "warn",
        "none (no AOF, no RDB): a restart loses every memory; recommend appendonly yes",
    )


def _policy_check(memory: dict[str, Any]) -> Check:
    policy = str(memory.get("maxmemory_policy", "unknown"))
    used = memory.get("used_memory_human", "?")
    limit = int(memory.get("maxmemory", 0) or 0)
    budget = f"{used} used" + (f" of {memory.get('maxmemory_human')}" if limit else ", no limit")
    if policy == "noeviction":
        return Check("maxmemory-policy", "ok", f"noeviction ({budget})")
    if policy == "unknown":
        return Check(
            "maxmemory-policy",
            "warn",
            f"not reported by INFO memory ({budget}): make sure it is noeviction",
        )
    return Check(
        "maxmemory-policy",
        "fail",
        f"{policy} ({budget}): Redis evicts single keys when full, and an evicted key loses "
        "turns, memories or a conversation's numbering (every key has a TTL, so volatile-* "
        "policies evict them too); set maxmemory-policy noeviction (or give memory a Redis "
        "of its own)",
    )


def _needed_commands(prefix: str) -> list[tuple[str, ...]]:
    """Commands the package sends, on sample keys of each kind it uses (a user's keys, the
    global due set and counters): what the Redis user must be allowed."""
    tag = "{doctor:probe}"
    meta, turns = f"{prefix}:{tag}:c:x:meta", f"{prefix}:{tag}:c:x:turns"
    due, stats, index = f"{prefix}:due", f"{prefix}:stats", f"{prefix}:{tag}:index"
    return [
        ("EVALSHA", "0" * 40, "1", meta),
        ("EVAL", "return 1", "1", meta),
        ("SCRIPT", "LOAD", "return 1"),
        ("HSET", meta, "f", "v"),
        ("HGETALL", meta),
        ("HMGET", meta, "f"),
        ("HINCRBY", meta, "f", "1"),
        ("HDEL", meta, "f"),
        ("ZADD", turns, "1", "m"),
        ("ZRANGE", turns, "0", "-1"),
        ("ZREM", turns, "m"),
        ("SADD", index, "m"),
        ("SMEMBERS", index),
        ("DEL", meta),
        ("EXPIRE", meta, "1"),
        ("WATCH", meta),
        ("MULTI",),
        ("EXEC",),
        ("ZADD", due, "1", "m"),
        ("ZRANGE", due, "0", "-1"),
        ("ZREM", due, "m"),
        ("HINCRBY", stats, "f", "1"),
        ("SCAN", "0"),
    ]


def _permissions_check(client: Any, prefix: str) -> Check:
    """Whether the Redis user may send every command the package needs on its keys: asked
    with ``ACL DRYRUN`` (Redis 7+) where the user may run it, else by harmless commands (a
    script that only returns, removals of members that do not exist)."""
    try:
        user = str(client.execute_command("ACL", "WHOAMI"))
        denied = []
        for command in _needed_commands(prefix):
            answer = str(client.execute_command("ACL", "DRYRUN", user, *command))
            if answer != "OK":
                denied.append(
                    f"{' '.join(command[:2]) if command[0] == 'SCRIPT' else command[0]}: {answer}"
                )
    except RedisError:
        return _permissions_by_trying(client, prefix)
    if denied:
        return Check(
            "redis permissions",
            "fail",
            f"user {user!r} lacks {len(denied)} of the commands memory needs: "
            + "; ".join(denied[:4])
            + f" (grant e.g. +@all ~{prefix}:*, scripting included)",
        )
    return Check("redis permissions", "ok", f"user {user!r} may send every command memory needs")


def _permissions_by_trying(client: Any, prefix: str) -> Check:
    tag = "{doctor:probe}"
    meta, due = f"{prefix}:{tag}:c:x:meta", f"{prefix}:due"
    tries: list[tuple[str, Any]] = [
        ("SCRIPT LOAD", lambda: client.script_load("return 1")),
        ("EVALSHA", lambda: client.evalsha(client.script_load("return 1"), 1, meta)),
        ("HDEL on a user's key", lambda: client.hdel(meta, "doctor-probe")),
        ("ZREM on the due set", lambda: client.zrem(due, "doctor-probe")),
        ("ZRANGE on the due set", lambda: client.zrange(due, 0, 0)),
    ]
    denied = []
    for name, attempt in tries:
        try:
            attempt()
        except RedisError as exc:
            denied.append(f"{name}: {exc}")
    if denied:
        return Check(
            "redis permissions",
            "fail",
            "; ".join(denied[:4]) + f" (grant e.g. +@all ~{prefix}:*, scripting included)",
        )
    return Check("redis permissions", "ok", "scripts and the package's keys work")


def _config_get(client: Any, name: str) -> str | None:
    try:
        value = client.config_get(name).get(name)
    except RedisError:
        return None
    return None if value is None else str(value)


def redis_problem(exc: BaseException) -> str:
    """What a failed first command says, in the operator's terms: a server that wants a
    password answers the client's handshake with "HELLO must be called with the client already
    authenticated", or NOAUTH."""
    text = str(exc)
    if isinstance(exc, AuthenticationError) or "NOAUTH" in text or "already authenticated" in text:
        return f"authentication required or refused: put the password in the URL ({text})"
    return text


def redis_checks(
    url: str, *, cluster_setting: bool, timeout_s: float = 3.0, prefix: str = "mem"
) -> list[Check]:
    """Reachability, version, mode, Lua, the user's permissions on the keys of ``prefix``,
    persistence and eviction policy of the Redis at ``url`` (one node when it is a Cluster).
    Never needs ``CONFIG`` (managed Redis forbids it): the policy comes from ``INFO
    memory``."""
    import redis

    client = redis.Redis.from_url(
        url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s, decode_responses=True
    )
    checks: list[Check] = []
    try:
        try:
            client.ping()
        except (RedisError, OSError) as exc:
            return [Check("redis reachable", "fail", f"{mask_url(url)}: {redis_problem(exc)}")]
        checks.append(Check("redis reachable", "ok", mask_url(url)))
        server = client.info("server")
        version = str(server.get("redis_version", "?"))
        if _version_tuple(version) >= MIN_REDIS:
            checks.append(Check("redis version", "ok", version))
        else:
            checks.append(
                Check("redis version", "fail", f"{version}: needs 6.2+ (ZADD LT, ZRANGE BYSCORE)")
            )
        mode = str(server.get("redis_mode", "standalone"))
        if mode == "cluster" and not cluster_setting:
            checks.append(
                Check("redis mode", "fail", "cluster, but redis.cluster is not set: set it true")
            )
        elif mode != "cluster" and cluster_setting:
            checks.append(
                Check(
                    "redis mode",
                    "fail",
                    f"{mode}, but redis.cluster is true: the cluster client cannot use it; "
                    "set redis.cluster false",
                )
            )
        else:
            checks.append(Check("redis mode", "ok", mode))
        try:
            lua_ok = client.eval("return 1", 0) == 1
        except RedisError as exc:
            lua_ok = False
            checks.append(Check("lua scripts", "fail", f"EVAL refused: {exc}"))
        if lua_ok:
            checks.append(Check("lua scripts", "ok", "EVAL works"))
        checks.append(_permissions_check(client, prefix))
        config = {
            name: value
            for name in ("save", "appendfsync")
            if (value := _config_get(client, name)) is not None
        }
        if "save" not in config and _config_get(client, "appendonly") is not None:
            config["save"] = ""
        checks.append(_persistence_check(client.info("persistence"), config))
        checks.append(_policy_check(client.info("memory")))
    except (RedisError, OSError) as exc:
        checks.append(Check("redis", "fail", str(exc)))
    finally:
        client.close()
    return checks


#: the name of the doctor's line about extraction workers.
WORKERS_CHECK = "extraction workers"


def workers_check(
    health: WorkerHealth, *, extraction_enabled: bool, worker_in_proxy: bool
) -> Check:
    """The doctor's line about extraction workers: ``ok`` while one is alive (how many, of
    which kind, the oldest heartbeat's age, the queue); ``warn`` when jobs are queued and none
    is alive (they wait until one runs: what to start); ``info`` when none is alive and nothing
    waits, or extraction is off."""
    queued = f"{health.due} conversation(s) queued, {health.overdue} overdue"
    if health.workers:
        age = health.oldest_beat_age_s or 0.0
        return Check(
            WORKERS_CHECK,
            "ok",
            f"{len(health.workers)} alive ({health.kinds()}), oldest heartbeat {age:.1f} s ago; "
            f"{queued}",
        )
    if not extraction_enabled:
        return Check(WORKERS_CHECK, "info", f"none alive; extraction.enabled is false ({queued})")
    if worker_in_proxy:
        start = (
            "start the proxy (extraction.worker_in_proxy: true runs one in each proxy process) or "
            "`litellm-memory worker`"
        )
    else:
        start = (
            "extraction.worker_in_proxy is false: start `litellm-memory worker` (docker compose: "
            "the worker service)"
        )
    if health.stranded:
        return Check(
            WORKERS_CHECK,
            "warn",
            f"none alive and {queued}: their extraction jobs wait until a worker runs; {start}",
        )
    return Check(WORKERS_CHECK, "info", f"none alive, nothing queued; {start}")


def read_worker_check(url: str, settings: MemorySettings, *, timeout_s: float = 3.0) -> Check:
    """:func:`workers_check` on the heartbeats and the due set of the Redis at ``url`` (a
    Cluster client with ``redis.cluster``); ``warn`` when they cannot be read."""
    from litellm_memory_hook.store.client import redis_client
    from litellm_memory_hook.store.workers import worker_health

    async def read() -> WorkerHealth:
        cluster = settings.redis.cluster and not url.startswith("unix:")
        client = redis_client(url, cluster=cluster, timeout_s=timeout_s)
        try:
            return await worker_health(client, settings.storage.key_prefix)
        finally:
            await client.aclose()

    try:
        health = asyncio.run(read())
    except (MemoryHookError, RedisError, OSError) as exc:
        return Check(WORKERS_CHECK, "warn", f"heartbeats not readable: {describe(exc)}")
    return workers_check(
        health,
        extraction_enabled=settings.extraction.enabled,
        worker_in_proxy=settings.extraction.worker_in_proxy,
    )


def reachable(checks: list[Check]) -> bool:
    """Whether :func:`redis_checks` reached Redis."""
    return any(c.name == "redis reachable" and c.status == "ok" for c in checks)


def sentinel_checks(settings: MemorySettings) -> list[Check]:
    """The master the Sentinels name now, then the checks of :func:`redis_checks` on it (no
    ``CONFIG`` needed) and the extraction workers' line."""
    from litellm_memory_hook.store.client import sentinel_master_url

    try:
        url, detail = sentinel_master_url(settings)
    except (MemoryHookError, RedisError, OSError) as exc:
        nodes = ", ".join(settings.redis.sentinel_nodes)
        return [Check("redis sentinel", "fail", f"{nodes}: {redis_problem(exc)}")]
    checks = [Check("redis sentinel", "ok", detail)]
    found = redis_checks(url, cluster_setting=False, prefix=settings.storage.key_prefix)
    checks.extend(found)
    if reachable(found):
        checks.append(read_worker_check(url, settings))
    return checks


def configured_redis_checks(settings: MemorySettings) -> list[Check] | None:
    """The checks of the Redis the settings name (Sentinel, else ``redis.url`` when set);
    ``None`` when they name none (the embedded Redis is checked instead)."""
    if settings.redis.sentinel_nodes:
        return sentinel_checks(settings)
    if "url" not in settings.redis.model_fields_set:
        return None
    found = redis_checks(
        settings.redis.url,
        cluster_setting=settings.redis.cluster,
        prefix=settings.storage.key_prefix,
    )
    if reachable(found):
        found.append(read_worker_check(settings.redis.url, settings))
    return found


__all__ = [
    "MIN_REDIS",
    "WORKERS_CHECK",
    "Check",
    "configured_redis_checks",
    "reachable",
    "read_worker_check",
    "redis_checks",
    "redis_problem",
    "sentinel_checks",
    "workers_check",
]
