"""``litellm-memory stats [--json] [--no-scan]``: the extraction counters (``mem:stats``), how many
conversations are waiting in the due set, the extraction workers alive (their heartbeats; a
warning when jobs are queued and none is), how many conversations, users, memory sets and keys
are stored (one SCAN of the key prefix) and the memory Redis uses.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import Annotated, Any

import typer
from rich.table import Table

from litellm_memory_hook.store.workers import WorkerHealth, worker_health
from litellm_memory_hook.tools.cli_common import (
    DEFAULT_CONFIG,
    DEFAULT_DATA_DIR,
    ConfigOption,
    DataDirOption,
    JsonFlag,
    console,
)
from litellm_memory_hook.tools.cli_connect import command_config, run_on_redis


@dataclass
class StoreStats:
    """What ``stats`` shows: counters, the due set, what is stored, memory used."""

    counters: dict[str, int]
    due: int
    conversations: int | None = None
    users: int | None = None
    memory_sets: int | None = None
    keys: int | None = None
    db_keys: int | None = None
    memory: dict[str, object] | None = None
    #: the extraction workers alive and the due set as read with them
    health: WorkerHealth | None = None

    def as_json(self) -> dict[str, object]:
        """The JSON shape of ``stats --json``."""
        health = self.health
        return {
            "counters": self.counters,
            "due": self.due,
            "workers": None
            if health is None
            else [w.as_json(health.now_ms) for w in health.workers],
            "store": {
                "conversations": self.conversations,
                "users": self.users,
                "memory_sets": self.memory_sets,
                "keys": self.keys,
                "db_keys": self.db_keys,
            },
            "memory": self.memory,
        }


def classify_key(name: str, prefix: str) -> str | None:
    """What a key of ours holds: ``conversation`` (a meta hash), ``user`` (an index),
    ``memory_set`` (an mstate hash), ``other``; ``None`` for keys of other prefixes."""
    if not name.startswith(prefix + ":"):
        return None
    close = name.find("}:")
    if not name.startswith(prefix + ":{") or close < 0:
        return "other"
    tail = name[close + 2 :]
    if tail == "index":
        return "user"
    if tail.startswith("c:") and tail.endswith(":meta"):
        return "conversation"
    if tail.endswith(":mstate"):
        return "memory_set"
    return "other"


async def store_stats(redis: Any, prefix: str, *, scan: bool) -> StoreStats:
    """Counters and due length; with ``scan``, counts of our keys by one SCAN over the prefix
    (non-blocking, but it walks every key of the database); Redis's memory figures."""
    from litellm_memory_hook.store.queue import ExtractionQueue

    raw = await ExtractionQueue(redis, prefix).stats()
    due = raw.pop("due", 0)
    stats = StoreStats(counters=raw, due=due, health=await worker_health(redis, prefix))
    info = await redis.info("memory")
    if info and "used_memory" not in info:  # a Cluster client answers per node
        nodes = [v for v in info.values() if isinstance(v, dict)]
        info = {"used_memory": sum(int(n.get("used_memory", 0)) for n in nodes)}
    stats.memory = {
        name: info.get(name)
        for name in ("used_memory", "used_memory_human", "maxmemory", "maxmemory_policy")
        if name in info
    }
    db_keys = await redis.dbsize()  # O(1), with or without the scan
    stats.db_keys = int(db_keys) if isinstance(db_keys, int) else None
    if not scan:
        return stats
    kinds: Counter[str] = Counter()
    async for key in redis.scan_iter(match=f"{prefix}:*", count=1000):
        name = key.decode("utf-8", "replace") if isinstance(key, bytes) else str(key)
        kind = classify_key(name, prefix)
        if kind is not None:
            kinds[kind] += 1
            kinds["keys"] += 1
    stats.conversations = kinds["conversation"]
    stats.users = kinds["user"]
    stats.memory_sets = kinds["memory_set"]
    stats.keys = kinds["keys"]
    return stats


def stats_command(
    as_json: JsonFlag = False,
    scan: Annotated[
        bool,
        typer.Option(
            "--scan/--no-scan",
            help="Count conversations, users and keys with one SCAN of the key prefix (it "
            "walks the whole database: --no-scan on a very large one).",
        ),
    ] = True,
    config: ConfigOption = DEFAULT_CONFIG,
    data_dir: DataDirOption = DEFAULT_DATA_DIR,
) -> None:
    """Show the extraction counters, the due queue, the extraction workers alive, what is
    stored and the memory Redis uses.

    Example: litellm-memory stats --json
    """
    proxy_config = command_config(config, data_dir, optional=True)
    prefix = proxy_config.settings.storage.key_prefix

    async def job(redis: Any) -> StoreStats:
        return await store_stats(redis, prefix, scan=scan)

    stats = run_on_redis(proxy_config, data_dir, job)
    if as_json:
        typer.echo(json.dumps(stats.as_json(), indent=2, sort_keys=True))
        return
    table = Table(title=f"extraction ({prefix}:stats, due set)")
    table.add_column("counter")
    table.add_column("value", justify="right")
    for name in sorted(stats.counters):
        table.add_row(name, str(stats.counters[name]))
    table.add_row("due (conversations waiting)", str(stats.due), style="bold")
    console.print(table)
    if stats.health is not None:
        _print_workers(stats.health)
    store = Table(title=f"stored under {prefix}:")
    store.add_column("measure")
    store.add_column("value", justify="right")
    rows: list[tuple[str, object]] = [
        ("conversations", stats.conversations),
        ("users", stats.users),
        ("memory sets", stats.memory_sets),
        ("keys", stats.keys),
        ("keys in the database", stats.db_keys),
    ]
    memory = stats.memory or {}
    rows.append(("memory used", memory.get("used_memory_human", memory.get("used_memory"))))
    limit = memory.get("maxmemory")
    rows.append(("maxmemory", "no limit" if limit in (0, "0", None) else limit))
    rows.append(("maxmemory-policy", memory.get("maxmemory_policy")))
    for name, value in rows:
        store.add_row(name, "-" if value is None else str(value))
    console.print(store)


def _print_workers(health: WorkerHealth) -> None:
    """The live extraction workers as a table, or a line saying none is alive (a warning when
    jobs are queued)."""
    if not health.workers:
        if health.stranded:
            console.print(
                f"warning: no extraction worker alive and {health.due} conversation(s) queued "
                f"({health.overdue} overdue): their jobs wait until a worker runs (the proxy "
                "with extraction.worker_in_proxy, or litellm-memory worker)",
                style="bold red",
            )
        else:
            console.print("extraction workers: none alive")
        return
    table = Table(title=f"extraction workers alive: {len(health.workers)}")
    for column in ("worker", "kind", "pid", "up (s)", "heartbeat (s ago)", "done", "failed"):
        table.add_column(column, justify="left" if column in ("worker", "kind") else "right")
    for worker in health.workers:
        table.add_row(
            worker.id,
            worker.kind,
            str(worker.pid),
            f"{max(0, health.now_ms - worker.started_ms) / 1000:.0f}",
            f"{worker.age_s(health.now_ms):.1f}",
            str(worker.jobs_done),
            str(worker.jobs_failed),
        )
    console.print(table)


__all__ = [
    "StoreStats",
    "classify_key",
    "stats_command",
    "store_stats",
]
