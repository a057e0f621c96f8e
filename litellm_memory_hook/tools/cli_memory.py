"""``litellm-memory memories``, ``stats`` and ``worker``: the operator's memory commands.

* ``litellm-memory memories list|pin|edit|delete|flush --user U [--model demo] [--tenant master]
  [--conversation C]``: read and edit a user's memories, as the HTTP API (``/memory/v1``) does
  for the user's own key. ``--tenant`` is the tenant a key maps to (``master`` for the master
  key, ``team-<id>``, ``user-<id>``, ``key-<hash>``; see ``litellm_memory_hook.proxy.identity``).
* ``litellm-memory stats [--json] [--no-scan]``: the extraction counters (``mem:stats``), how
  many conversations are waiting in the due set, the extraction workers alive (their
  heartbeats; a warning when jobs are queued and none is), how many conversations, users,
  memory sets and keys are stored (one SCAN of the key prefix) and the memory Redis uses.
* ``litellm-memory worker [--once]``: a standalone extraction worker process (scale-out, or cron
  with ``--once``); it calls the model through the proxy's OpenAI-compatible API.

All of them read the proxy's config.yaml (``--config``) and use the same Redis as the other
commands: the configured one, else the embedded one in ``--data-dir``. Errors are one line on
the console and exit code 2.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import os
import signal
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.table import Table

from litellm_memory_hook.errors import ExtractionError, MemoryHookError
from litellm_memory_hook.memory_api import (
    MemoryAPI,
    MemoryListing,
    MemoryNotFoundError,
    MemoryTarget,
    resolve_target,
)
from litellm_memory_hook.settings import MemorySettings
from litellm_memory_hook.store.memory_sets import MemoryItem
from litellm_memory_hook.store.workers import WorkerHealth, worker_health
from litellm_memory_hook.tools.cli_common import (
    MASTER_TENANT,
    ConfigOption,
    DataDirOption,
    console,
    counted,
)
from litellm_memory_hook.tools.cli_ops import (
    DEFAULT_CONFIG,
    DEFAULT_DATA_DIR,
    TenantOption,
    UserOption,
    alias_lookup,
    command_config,
    run_on_redis,
)
from litellm_memory_hook.tools.cli_ops import fail as _fail
from litellm_memory_hook.tools.cli_users import NO_SUCH_USER_EXIT
from litellm_memory_hook.tools.proxyconfig import ProxyConfig

T = TypeVar("T")

memories_app = typer.Typer(
    help=(
        "Read and edit a user's memories (pinned: written by the user, never changed by the "
        "model; extracted: written by the model). "
        "Example: litellm-memory memories list --user alice"
    ),
    no_args_is_help=True,
)

ModelOption = Annotated[str, typer.Option("--model", help="The memory-enabled model alias.")]
ConversationOption = Annotated[
    str | None,
    typer.Option(
        "--conversation",
        help="Conversation id (default: the alias's default conversation; needed for aliases "
        "with memory_scope: conversation).",
    ),
]
JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


@dataclass(frozen=True)
class MemorySetOptions:
    """The options every ``memories`` command shares: the memory set and where it is stored."""

    user: str
    model: str
    tenant: str
    conversation: str | None
    config: Path
    data_dir: Path

    def call(
        self,
        call: Callable[[MemoryAPI, MemoryTarget], Awaitable[T]],
        *,
        require_user: bool = False,
    ) -> tuple[MemoryTarget, T]:
        """Resolve the memory set the options name and run ``call(api, target)`` on it.

        Args:
            require_user: first check that something is stored for the user (the user's index
                or the memory set): a mistyped ``--user`` then says so instead of listing
                nothing.

        Returns:
            The resolved target and what ``call`` returned.

        Raises:
            typer.Exit: (code 2) bad config, unknown alias or user, Redis failure, or any
                :class:`MemoryHookError` from ``call``; (code 1) ``require_user`` and nothing
                is stored for the user.
        """
        config = command_config(self.config, self.data_dir)
        try:
            target = resolve_target(
                config.settings,
                alias_lookup(config),
                tenant=self.tenant,
                user=self.user,
                model=self.model,
                conversation=self.conversation,
            )
        except MemoryHookError as exc:
            raise _fail(str(exc)) from exc

        async def job(redis: Any) -> T | MemoryNotFoundError:
            api = MemoryAPI(redis, config.settings)
            if require_user and not await redis.exists(
                target.memory.pinned, target.memory.memories
            ):
                try:
                    await api.existing_user(target.tenant, target.user)
                except MemoryNotFoundError as exc:
                    return exc
            return await call(api, target)

        result = run_on_redis(config, self.data_dir, job)
        if isinstance(result, MemoryNotFoundError):
            raise _fail(f"{result} (`litellm-memory users` lists them)", code=NO_SUCH_USER_EXIT)
        return target, result


def _option(name: str, annotation: object, default: object = inspect.Parameter.empty) -> Any:
    """A keyword-only parameter, as typer reads a command's option from its signature."""
    return inspect.Parameter(
        name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation
    )


#: the shared options of :class:`MemorySetOptions`, in the order the help lists them: the memory
#: set's before a command's own options, where it is stored after them.
_SET_OPTIONS = (
    _option("user", UserOption),
    _option("model", ModelOption, "demo"),
    _option("tenant", TenantOption, MASTER_TENANT),
    _option("conversation", ConversationOption, None),
)
_STORE_OPTIONS = (
    _option("config", ConfigOption, DEFAULT_CONFIG),
    _option("data_dir", DataDirOption, DEFAULT_DATA_DIR),
)


def _memories_command(name: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Register ``body(options: MemorySetOptions, ...)`` as ``memories <name>``.

    The command's parameters, as typer reads them: ``body``'s own arguments (its parameters
    without a default), ``--user --model --tenant --conversation``, ``body``'s own options,
    ``--config --data-dir``; its help is ``body``'s docstring. Returns ``body`` unchanged.
    """

    def register(body: Callable[..., None]) -> Callable[..., None]:
        own = [
            p.replace(kind=inspect.Parameter.KEYWORD_ONLY)
            for p in list(inspect.signature(body, eval_str=True).parameters.values())[1:]
        ]
        params = [
            *(p for p in own if p.default is p.empty),
            *_SET_OPTIONS,
            *(p for p in own if p.default is not p.empty),
            *_STORE_OPTIONS,
        ]
        shared = [p.name for p in (*_SET_OPTIONS, *_STORE_OPTIONS)]

        def command(**values: Any) -> None:
            body(MemorySetOptions(**{n: values.pop(n) for n in shared}), **values)

        command.__signature__ = inspect.Signature(params, return_annotation=None)  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in params}
        command.__doc__ = body.__doc__
        command.__name__ = command.__qualname__ = body.__name__
        memories_app.command(name)(command)
        return body

    return register


def _when(ms: int | None) -> str:
    """Epoch ms as ``YYYY-MM-DD HH:MM:SS UTC`` ("-" for none)."""
    if not ms:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _item_json(item: MemoryItem) -> dict[str, object]:
    return {"id": item.id, "text": item.text, "created_ms": item.created_ms}


def _describe(target: MemoryTarget) -> str:
    return f"user {target.user!r} of tenant {target.tenant!r}, alias {target.alias!r}"


@_memories_command("list")
def list_command(options: MemorySetOptions, as_json: JsonFlag = False) -> None:
    """List pinned and extracted memories with their ids, oldest first.

    Example: litellm-memory memories list --user alice --model demo
    """

    async def call(api: MemoryAPI, target: MemoryTarget) -> MemoryListing:
        return await api.list(target)

    target, listing = options.call(call, require_user=True)
    if as_json:
        payload = {
            "pinned": [_item_json(i) for i in listing.pinned],
            "memories": [_item_json(i) for i in listing.memories],
            "version": listing.version,
        }
        typer.echo(json.dumps(payload, ensure_ascii=False, indent=2))
        return
    table = Table(title=f"memories of {_describe(target)} (version {listing.version})")
    table.add_column("kind")
    table.add_column("id", no_wrap=True)
    table.add_column("created", no_wrap=True)
    table.add_column("text", overflow="fold")
    for kind, items in (("pinned", listing.pinned), ("extracted", listing.memories)):
        for item in items:
            table.add_row(kind, item.id, _when(item.created_ms), item.text)
    console.print(table)
    console.print(f"{len(listing.pinned)} pinned, {len(listing.memories)} extracted")


@_memories_command("pin")
def pin_command(
    options: MemorySetOptions,
    text: Annotated[str, typer.Argument(help="The memory, as the user would write it.")],
) -> None:
    """Pin a memory: the model sees it in every chat and never changes it.

    Example: litellm-memory memories pin "My cat is called Miso." --user alice
    """

    async def call(api: MemoryAPI, target: MemoryTarget) -> MemoryItem:
        return await api.pin(target, text)

    target, item = options.call(call)
    console.print(f"pinned {item.id} for {_describe(target)}")


@_memories_command("edit")
def edit_command(
    options: MemorySetOptions,
    item_id: Annotated[
        str, typer.Argument(metavar="ID", help="A pinned or extracted memory's id.")
    ],
    text: Annotated[str, typer.Argument(help="The new text.")],
) -> None:
    """Replace the text of a memory (ids: `memories list`). A pinned memory keeps its id; an
    extracted one is corrected: the new text is pinned (a new id) and the extracted memory
    deleted (not extracted again), as the inspector's Edit does.

    Example: litellm-memory memories edit 1718000000000-a1b2c3 "My cat is Mochi." --user alice
    """

    async def call(api: MemoryAPI, target: MemoryTarget) -> tuple[str, MemoryItem]:
        if any(m.id == item_id for m in (await api.list(target)).memories):
            return "extracted", await api.correct_extracted(target, item_id, text)
        return "pinned", await api.edit(target, item_id, text)

    target, (kind, item) = options.call(call)
    if kind == "pinned":
        console.print(f"edited {item.id} for {_describe(target)}")
    else:
        console.print(
            f"corrected extracted memory {item_id} of {_describe(target)}: pinned as {item.id}, "
            "the extracted one deleted"
        )


@_memories_command("delete")
def delete_command(
    options: MemorySetOptions,
    item_id: Annotated[
        str, typer.Argument(metavar="ID", help="A pinned or extracted memory's id.")
    ],
) -> None:
    """Delete a memory: a pinned one, else an extracted one (which is then not extracted again).

    Example: litellm-memory memories delete 1718000000000-a1b2c3 --user alice
    """

    async def call(api: MemoryAPI, target: MemoryTarget) -> str:
        try:
            await api.delete_pinned(target, item_id)
            return "pinned"
        except MemoryNotFoundError:
            pass
        try:
            await api.delete_memory(target, item_id)
        except MemoryNotFoundError as exc:
            raise MemoryNotFoundError(f"no memory {item_id!r} (pinned or extracted)") from exc
        return "extracted"

    target, kind = options.call(call)
    console.print(f"deleted {kind} memory {item_id} of {_describe(target)}")


@_memories_command("flush")
def flush_command(options: MemorySetOptions) -> None:
    """Make the conversation due for extraction now (a worker picks it up at its next poll).

    Example: litellm-memory memories flush --user alice --conversation chat-7
    """

    async def call(api: MemoryAPI, target: MemoryTarget) -> int:
        return await api.flush(target)

    target, due_ms = options.call(call)
    console.print(f"{target.conversation.ref} is due for extraction since {_when(due_ms)}")


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
    prefix = proxy_config.settings.key_prefix

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
                "with worker_in_proxy, or litellm-memory worker)",
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


def _api_key(config: ProxyConfig) -> str | None:
    """The key the standalone worker sends: ``extraction_api_key``, else the environment's
    ``LITELLM_MASTER_KEY``, else config.yaml's ``general_settings.master_key``."""
    return (
        config.settings.extraction_api_key
        or os.environ.get("LITELLM_MASTER_KEY")
        or config.master_key
    )


def extraction_url(settings: MemorySettings, data_dir: Path) -> str:
    """Where the standalone worker sends its model calls: ``extraction_base_url`` when it is
    set (the file or ``LITELLM_MEMORY_EXTRACTION_BASE_URL``), else the proxy of the ``serve``
    running on ``data_dir`` (its port, whatever ``--port`` it was given; found by a fresh-user
    run: the worker called 4000, where another proxy may listen), else the default
    (``http://127.0.0.1:4000/v1``)."""
    from litellm_memory_hook.tools.processes import running_serve

    if "extraction_base_url" in settings.model_fields_set:
        return settings.extraction_base_url
    record = running_serve(data_dir)
    return record.proxy_url if record is not None else settings.extraction_base_url


class NamedModel:
    """An extraction model whose call errors name the URL called (``... (calling URL)``)."""

    def __init__(self, model: Any, base_url: str) -> None:
        self._model = model
        self.base_url = base_url

    async def complete(
        self, model: str, messages: list[dict[str, str]], *, json_mode: bool, timeout_s: float
    ) -> Any:
        """:meth:`litellm_memory_hook.extraction.client.ExtractionModel.complete`."""
        try:
            return await self._model.complete(
                model, messages, json_mode=json_mode, timeout_s=timeout_s
            )
        except ExtractionError as exc:
            raise ExtractionError(f"{exc} (calling {self.base_url})") from exc

    async def close(self) -> None:
        """Close the model's HTTP client."""
        await self._model.close()


def worker_command(
    once: Annotated[
        bool, typer.Option("--once", help="Run the jobs due now, print them, and exit.")
    ] = False,
    log_level: Annotated[str, typer.Option(help="Log level (debug, info, warning).")] = "info",
    config: ConfigOption = DEFAULT_CONFIG,
    data_dir: DataDirOption = DEFAULT_DATA_DIR,
) -> None:
    """Run an extraction worker outside the proxy until Ctrl-C / SIGTERM.

    It shares the due conversations in Redis safely with the proxy's worker and other workers.

    Model calls go to extraction_base_url; unset, to the proxy of the serve running on
    --data-dir (its --port), else http://127.0.0.1:4000/v1.

    Key: extraction_api_key, else LITELLM_MASTER_KEY, else general_settings.master_key.

    Example: litellm-memory worker --config config.yaml   (cron: litellm-memory worker --once)
    \f
    Raises:
        typer.Exit: code 2 for a bad config, extraction off, no API key, or Redis failing;
            with --once, code 1 when a job failed (its table row says how many).
    """
    from litellm_memory_hook.extraction.client import OpenAIModel
    from litellm_memory_hook.extraction.worker import ExtractionWorker, JobOutcome

    level = logging.getLevelName(log_level.upper())
    if not isinstance(level, int):
        raise _fail(f"unknown log level {log_level!r} (debug, info, warning, error)")
    proxy_config = command_config(config, data_dir)
    settings = proxy_config.settings
    if not settings.extraction_enabled:
        raise _fail(
            "extraction is off: extraction_enabled is false "
            f"({proxy_config.setting_source('extraction_enabled')})"
        )
    api_key = _api_key(proxy_config)
    if not api_key:
        raise _fail(
            "no API key for the model calls: set callback_settings.memory.extraction_api_key, "
            "LITELLM_MASTER_KEY or general_settings.master_key"
        )
    logging.getLogger("litellm_memory_hook").setLevel(level)
    if not logging.getLogger().handlers:
        from rich.logging import RichHandler

        logging.basicConfig(
            level=logging.WARNING, format="%(message)s", handlers=[RichHandler(console=console)]
        )

    base_url = extraction_url(settings, data_dir)

    async def job(redis: Any) -> list[JobOutcome]:
        model = NamedModel(OpenAIModel(base_url, api_key), base_url)
        worker = ExtractionWorker(redis, settings, model, alias_lookup=alias_lookup(proxy_config))
        try:
            if once:
                return await worker.run_due()
            await _serve_until_signal(worker, base_url)
            return []
        finally:
            await model.close()

    outcomes = run_on_redis(proxy_config, data_dir, job)
    if not once:
        console.print("worker stopped")
        return
    if not outcomes:
        console.print("nothing due")
        return
    table = Table(title=counted(len(outcomes), "extraction job"))
    for column in ("status", "jobs", "memories added", "memories deleted", "more to do"):
        table.add_column(column, justify="right")
    by_status = Counter(o.status for o in outcomes)
    for status, count in sorted(by_status.items()):
        mine = [o for o in outcomes if o.status == status]
        table.add_row(
            status,
            str(count),
            str(sum(o.added for o in mine)),
            str(sum(o.deleted for o in mine)),
            str(sum(1 for o in mine if o.more)),
        )
    console.print(table)
    if by_status.get("failed"):
        # cron and scripts see it: the model could not be called, or answered unusably
        raise typer.Exit(1)


async def _serve_until_signal(worker: Any, base_url: str) -> None:
    """Start ``worker`` and stop it (after its current job) on SIGINT or SIGTERM."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        worker.start()
        console.print(f"extraction worker {worker.worker_id} calling {base_url} (Ctrl-C stops)")
        await stop.wait()
        console.print("stopping after the current job")
        await worker.stop()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


def register(app: typer.Typer) -> None:
    """Add ``memories`` (list, pin, edit, delete, flush), ``stats`` and ``worker`` to ``app``,
    ``users`` and ``conversations`` (:mod:`litellm_memory_hook.tools.cli_users`), and
    ``forget``, ``export``, ``doctor`` with the CLI's error handling
    (:func:`litellm_memory_hook.tools.cli_ops.register`).

    Adding them twice to the same app adds nothing the second time.
    """
    from litellm_memory_hook.tools import cli_ops, cli_users

    cli_ops.register(app)
    cli_users.register(app)
    groups = {g.name for g in app.registered_groups}
    commands = {c.name for c in app.registered_commands}
    if "memories" not in groups:
        app.add_typer(memories_app, name="memories")
    if "stats" not in commands:
        app.command("stats")(stats_command)
    if "worker" not in commands:
        app.command("worker")(worker_command)
    from litellm_memory_hook.tools.cli_tenant import register as register_tenant

    register_tenant(app)  # ``tenant move``


__all__ = ["memories_app", "register", "stats_command", "worker_command"]

# ``memories history`` and ``memories restore`` live in their own module, which registers them on
# ``memories_app`` through :func:`_memories_command` (defined above) when imported here.
from litellm_memory_hook.tools import cli_history as _cli_history  # noqa: E402, F401
