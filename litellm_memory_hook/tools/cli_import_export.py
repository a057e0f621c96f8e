"""``litellm-memory import`` and ``export``: a chat history or an export into Redis, and a
user's data out of it.

* ``import FILE --user U [--format locomo|jsonl]``: bulk-load a chat history (the readers of
  :mod:`litellm_memory_hook.tools.histories`) through the store, as the proxy would have
  stored it, and schedule its extraction.
* ``export --user U [--conversation C] [--output FILE]``: the user's conversations (turns,
  summaries) and memory sets (pinned and extracted memories) as JSON (the format:
  :class:`litellm_memory_hook.memory_api.ExportDocument`), on stdout unless ``--output``.
* ``import FILE --format export [--user U] [--tenant T] [--fresh]``: write such a file back.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from litellm_memory_hook.errors import DatasetError, MemoryHookError
from litellm_memory_hook.memory_api import ExportDocument, ImportExportResult, MemoryAPI
from litellm_memory_hook.store.forgets import forget_token_ttl_s
from litellm_memory_hook.store.redis_store import AppendResult, MemoryStore
from litellm_memory_hook.tools.cli_common import (
    DEFAULT_CONFIG,
    DEFAULT_DATA_DIR,
    MASTER_TENANT,
    ConfigOption,
    DataDirOption,
    ModelOption,
    OneConversationOption,
    TenantOption,
    UserOption,
    console,
    counted,
    err_console,
    out_console,
)
from litellm_memory_hook.tools.cli_connect import (
    command_config,
    identity,
    memory_target,
    open_redis,
    run_on_redis,
    who,
)
from litellm_memory_hook.tools.cli_errors import fail
from litellm_memory_hook.tools.files import read_utf8
from litellm_memory_hook.tools.histories import History, load_jsonl, load_locomo, skipped_summary

IMPORT_FORMATS = ("locomo", "jsonl", "export")


def read_history(file: Path, fmt: str, sample_id: str | None) -> History:
    try:
        if fmt == "locomo":
            if not sample_id:
                raise fail("--sample-id is required with --format locomo")
            return load_locomo(file, sample_id)
        if fmt == "jsonl":
            return load_jsonl(file)
    except MemoryHookError as exc:
        raise fail(str(exc)) from exc
    raise fail(f"unknown format {fmt!r} (locomo or jsonl)")


_EXPORT_MARK = re.compile(rb'"format"\s*:\s*"litellm-memory-export"')


def _import_format(file: Path) -> str:
    """The format of a file given without ``--format``: ``jsonl`` for a ``.jsonl`` file, else
    ``export`` when its first 4 KB hold ``"format": "litellm-memory-export"`` (what
    ``litellm-memory export`` writes first), else ``locomo``."""
    if file.suffix.lower() == ".jsonl":
        return "jsonl"
    with file.open("rb") as head:
        return "export" if _EXPORT_MARK.search(head.read(4096)) else "locomo"


def import_command(
    file: Annotated[Path, typer.Argument(metavar="FILE", help="The history file, or an export.")],
    user: Annotated[
        str | None,
        typer.Option(help="The user id (the request's 'user' field); export: the file's."),
    ] = None,
    fmt: Annotated[
        str | None,
        typer.Option(
            "--format",
            help="locomo, jsonl or export (a file of `litellm-memory export`); default: jsonl "
            "for a .jsonl file, export for a file that `litellm-memory export` wrote, else "
            "locomo.",
        ),
    ] = None,
    sample_id: Annotated[str | None, typer.Option(help="LoCoMo sample, e.g. conv-26.")] = None,
    model: Annotated[str, typer.Option(help="The memory-enabled alias.")] = "demo",
    conversation: Annotated[str | None, typer.Option(help="Conversation id.")] = None,
    tenant: Annotated[
        str | None,
        typer.Option(help="Tenant (default: the master key's; export: the file's)."),
    ] = None,
    fresh: Annotated[
        bool,
        typer.Option(help="Delete the conversation first (export: its conversations and sets)."),
    ] = False,
    config: ConfigOption = Path("config.yaml"),
    data_dir: DataDirOption = Path(".litellm-memory"),
) -> None:
    """Bulk-load a chat history for USER, or write an export back (--format export).

    History: lines already stored are skipped; --fresh replaces the conversation. System and
    tool messages and messages without text are left out (listed on stderr); a line that cannot
    be a turn (an unknown or missing role, content that is not text) refuses the file.

    Export: written back exactly (seqs, memory ids, summaries); refused over data unless --fresh.

    Example: litellm-memory import chat.jsonl --format jsonl --user alice

    Example: litellm-memory import alice.json --format export
    """
    from litellm_memory_hook.store.queue import ExtractionQueue
    from litellm_memory_hook.tools.importer import (
        delete_conversation,
        import_lines,
        importable,
        schedule_import,
    )

    if not file.exists():
        raise fail(f"file not found: {file}")
    if not file.is_file():
        raise fail(f"not a file: {file}")
    fmt = fmt or _import_format(file)
    if fmt not in IMPORT_FORMATS:
        raise fail(f"unknown format {fmt!r} ({', '.join(IMPORT_FORMATS)})")
    if fmt == "export":
        import_export_file(
            file, user=user, tenant=tenant, fresh=fresh, config=config, data_dir=data_dir
        )
        return
    if not user:
        raise fail(f"--user is required with --format {fmt}")
    proxy_config = command_config(config, data_dir)
    lines, skipped = importable(read_history(file, fmt, sample_id))
    if not lines:
        what = f", {skipped_summary(skipped)}" if skipped else " (no lines)"
        raise fail(f"{file}: nothing to import{what}")
    who = identity(proxy_config, model, user, conversation, tenant or MASTER_TENANT)
    if skipped:
        err_console.print(f"{file}: {skipped_summary(skipped)}", soft_wrap=True, highlight=False)

    async def run() -> Any:
        redis = open_redis(proxy_config.settings, data_dir, create=True)
        try:
            with progress_bar("lines", len(lines)) as update:
                store = progress_store(
                    redis, proxy_config.settings.storage.retention_s, len(lines), update
                )
                if fresh:
                    await delete_conversation(
                        store,
                        who,
                        token_ttl_s=forget_token_ttl_s(
                            proxy_config.settings.write_buffer.max_age_s
                        ),
                    )
                result = await import_lines(
                    store,
                    who,
                    lines,
                    max_chars=proxy_config.settings.storage.max_message_chars,
                    max_messages=proxy_config.settings.storage.max_messages,
                )
                update(len(lines), len(lines))
            queue = ExtractionQueue(redis, proxy_config.settings.storage.key_prefix)
            await schedule_import(queue, who, result)
            return result
        finally:
            await redis.aclose()

    from litellm_memory_hook.store.embedded import EmbeddedRedisError

    try:
        result = asyncio.run(run())
    except EmbeddedRedisError as exc:
        raise fail(f"embedded Redis in {data_dir}/: {exc}") from exc
    except MemoryHookError as exc:
        raise fail(str(exc)) from exc
    if result.turns == 0 and lines:
        console.print(f"nothing new: these lines are already in {who.keys.turns}")
        return
    _print_import(result, who, proxy_config.settings.storage.max_messages)


def _print_import(result: Any, who: Any, max_messages: int) -> None:
    """What an import of a history file wrote, and what the bound on stored messages took."""
    console.print(
        f"imported {counted(result.turns, 'turn')} (seq {result.first_seq}-{result.last_seq}) "
        f"into {who.keys.turns}"
    )
    bound = f"to keep storage.max_messages ({max_messages})"
    if result.left_out:
        console.print(f"left out the file's {counted(result.left_out, 'oldest line')} {bound}")
    if result.trimmed:
        console.print(f"deleted the {counted(result.trimmed, 'oldest turn')} {bound}")


@contextmanager
def progress_bar(
    description: str, total: int | None = None
) -> Iterator[Callable[[int, int], None]]:
    """A progress bar on stderr (when it is a terminal); yields ``update(done, total)``."""
    if not err_console.is_terminal:
        yield lambda done, total_now: None
        return
    columns = (
        TextColumn("{task.description}", markup=False),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=err_console, transient=False) as bar:
        task = bar.add_task(description, total=total)

        def update(done: int, total_now: int) -> None:
            bar.update(task, completed=done, total=total_now)

        yield update


def progress_store(
    redis: Any, ttl_s: int, total: int, update: Callable[[int, int], None]
) -> MemoryStore:
    """A :class:`MemoryStore` that reports the turns it appends to ``update(done, total)``
    (the import's progress bar)."""

    class CountingStore(MemoryStore):
        done = 0

        async def append(self, *args: Any, **kwargs: Any) -> AppendResult:
            result = await super().append(*args, **kwargs)
            turns = args[1] if len(args) > 1 else kwargs.get("turns", ())
            self.done += len(turns)
            update(min(self.done, total), total)
            return result

    return CountingStore(redis, ttl_s=ttl_s)


def export_command(
    user: UserOption,
    conversation: OneConversationOption = None,
    model: ModelOption = "demo",
    tenant: TenantOption = MASTER_TENANT,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", metavar="FILE", help="Write here instead of stdout."),
    ] = None,
    config: ConfigOption = DEFAULT_CONFIG,
    data_dir: DataDirOption = DEFAULT_DATA_DIR,
) -> None:
    """Export a user's conversations (turns, summaries) and memories as JSON.

    Read it back with: litellm-memory import FILE --format export

    Example: litellm-memory export --user alice > alice.json
    """
    proxy_config = command_config(config, data_dir)
    target = memory_target(
        proxy_config, user=user, model=model, tenant=tenant, conversation=conversation
    )

    async def job(redis: Any) -> ExportDocument:
        api = MemoryAPI(redis, proxy_config.settings)
        with progress_bar("conversations") as update:
            return await api.export(target, whole_user=not conversation, progress=update)

    document = run_on_redis(proxy_config, data_dir, job)
    text = json.dumps(document.model_dump(mode="json"), ensure_ascii=False, indent=2)
    turns = sum(len(c.turns) for c in document.conversations)
    summary = (
        f"exported {len(document.conversations)} conversation(s), {counted(turns, 'turn')}, "
        f"{len(document.memory_sets)} memory set(s) of {who(target, conversation)}"
    )
    if output is None:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
        err_console.print(summary, highlight=False)
        return
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(text + "\n", encoding="utf-8")
    except OSError as exc:
        raise fail(f"cannot write {output}: {exc.strerror or exc}") from exc
    out_console.print(f"{summary} to {output}", highlight=False)


def read_export(file: Path) -> ExportDocument:
    """Read and validate an export file, or exit with one line."""
    if not file.exists():
        raise fail(f"file not found: {file}")
    try:
        data = json.loads(read_utf8(file, DatasetError))
    except DatasetError as exc:
        raise fail(str(exc)) from exc
    except json.JSONDecodeError as exc:
        raise fail(f"{file} is not a JSON file: {exc}") from exc
    try:
        return ExportDocument.parse(data)
    except MemoryHookError as exc:
        raise fail(f"{file}: {exc}") from exc


def import_export_file(
    file: Path,
    *,
    user: str | None,
    tenant: str | None,
    fresh: bool,
    config: Path,
    data_dir: Path,
) -> ImportExportResult:
    """``import FILE --format export``: write an export back (for the file's user and tenant,
    or those given), with a progress bar; prints what was written."""
    proxy_config = command_config(config, data_dir)
    document = read_export(file)
    to_user = user or document.user
    to_tenant = tenant or document.tenant
    total = sum(len(c.turns) for c in document.conversations)

    async def job(redis: Any) -> ImportExportResult:
        api = MemoryAPI(redis, proxy_config.settings)
        with progress_bar("turns", total) as update:
            return await api.import_export(
                document, tenant=to_tenant, user=to_user, fresh=fresh, progress=update
            )

    result = run_on_redis(proxy_config, data_dir, job, create=True)
    out_console.print(
        f"imported {result.conversations} conversation(s), {counted(result.turns, 'turn')}, "
        f"{result.memory_sets} memory set(s) ({counted(result.memories, 'memory', 'memories')}) "
        f"for user {to_user!r} "
        f"of tenant {to_tenant!r}",
        highlight=False,
    )
    return result


__all__ = [
    "IMPORT_FORMATS",
    "export_command",
    "import_command",
    "import_export_file",
    "progress_bar",
    "progress_store",
    "read_export",
    "read_history",
]
