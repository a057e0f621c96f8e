"""``litellm-memory forget``, ``export``, ``doctor``, ``import --format export``, and how every
command reports errors.

* ``forget --user U [--conversation C] [--yes]``: delete every key of a user (all conversations
  and memory sets in the tenant, whatever the alias) or of one conversation, through the user's
  index (no ``KEYS``), with their entries in the due set.
* ``export --user U [--conversation C] [--output FILE]``: the user's conversations (turns,
  summaries) and memory sets (pinned and extracted memories) as JSON (the format:
  :class:`litellm_memory_hook.memory_api.ExportDocument`), on stdout unless ``--output``.
* ``import FILE --format export [--user U] [--tenant T] [--fresh]``: write such a file back.
* ``doctor``: is Redis reachable, which version, cluster or not, persistence (AOF/RDB) and
  ``maxmemory-policy`` with recommendations, whether an extraction worker is alive (a warning
  when jobs are queued and none is), the config's memory-enabled aliases, the LiteLLM
  version, whether the ports ``serve`` would take with the same ``--host``, ``--port`` and
  ``--standin-port`` are free.

Errors: a command that fails prints one line, ``error: ...``, on stderr and exits with a
non-zero code (2 for a problem the command recognised, 1 for anything else); ``--debug``
(anywhere on the command line) shows the full traceback instead. A usage error (a missing
option, an unknown command or option, a bad option value) is one such line too, naming the
``--help`` to read, exit code 2; a command group given no command shows its help.
"""

from __future__ import annotations

import asyncio
import difflib
import importlib.metadata
import json
import os
import re
import sys
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import typer
from redis.exceptions import AuthenticationError, RedisError
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

# typer 0.29+ carries its own copy of click (pyproject requires it); the usage-error handling
# below needs its exception classes, NoArgsIsHelpError included
from typer._click import core as click_core
from typer._click import exceptions as click_exceptions
from typer._click.globals import get_current_context
from typer.core import TyperGroup

from litellm_memory_hook.errors import DatasetError, MemoryHookError, StoreError
from litellm_memory_hook.memory_api import (
    ExportDocument,
    ImportExportResult,
    MemoryAPI,
    MemoryTarget,
    resolve_target,
    resolve_user,
)
from litellm_memory_hook.settings import (
    AliasMemoryConfig,
    MemorySettings,
    load_settings,
    parse_alias_config,
    shadowed_env,
)
from litellm_memory_hook.store.redis_store import AppendResult, MemoryStore
from litellm_memory_hook.store.workers import WorkerHealth
from litellm_memory_hook.tools.cli_common import (
    MASTER_TENANT,
    MAX_PORT,
    ConfigOption,
    DataDirOption,
    counted,
)
from litellm_memory_hook.tools.files import read_utf8
from litellm_memory_hook.tools.proxyconfig import ProxyConfig

T = TypeVar("T")

#: the LiteLLM versions this package supports, ``>=LITELLM_OLDEST,<LITELLM_BELOW`` (pyproject.toml
#: declares the same range; 1.94.0 is the first whose proxy imports a callback named in
#: config.yaml from an installed package, and tests/test_package.py runs it end to end).
LITELLM_OLDEST = "1.94.0"
LITELLM_BELOW = "2"
#: the LiteLLM version CI's main run installs (.ci/constraints.txt) and the Docker image is.
LITELLM_VERSION = "1.108.7"


def _release(version: str) -> tuple[int, ...]:
    """The release numbers of a version (``1.77.2.post1`` -> ``(1, 77, 2)``)."""
    found = re.match(r"\d+(?:\.\d+)*", version.strip())
    return tuple(int(part) for part in found.group(0).split(".")) if found else ()


def litellm_supported(version: str) -> bool:
    """Whether a LiteLLM version is in the supported range."""
    release = _release(version)
    return bool(release) and _release(LITELLM_OLDEST) <= release < _release(LITELLM_BELOW)


#: the oldest Redis the store works with (ZADD LT / GT, ZRANGE BYSCORE).
MIN_REDIS = (6, 2)
DEBUG_KEY = "litellm_memory_debug"
DEBUG_NOTE = "Errors are one line; add --debug anywhere on the command line for the traceback."
CLI_REDIS_TIMEOUT_S = 10.0
DEFAULT_CONFIG = Path("config.yaml")
DEFAULT_DATA_DIR = Path(".litellm-memory")

#: Markup and emoji codes off, as :data:`litellm_memory_hook.tools.cli_common.console`: user ids,
#: file names and error messages are printed as written.
err_console = Console(stderr=True, markup=False, emoji=False)
out_console = Console(markup=False, emoji=False)


# -- errors ---------------------------------------------------------------------------------------


def fail(message: str, code: int = 2) -> typer.Exit:
    """Print ``error: MESSAGE`` as one line on stderr (line breaks in ``MESSAGE``, e.g. from a
    library's exception text, become spaces; a lone surrogate, which no terminal can be sent,
    is shown as its ``\\udXXX`` escape); returns the exit to raise."""
    line = " ".join(part.strip() for part in message.splitlines() if part.strip())
    line = line.encode("utf-8", "backslashreplace").decode("utf-8")
    err_console.print(Text.assemble(("error: ", "red"), line), soft_wrap=True, highlight=False)
    return typer.Exit(code=code)


def describe(exc: BaseException) -> str:
    """One line that says what went wrong, for errors no command turned into a message."""
    import httpx

    try:
        import openai

        if isinstance(exc, openai.APIConnectionError):
            return f"cannot reach the proxy ({exc}); is it running? (litellm-memory serve)"
        if isinstance(exc, openai.APIStatusError):
            return f"the proxy answered {exc.status_code}: {str(exc.message)[:300]}"
    except ImportError:  # pragma: no cover - a dependency
        pass
    if isinstance(exc, httpx.HTTPStatusError):
        return f"{exc.request.url} answered {exc.response.status_code}: {exc.response.text[:300]}"
    if isinstance(exc, httpx.TransportError):
        where = ""
        with suppress(RuntimeError):  # no request attached
            where = f" {exc.request.url}"
        return f"cannot reach{where}: {exc or type(exc).__name__}; is it running?"
    if isinstance(exc, RedisError):
        return f"Redis: {exc}"
    if isinstance(exc, FileNotFoundError):
        return f"file not found: {exc.filename or exc}"
    if isinstance(exc, PermissionError):
        return f"permission denied: {exc.filename or exc}"
    if isinstance(exc, json.JSONDecodeError):
        return f"not valid JSON: {exc}"
    if isinstance(exc, MemoryHookError):
        return str(exc)
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"{type(exc).__name__}: {text[:400]} (run with --debug for the traceback)"


def debug_enabled() -> bool:
    """Whether ``--debug`` was given to the running command."""
    ctx = get_current_context(silent=True)
    return bool(ctx is not None and ctx.find_root().meta.get(DEBUG_KEY))


def _all_commands(group: Any) -> Iterator[Any]:
    for command in getattr(group, "commands", {}).values():
        yield command
        yield from _all_commands(command)


def _plain_usage(param: Any) -> None:
    """Show an argument in usage lines as ``FILE`` (its metavar, else its name in capitals),
    not typer's ``{file}``."""
    if getattr(param, "param_type_name", "") != "argument" or getattr(param, "_plain", False):
        return
    if param.metavar is None and param.name:
        param.metavar = str(param.name).upper()
    original = param.get_usage_pieces

    def pieces(ctx: Any) -> list[str]:
        return [p[1:-1] if p.startswith("{") and p.endswith("}") else p for p in original(ctx)]

    object.__setattr__(param, "get_usage_pieces", pieces)
    object.__setattr__(param, "_plain", True)


def _errors_name_the_command(command: Any) -> None:
    """Make the usage errors ``command`` raises while parsing its arguments carry its context
    (click's parser raises some without one, e.g. ``Option '--user' requires an argument``), so
    that :func:`usage_failure` can name the ``--help`` to read."""
    if getattr(command, "_names_itself", False):
        return
    original = command.parse_args

    def parse_args(ctx: Any, args: list[str]) -> Any:
        try:
            return original(ctx, args)
        except click_exceptions.UsageError as exc:
            if exc.ctx is None:
                exc.ctx = ctx
            raise

    object.__setattr__(command, "parse_args", parse_args)
    object.__setattr__(command, "_names_itself", True)


def adopt_command(group: Any) -> None:
    """Give every command under ``group`` the CLI's usage lines (:func:`_plain_usage`) and
    usage errors that name its ``--help`` (:func:`_errors_name_the_command`): the top-level
    group's at its start, a group loaded later (``bench``) when it is loaded."""
    for command in _all_commands(group):
        _errors_name_the_command(command)
        for param in getattr(command, "params", ()):
            _plain_usage(param)


def usage_error(message: str) -> click_exceptions.UsageError:
    """A usage error of the running command (one line naming its ``--help``, exit code 2, once
    :class:`CommandGroup` catches it), for option values that are wrong together."""
    return click_exceptions.UsageError(message, get_current_context(silent=True))


def usage_failure(exc: click_exceptions.ClickException) -> typer.Exit:
    """Print a usage error (or another click error) as one ``error: ...`` line naming the
    ``--help`` of the command it concerns; returns the exit to raise (click's code: 2 for a
    usage error)."""
    message = " ".join(exc.format_message().split()).rstrip(".")
    ctx = getattr(exc, "ctx", None)
    if isinstance(exc, click_exceptions.UsageError) and ctx is not None:
        message += f"; see {ctx.command_path} --help"
    return fail(message, code=exc.exit_code)


class CommandGroup(TyperGroup):
    """The top-level command group: ``--debug`` is accepted anywhere on the command line, and
    every error is printed as one line: usage errors (:func:`usage_failure`, exit code 2) and
    errors that no command turned into a message (exit code 1) instead of typer's usage box or
    a traceback (with ``--debug``: the traceback of an unexpected error)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        adopt_command(self)
        note = DEBUG_NOTE
        if note not in (self.epilog or ""):
            self.epilog = f"{self.epilog}\n\n{note}" if self.epilog else note

    def parse_args(self, ctx: click_core.Context, args: list[str]) -> list[str]:
        """Take ``--debug`` out of the arguments wherever it is (before a ``--``)."""
        end = args.index("--") if "--" in args else len(args)
        if "--debug" in args[:end]:
            ctx.meta[DEBUG_KEY] = True
            args = [a for i, a in enumerate(args) if i >= end or a != "--debug"]
        try:
            return super().parse_args(ctx, args)
        except click_exceptions.NoArgsIsHelpError:
            raise
        except click_exceptions.ClickException as exc:
            if isinstance(exc, click_exceptions.UsageError) and exc.ctx is None:
                exc.ctx = ctx
            raise usage_failure(exc) from None

    def invoke(self, ctx: click_core.Context) -> Any:
        """Run the command; turn a usage error, and an unexpected exception unless debugging,
        into one line."""
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort, click_exceptions.NoArgsIsHelpError):
            raise
        except click_exceptions.ClickException as exc:
            raise usage_failure(exc) from None
        except BrokenPipeError:  # `... | head`: the reader is gone; stop quietly
            with suppress(OSError, ValueError):
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise typer.Exit(code=1) from None
        except Exception as exc:
            if ctx.meta.get(DEBUG_KEY):
                raise
            raise fail(describe(exc), code=1) from None


# -- Redis ----------------------------------------------------------------------------------------


def load_config(path: Path) -> ProxyConfig:
    """Read config.yaml, or exit with one line."""
    try:
        return ProxyConfig.load(path)
    except MemoryHookError as exc:
        raise fail(str(exc)) from exc


def option_given(name: str) -> bool:
    """Whether the running command's option ``name`` (its parameter name, e.g. ``config``) was
    given on the command line (or from the environment), not left at its default; ``True``
    outside a command (a caller's value counts as given)."""
    ctx = get_current_context(silent=True)
    if ctx is None:
        return True
    source = ctx.get_parameter_source(name)
    return source is not None and source is not click_core.ParameterSource.DEFAULT


def serve_config(data_dir: Path) -> Path | None:
    """The config a ``serve`` on ``data_dir`` runs (or ran last): the one its record names
    (:class:`litellm_memory_hook.tools.processes.ServeRecord`), else the folder's
    ``serve-config.yaml``; ``None`` when neither is there."""
    from litellm_memory_hook.tools.processes import SERVE_CONFIG, ServeRecord

    record = ServeRecord.read(data_dir)
    if record is not None and Path(record.config).is_file():
        return Path(record.config)
    derived = data_dir / SERVE_CONFIG
    return derived if derived.is_file() else None


def command_config(config: Path, data_dir: Path, *, optional: bool = False) -> ProxyConfig:
    """The config a command reads: ``--config`` when given (or ``config.yaml`` when it is in
    the working directory); else the config of the ``serve`` on ``--data-dir``
    (:func:`serve_config`: the command then works from any folder); else, with ``optional``
    (commands that need no alias: ``stats``), the settings of the environment alone; else exit
    with one line saying what to give.
    """
    if config.exists() or option_given("config"):
        return load_config(config)
    found = serve_config(data_dir)
    if found is not None:
        err_console.print(f"config: {found} (the serve of {data_dir}/)", style="dim")
        return load_config(found)
    where = f"no {config} in {Path.cwd()}, and {data_dir}/ holds no config of a serve"
    if optional:
        try:
            settings = load_settings()
        except MemoryHookError as exc:
            raise fail(str(exc)) from exc
        err_console.print(f"config: none ({where}): the environment's settings", style="dim")
        return ProxyConfig(path=config, raw={}, settings=settings)
    raise fail(
        f"cannot read {config}: {where}; give --config, run from the config's folder, or "
        "--data-dir of a serve"
    )


def alias_lookup(config: ProxyConfig) -> Callable[[str], AliasMemoryConfig | None]:
    """Alias name -> its memory config from config.yaml (``None``: unknown or memory off)."""

    def lookup(name: str) -> AliasMemoryConfig | None:
        return parse_alias_config(config.model_info(name))

    return lookup


def redis_url(
    settings: MemorySettings, data_dir: Path, *, quiet: bool = False, create: bool = False
) -> str:
    """The configured Redis URL; with none configured, the embedded Redis of ``data_dir`` (the
    one ``serve`` runs, attached to; started for this command when none runs, and left
    running when a ``serve`` holds the folder: that serve's Redis had stopped). Notes go to
    stderr, so stdout stays clean for JSON.

    Raises:
        EmbeddedRedisError: the embedded Redis did not start, or ``data_dir`` does not exist
            and ``create`` is false (only imports create it; other commands would read or
            write an empty store no proxy uses).
    """
    if "redis_url" in settings.model_fields_set:
        return settings.redis_url
    from litellm_memory_hook.store.embedded import serve_lock_holder, start_embedded

    embedded = start_embedded(data_dir, create=create)
    if not quiet:
        holder = serve_lock_holder(data_dir) if embedded.started else None
        if not embedded.started:
            state = "running"
        elif holder is not None:  # serve's own Redis had stopped: it stays up for that serve
            state = f"started again, left running for serve pid {holder}"
        else:
            state = "started for this command"
        err_console.print(f"embedded Redis {embedded.socket} ({state})", style="dim")
    return embedded.url


def open_redis(
    settings: MemorySettings, data_dir: Path, *, quiet: bool = False, create: bool = False
) -> Any:
    """An asyncio client of :func:`redis_url` (a Cluster client with ``redis_cluster``; with
    ``redis_sentinel_nodes``, of the master the Sentinels name, never the embedded Redis)."""
    from litellm_memory_hook.store.client import client_for_settings, redis_client

    if settings.redis_sentinel_nodes:
        return client_for_settings(settings, timeout_s=CLI_REDIS_TIMEOUT_S)
    url = redis_url(settings, data_dir, quiet=quiet, create=create)
    cluster = settings.redis_cluster and not url.startswith("unix:")
    return redis_client(url, cluster=cluster, timeout_s=CLI_REDIS_TIMEOUT_S)


def run_on_redis(
    config: ProxyConfig,
    data_dir: Path,
    job: Callable[[Any], Awaitable[T]],
    *,
    quiet: bool = False,
    create: bool = False,
) -> T:
    """Run ``job(redis)`` on a fresh client; Redis and package errors become one line, exit 2.
    ``create``: an embedded Redis folder that does not exist yet is created (imports)."""

    async def main() -> T:
        redis = open_redis(config.settings, data_dir, quiet=quiet, create=create)
        try:
            return await job(redis)
        finally:
            await redis.aclose()

    from litellm_memory_hook.store.embedded import EmbeddedRedisError

    try:
        return asyncio.run(main())
    except typer.Exit:
        raise
    except (EmbeddedRedisError, StoreError, MemoryHookError, RedisError, OSError) as exc:
        if debug_enabled():
            raise
        if isinstance(exc, EmbeddedRedisError):
            raise fail(f"embedded Redis in {data_dir}/: {exc}") from exc
        if isinstance(exc, StoreError | RedisError | OSError):
            raise fail(f"Redis ({_safe_url(config.settings, data_dir)}): {exc}") from exc
        raise fail(str(exc)) from exc


def _safe_url(settings: MemorySettings, data_dir: Path) -> str:
    if "redis_url" not in settings.model_fields_set:
        return f"embedded, {data_dir}/"
    return mask_url(settings.redis_url)


def mask_url(url: str) -> str:
    """The URL without its password."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username or ''}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


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


# -- forget and export ----------------------------------------------------------------------------

UserOption = Annotated[
    str, typer.Option("--user", help="The user id (the chat request's 'user' field).")
]
ModelOption = Annotated[
    str,
    typer.Option("--model", help="A memory-enabled alias (resolves --conversation)."),
]
TenantOption = Annotated[
    str,
    typer.Option(
        "--tenant", help="Tenant: master (the master key), team-<id>, user-<id> or key-<hash>."
    ),
]
OneConversationOption = Annotated[
    str | None,
    typer.Option(
        "--conversation", help="Only this conversation (default: everything of the user)."
    ),
]


def _target(
    config: ProxyConfig, *, user: str, model: str, tenant: str, conversation: str | None
) -> MemoryTarget:
    try:
        return resolve_target(
            config.settings,
            alias_lookup(config),
            tenant=tenant,
            user=user,
            model=model,
            conversation=conversation,
        )
    except MemoryHookError as exc:
        raise fail(str(exc)) from exc


def _who(target: MemoryTarget, conversation: str | None) -> str:
    who = f"user {target.user!r} of tenant {target.tenant!r}"
    return f"conversation {conversation!r} of {who}" if conversation else who


def forget_command(
    user: UserOption,
    conversation: OneConversationOption = None,
    model: ModelOption = "demo",
    tenant: TenantOption = MASTER_TENANT,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the counts as JSON.")] = False,
    config: ConfigOption = DEFAULT_CONFIG,
    data_dir: DataDirOption = DEFAULT_DATA_DIR,
) -> None:
    """Forget a user: delete their conversations, summaries, recall index and memories.

    Without --conversation: everything of the user in the tenant, whatever the alias (--model
    is not used).

    With --conversation: that conversation only (shared memories stay), named with --model.

    Without --yes it asks first; answering no prints "not forgotten" and exits 1.

    Example: litellm-memory forget --user alice --yes
    """
    proxy_config = command_config(config, data_dir)
    if conversation:
        target = _target(
            proxy_config, user=user, model=model, tenant=tenant, conversation=conversation
        )
    else:  # the whole user, whatever the alias: --model is not needed (it may have left)
        try:
            target = resolve_user(proxy_config.settings, tenant=tenant, user=user)
        except MemoryHookError as exc:
            raise fail(str(exc)) from exc
    what = _who(target, conversation)
    if not yes:
        if not sys.stdin.isatty():
            raise fail(f"forgetting {what} cannot be undone: add --yes to confirm")
        if not typer.confirm(f"Forget {what}? This cannot be undone", default=False):
            out_console.print(f"not forgotten: {what} is kept", highlight=False)
            raise typer.Exit(code=1)

    async def job(redis: Any) -> Any:
        return await MemoryAPI(redis, proxy_config.settings).forget(
            target, whole_user=not conversation
        )

    result = run_on_redis(proxy_config, data_dir, job)
    if as_json:
        payload = {"user": target.user, "tenant": target.tenant, "conversation": conversation}
        payload.update(result.__dict__)
        typer.echo(json.dumps(payload, ensure_ascii=False))
        return
    if not result.deleted_keys:
        out_console.print(f"nothing stored for {what}", highlight=False)
        return
    out_console.print(
        f"forgot {what}: {result.conversations} conversation(s), {result.memory_sets} memory "
        f"set(s), {counted(result.deleted_keys, 'key')} deleted",
        highlight=False,
    )


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
    target = _target(proxy_config, user=user, model=model, tenant=tenant, conversation=conversation)

    async def job(redis: Any) -> ExportDocument:
        api = MemoryAPI(redis, proxy_config.settings)
        with progress_bar("conversations") as update:
            return await api.export(target, whole_user=not conversation, progress=update)

    document = run_on_redis(proxy_config, data_dir, job)
    text = json.dumps(document.model_dump(mode="json"), ensure_ascii=False, indent=2)
    turns = sum(len(c.turns) for c in document.conversations)
    summary = (
        f"exported {len(document.conversations)} conversation(s), {counted(turns, 'turn')}, "
        f"{len(document.memory_sets)} memory set(s) of {_who(target, conversation)}"
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


# -- doctor ---------------------------------------------------------------------------------------


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


def _redis_problem(exc: BaseException) -> str:
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
            return [Check("redis reachable", "fail", f"{mask_url(url)}: {_redis_problem(exc)}")]
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
                Check("redis mode", "fail", "cluster, but redis_cluster is not set: set it true")
            )
        elif mode != "cluster" and cluster_setting:
            checks.append(
                Check(
                    "redis mode",
                    "fail",
                    f"{mode}, but redis_cluster is true: the cluster client cannot use it; "
                    "set redis_cluster false",
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
        return Check(WORKERS_CHECK, "info", f"none alive; extraction_enabled is false ({queued})")
    if worker_in_proxy:
        start = (
            "start the proxy (worker_in_proxy: true runs one in each proxy process) or "
            "`litellm-memory worker`"
        )
    else:
        start = (
            "worker_in_proxy is false: start `litellm-memory worker` (docker compose: the "
            "worker service)"
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
    Cluster client with ``redis_cluster``); ``warn`` when they cannot be read."""
    from litellm_memory_hook.store.client import redis_client
    from litellm_memory_hook.store.workers import worker_health

    async def read() -> WorkerHealth:
        cluster = settings.redis_cluster and not url.startswith("unix:")
        client = redis_client(url, cluster=cluster, timeout_s=timeout_s)
        try:
            return await worker_health(client, settings.key_prefix)
        finally:
            await client.aclose()

    try:
        health = asyncio.run(read())
    except (MemoryHookError, RedisError, OSError) as exc:
        return Check(WORKERS_CHECK, "warn", f"heartbeats not readable: {describe(exc)}")
    return workers_check(
        health,
        extraction_enabled=settings.extraction_enabled,
        worker_in_proxy=settings.worker_in_proxy,
    )


def _reachable(checks: list[Check]) -> bool:
    """Whether :func:`redis_checks` reached Redis."""
    return any(c.name == "redis reachable" and c.status == "ok" for c in checks)


def _misspelt_memory(block: object) -> str | None:
    """A key of ``block`` that looks like a misspelt ``memory`` (``memroy``, ``Memory``), if
    ``memory`` itself is not there: its block would be silently ignored."""
    if not isinstance(block, dict) or "memory" in block:
        return None
    close = difflib.get_close_matches("memory", [str(k).lower() for k in block], n=1, cutoff=0.7)
    if not close:
        return None
    return next(str(k) for k in block if str(k).lower() == close[0])


def _alias_checks(config: ProxyConfig) -> list[Check]:
    """The memory-enabled aliases and the problems of their memory blocks.

    A failing check (``fail``) is a configuration that would start and then run without memory
    on every request of an alias (a bad ``model_info.memory`` block, a misspelt ``memory``
    key); :func:`config_failures` makes ``serve`` refuse it.
    """
    enabled: list[str] = []
    problems: list[Check] = []
    entries = [e for e in config.raw.get("model_list") or () if isinstance(e, dict)]
    names = {str(e.get("model_name")) for e in entries}
    misspelt = _misspelt_memory(config.raw.get("callback_settings"))
    if misspelt is not None:
        problems.append(
            Check(
                "callback_settings",
                "fail",
                f"{misspelt!r} is not 'memory': the memory settings would be ignored",
            )
        )
    for entry in entries:
        name = str(entry.get("model_name"))
        info = entry.get("model_info") or {}
        misspelt = _misspelt_memory(info)
        if misspelt is not None:
            problems.append(
                Check(
                    f"alias {name}",
                    "fail",
                    f"model_info.{misspelt} is not 'memory': the alias would run without it",
                )
            )
        try:
            alias = parse_alias_config(info)
        except MemoryHookError as exc:
            problems.append(Check(f"alias {name}", "fail", str(exc)))
            continue
        if alias is not None:
            scope = f"namespace {alias.namespace or name}, scope {alias.memory_scope}"
            enabled.append(f"{name} ({scope})")
            wanted = alias.extraction_model
            own_proxy = "extraction_base_url" not in config.settings.model_fields_set
            if wanted and wanted not in names and own_proxy:
                problems.append(
                    Check(
                        f"alias {name}",
                        "warn",
                        f"extraction_model {wanted!r} is not a model_name of this config: "
                        "its extraction jobs would fail",
                    )
                )
    if enabled:
        detail = f"{len(enabled)}: " + "; ".join(enabled)
        return [Check("memory aliases", "ok", detail), *problems]
    return [
        Check("memory aliases", "warn", "none: set model_info.memory.enabled on an alias"),
        *problems,
    ]


def _port_check(name: str, host: str, port: int, probe: str, option: str) -> Check:
    """Whether ``serve`` could take ``host:port``: ``ok`` when it is free; ``info`` when it is
    taken by what answers ``probe`` with 200, as serve's own proxy or stand-in does (a running
    serve, or the deployment doctor is checking); ``fail`` when another program holds it, since
    serve would refuse to start."""
    import httpx

    from litellm_memory_hook.tools.processes import local_url, port_taken

    reason = port_taken(host, port)
    if reason is None:
        return Check(name, "ok", f"{host}:{port} free")
    try:
        answering = httpx.get(local_url(host, port) + probe, timeout=2).status_code == 200
    except httpx.HTTPError:
        answering = False
    if answering:
        return Check(name, "info", f"{host}:{port} in use; it answers {probe} (already running?)")
    return Check(
        name,
        "fail",
        f"{host}:{port} {reason} by another program: serve would refuse to start; stop it or "
        f"pick another port with {option}",
    )


def leftover_check(data_dir: Path) -> Check | None:
    """``warn`` when no ``serve`` holds ``data_dir`` but ports its last ``serve`` recorded
    (:class:`litellm_memory_hook.tools.processes.ServeRecord`) are still taken: its proxy or
    stand-in outlived it (a ``kill -9`` of a serve older than the children's death signal, or
    what took the port since); names the children's pids still alive. ``None`` otherwise."""
    from litellm_memory_hook.store.embedded import serve_lock_holder
    from litellm_memory_hook.tools.processes import ServeRecord, port_taken, process_alive

    record = ServeRecord.read(data_dir)
    if record is None or serve_lock_holder(data_dir) is not None:
        return None
    held: list[str] = []
    pids: list[int] = []
    for name, (host, port) in record.ports().items():
        if port_taken(host, port) is None:
            continue
        pid = record.children.get(name, 0)
        if process_alive(pid):
            pids.append(pid)
            held.append(f"{name} port {host}:{port} (its {name}, pid {pid})")
        else:
            held.append(f"{name} port {host}:{port} (another process)")
    if not held:
        return None
    stop = f"kill {' '.join(map(str, pids))}" if pids else "stop what listens there"
    return Check(
        "serve leftovers",
        "warn",
        f"no serve holds {data_dir}/ (its last serve, pid {record.pid}, is gone), but its "
        f"{', '.join(held)} {'is' if len(held) == 1 else 'are'} still taken: a serve with "
        f"those ports would be refused; {stop}",
    )


def require_distinct_ports(port: int, standin_port: int) -> None:
    """Refuse, as a usage error of the running command (exit code 2), a stand-in port equal to
    the proxy port: ``serve`` starts the stand-in first, and the proxy would then fail to bind.

    Raises:
        click.UsageError: both are the same port.
    """
    if standin_port and standin_port == port:
        raise usage_error(
            f"--port and --standin-port are both {port}: the proxy and the stand-in model "
            "need a port each (--standin-port 0: no stand-in)"
        )


def config_failures(config: ProxyConfig) -> list[str]:
    """The configuration faults that would leave an alias without memory once started (the
    failing checks of :func:`_alias_checks`), one line each; ``serve`` refuses to start on
    any."""
    return [f"{c.name}: {c.detail}" for c in _alias_checks(config) if c.status == "fail"]


def _sentinel_checks(settings: MemorySettings) -> list[Check]:
    """The master the Sentinels name now, then the checks of :func:`redis_checks` on it (no
    ``CONFIG`` needed) and the extraction workers' line."""
    from litellm_memory_hook.store.client import sentinel_master_url

    try:
        url, detail = sentinel_master_url(settings)
    except (MemoryHookError, RedisError, OSError) as exc:
        nodes = ", ".join(settings.redis_sentinel_nodes)
        return [Check("redis sentinel", "fail", f"{nodes}: {_redis_problem(exc)}")]
    checks = [Check("redis sentinel", "ok", detail)]
    found = redis_checks(url, cluster_setting=False, prefix=settings.key_prefix)
    checks.extend(found)
    if _reachable(found):
        checks.append(read_worker_check(url, settings))
    return checks


def _configured_redis_checks(settings: MemorySettings) -> list[Check] | None:
    """The checks of the Redis the settings name (Sentinel, else ``redis_url`` when set);
    ``None`` when they name none (the embedded Redis is checked instead)."""
    if settings.redis_sentinel_nodes:
        return _sentinel_checks(settings)
    if "redis_url" not in settings.model_fields_set:
        return None
    found = redis_checks(
        settings.redis_url, cluster_setting=settings.redis_cluster, prefix=settings.key_prefix
    )
    if _reachable(found):
        found.append(read_worker_check(settings.redis_url, settings))
    return found


def doctor_checks(
    config_path: Path, data_dir: Path, host: str, port: int, standin_port: int = 4010
) -> list[Check]:
    """Every check of ``litellm-memory doctor``, in report order.

    The ports are those ``serve`` would take with the same options: the proxy's ``host:port``
    and the stand-in's ``127.0.0.1:standin_port`` (0: no stand-in, not checked); one another
    program holds fails (:func:`_port_check`).
    """
    from litellm_memory_hook.store.embedded import answers, serve_lock_holder, socket_path

    checks: list[Check] = []
    try:
        config: ProxyConfig | None = ProxyConfig.load(config_path)
        checks.append(Check("config", "ok", str(config_path)))
    except MemoryHookError as exc:
        config = None
        checks.append(Check("config", "fail", str(exc)))
    if config is not None:
        checks.extend(_alias_checks(config))
        shadowed = shadowed_env(config.raw.get("callback_settings"))
        if shadowed:
            checks.append(
                Check(
                    "environment",
                    "warn",
                    f"{', '.join(shadowed)} ignored: {config_path} sets the same key(s), and the "
                    "file wins",
                )
            )
    try:
        installed = importlib.metadata.version("litellm")
    except importlib.metadata.PackageNotFoundError:
        installed = ""
    supported = f"supported: >={LITELLM_OLDEST},<{LITELLM_BELOW}"
    if installed and litellm_supported(installed):
        checks.append(Check("litellm", "ok", f"{installed} ({supported})"))
    else:
        checks.append(
            Check(
                "litellm",
                "warn" if installed else "fail",
                f"{installed or 'not installed'}: this package is {supported}",
            )
        )
    if config is not None:
        settings = config.settings
        configured = _configured_redis_checks(settings)
        if configured is not None:
            checks.extend(configured)
        else:
            sock = socket_path(data_dir)
            holder = serve_lock_holder(data_dir)
            if answers(sock):
                owner = f"serve pid {holder}" if holder else "no serve holds it"
                checks.append(Check("redis", "info", f"embedded, socket {sock} ({owner})"))
                found = redis_checks(
                    f"unix://{sock}", cluster_setting=False, prefix=settings.key_prefix
                )
                checks.extend(found)
                if _reachable(found):
                    checks.append(read_worker_check(f"unix://{sock}", settings))
            elif holder is not None:
                # the serve that owns the folder runs, but its Redis died (kill, OOM): its
                # proxy answers every request without memory
                checks.append(
                    Check(
                        "redis",
                        "fail",
                        f"serve (pid {holder}) holds {data_dir}/ but its embedded Redis does not "
                        f"answer on {sock}: requests go without memory (their turns wait in the "
                        "proxy's buffer); any litellm-memory command with this --data-dir "
                        "(e.g. stats) starts it again for that serve, or restart serve",
                    )
                )
            else:
                checks.append(
                    Check(
                        "redis",
                        "info",
                        f"no redis_url configured and no embedded Redis running: serve starts "
                        f"one in {data_dir}/ (socket {sock}); set REDIS_URL for your own Redis",
                    )
                )
    leftover = leftover_check(data_dir)
    if leftover is not None:
        checks.append(leftover)
    checks.append(_port_check("proxy port", host, port, "/health/liveliness", "--port"))
    if standin_port:
        checks.append(
            _port_check(
                "stand-in port",
                "127.0.0.1",
                standin_port,
                "/v1/models",
                "--standin-port (0: no stand-in)",
            )
        )
    return checks


_STYLE = {"ok": "green", "warn": "yellow", "fail": "red", "info": "cyan"}


def doctor_command(
    config: ConfigOption = DEFAULT_CONFIG,
    data_dir: DataDirOption = DEFAULT_DATA_DIR,
    port: Annotated[
        int, typer.Option(min=1, max=MAX_PORT, help="The proxy port serve would use.")
    ] = 4000,
    host: Annotated[str, typer.Option(help="The proxy host serve would use.")] = "127.0.0.1",
    standin_port: Annotated[
        int,
        typer.Option(
            min=0, max=MAX_PORT, help="The stand-in model port serve would use (0: none)."
        ),
    ] = 4010,
    as_json: Annotated[bool, typer.Option("--json", help="Print the checks as JSON.")] = False,
) -> None:
    """Check Redis, persistence, eviction policy, extraction workers, memory aliases, LiteLLM
    and ports.

    Redis: reachable, version (6.2+), cluster or not, Lua, AOF/RDB, maxmemory-policy.

    Extraction workers: how many are alive (a heartbeat in Redis); a warning when jobs are
    queued and none is (they wait until one runs).

    Ports: those serve takes with the same --host, --port and --standin-port; one that
    another program holds fails (serve would refuse to start), one that answers as serve's
    proxy or stand-in does is information (already running).

    Exit code 1 when a check fails (Redis unreachable or too old, a broken memory block, a
    taken port ...); warnings (persistence, eviction policy ...) come with a recommendation
    and leave the exit code 0.

    Example: litellm-memory doctor --config config.yaml
    """
    require_distinct_ports(port, standin_port)
    if not config.exists() and not option_given("config"):
        config = serve_config(data_dir) or config
    checks = doctor_checks(config, data_dir, host, port, standin_port)
    failed = any(c.status == "fail" for c in checks)
    if as_json:
        typer.echo(json.dumps([c.__dict__ for c in checks], ensure_ascii=False, indent=2))
    else:
        table = Table(title="litellm-memory doctor")
        table.add_column("check")
        table.add_column("status")
        table.add_column("detail", overflow="fold")
        for check in checks:
            table.add_row(check.name, Text(check.status, style=_STYLE[check.status]), check.detail)
        out_console.print(table)
        warnings = sum(1 for c in checks if c.status == "warn")
        verdict = "problems found" if failed else "ready"
        out_console.print(f"{verdict}: {warnings} warning(s)", highlight=False)
    if failed:
        raise typer.Exit(code=1)


def register(app: typer.Typer) -> None:
    """Add ``forget``, ``export`` and ``doctor`` to ``app`` and give it the one-line error
    handling and ``--debug`` option of :class:`CommandGroup` (idempotent)."""
    app.info.cls = CommandGroup
    commands = {c.name for c in app.registered_commands}
    for name, function in (
        ("forget", forget_command),
        ("export", export_command),
        ("doctor", doctor_command),
    ):
        if name not in commands:
            app.command(name)(function)


__all__ = [
    "CommandGroup",
    "describe",
    "doctor_checks",
    "fail",
    "import_export_file",
    "open_redis",
    "progress_bar",
    "progress_store",
    "redis_checks",
    "register",
    "run_on_redis",
    "workers_check",
]
