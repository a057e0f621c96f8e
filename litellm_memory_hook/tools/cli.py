"""The ``litellm-memory`` command: serve, import, replay, show, bench, standin."""

from __future__ import annotations

import os

# LiteLLM fetches its model cost map from the internet at import unless told not to.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import asyncio
import json
import re
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Annotated, Any

import typer
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from litellm_memory_hook.errors import MemoryHookError
from litellm_memory_hook.proxy.identity import Identity
from litellm_memory_hook.settings import MemorySettings
from litellm_memory_hook.store.forgets import forget_token_ttl_s
from litellm_memory_hook.store.keys import (
    ConversationKeys,
    conversation_scope,
    normalize_user_id,
    user_scope,
)
from litellm_memory_hook.tools import cli_bench, cli_ops, cli_serve, processes, standin
from litellm_memory_hook.tools.cli_common import (
    MASTER_TENANT,
    MAX_PORT,
    ConfigOption,
    DataDirOption,
    console,
    counted,
    print_table,
)
from litellm_memory_hook.tools.histories import (
    History,
    load_jsonl,
    load_locomo,
    skipped_summary,
)
from litellm_memory_hook.tools.proxyconfig import ProxyConfig

if TYPE_CHECKING:
    from litellm_memory_hook.store.embedded import EmbeddedRedis

app = typer.Typer(help="Long memory for chat models behind a LiteLLM proxy.", no_args_is_help=True)
cli_bench.register(app)
SERVE_POLL_S = 1.0
"""How often ``serve`` looks at its proxy and reaps its embedded Redis when that died (s)."""


def _shown(url: str) -> str:
    """A Redis URL as a table title shows it (its password masked)."""
    return cli_ops.mask_url(url)


def _fail(message: str) -> typer.Exit:
    """One line on stderr, exit code 2 (:func:`litellm_memory_hook.tools.cli_ops.fail`)."""
    return cli_ops.fail(message)


def _load_config(path: Path) -> ProxyConfig:
    return cli_ops.load_config(path)


def _redis_client(settings: MemorySettings, data_dir: Path, *, create: bool = False) -> Any:
    """An asyncio client of the configured Redis, else the embedded one of ``data_dir``
    (:func:`litellm_memory_hook.tools.cli_ops.open_redis`; ``create`` only for imports)."""
    return cli_ops.open_redis(settings, data_dir, create=create)


def _identity(
    config: ProxyConfig, model: str, user: str, conversation: str | None, tenant: str
) -> Identity:
    try:
        namespace = config.namespace(model)
    except MemoryHookError as exc:
        raise _fail(str(exc)) from exc
    user_id = normalize_user_id(user)
    if user_id is None:
        raise _fail(f"user id {user!r} is empty or a placeholder: such requests get no memory")
    conv = conversation or namespace
    keys = ConversationKeys.for_ids(config.settings.key_prefix, tenant, user_id, conv)
    scope = (
        conversation_scope(keys.conversation)
        if config.alias(model).memory_scope == "conversation"
        else user_scope(namespace)
    )
    memory = keys.user_keys.memory_set(scope)
    return Identity(tenant, user_id, conv, namespace, keys, memory, model)


#: The next message ``show`` assumes when none is given and none is stored: no letters, so the
#: language reminder names no script (a chat's first message decides it).
SHOW_PLACEHOLDER = "\u2026"


#: the longest wait between two attempts to start a dead embedded Redis that would not start.
RESTART_BACKOFF_MAX_S = 30.0
#: lines of one kind (a restart, a failed restart) ``serve`` prints at most once per period.
SERVE_LINE_PERIOD_S = 60.0
#: the key of the example configuration; ``serve`` names it in its ready line.
DEMO_KEY = "sk-memory-demo"


class _Supervisor:
    """``serve``'s watch over its embedded Redis: a server that died is started again at the
    next poll (within :data:`SERVE_POLL_S` s), with one line saying so; one that will not start
    is tried again with a growing pause (up to :data:`RESTART_BACKOFF_MAX_S`); lines of a kind
    repeat at most once per :data:`SERVE_LINE_PERIOD_S`, with a count."""

    def __init__(
        self, embedded: EmbeddedRedis, clock: Callable[[], float] = time.monotonic
    ) -> None:
        from litellm_memory_hook.ratelimited_log import RateLimitedLog

        self.embedded = embedded
        self.clock = clock
        self.lines = RateLimitedLog(lambda text: _serve_line(text), SERVE_LINE_PERIOD_S, clock)
        self.failures = 0
        self.next_try = 0.0
        self.restarts = 0

    def poll(self) -> None:
        """Reap or restart the server if it died; print what happened."""
        from litellm_memory_hook.store.embedded import EmbeddedRedisError

        self.lines.flush()
        now = self.clock()
        if now < self.next_try:
            self.embedded.reap()
            return
        try:
            line = self.embedded.restart_if_dead()
        except EmbeddedRedisError as exc:
            self.failures += 1
            pause = min(RESTART_BACKOFF_MAX_S, 2.0**self.failures)
            self.next_try = now + pause
            self.lines.emit("failed", f"{exc}; trying again in {pause:g} s")
            return
        if line is not None:
            self.restarts += 1
            self.failures = 0
            self.next_try = 0.0
            self.lines.emit("restarted", line)

    def close(self) -> None:
        """Print the counts still held back."""
        self.lines.flush(force=True)


def _serve_line(text: str) -> None:
    console.print(text, soft_wrap=True, highlight=False)


def _wait_serving(proxy: subprocess.Popen[bytes], embedded: EmbeddedRedis | None) -> int:
    """Wait for the proxy to exit (its exit code), looking after the embedded Redis meanwhile:
    a server that died is reaped (no defunct process is left under a serve that runs on) and
    started again within about :data:`SERVE_POLL_S` seconds (:class:`_Supervisor`)."""
    supervisor = _Supervisor(embedded) if embedded is not None else None
    try:
        while (code := proxy.poll()) is None:
            if supervisor is not None:
                supervisor.poll()
            time.sleep(SERVE_POLL_S)
    finally:
        if supervisor is not None:
            supervisor.close()
    return code


def _stop_serving(
    children: list[subprocess.Popen[bytes]],
    embedded: EmbeddedRedis | None,
    lock: Any,
    *,
    standin: bool,
) -> list[str]:
    """Stop what ``serve`` started: its children all at once (each waits for its own shutdown),
    so the proxy's pending memory writes land before the embedded Redis saves and stops; then
    release the data folder. Returns what was stopped, for the last line."""
    processes.terminate_all(children, timeout_s=10)
    names = (["the stand-in model"] if standin else []) + ["the proxy"]
    stopped = names[: len(children)]
    if embedded is not None:
        embedded.stop()
        stopped.append("the embedded Redis (saved)")
    if lock is not None:
        lock.release()
    return stopped


def _ready_line(url: str, master_key: str | None) -> str:
    """``serve``'s ready line: the proxy URL, the inspector's URL and the key to use (the demo
    key by name; any other master key only by where it is set, never its text)."""
    if master_key == DEMO_KEY:
        key = f"key: {DEMO_KEY}"
    elif master_key:
        key = "key: the master_key of the config"
    else:
        key = "no master key set"
    return f"proxy with memory: {url}  inspector: {url}/memory/ui  {key}  (Ctrl-C stops)"


def _stopped_line(stopped: list[str], data_dir: Path | None, redis_url: str) -> str:
    """``serve``'s last line: what it stopped and where the memory stays."""
    what = ", ".join(stopped) if stopped else "nothing was running"
    if data_dir is not None:
        where = f"the memory stays in {data_dir.resolve()}/ (the next serve there uses it)"
    else:
        where = f"the memory stays in the Redis at {cli_ops.mask_url(redis_url)}"
    return f"serve stopped: {what}; {where}"


@app.command()
def serve(
    config: ConfigOption = Path("config.yaml"),
    port: Annotated[int, typer.Option(min=1, max=MAX_PORT, help="Proxy port.")] = 4000,
    host: Annotated[str, typer.Option(help="Proxy host.")] = "127.0.0.1",
    standin_port: Annotated[
        int, typer.Option(min=0, max=MAX_PORT, help="Stand-in model port (0: none).")
    ] = 4010,
    data_dir: DataDirOption = Path(".litellm-memory"),
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose",
            help="Show the proxy's and the stand-in's own output here (default: "
            "<data-dir>/proxy.log and standin.log).",
        ),
    ] = False,
) -> None:
    """Run the LiteLLM proxy with memory (an embedded Redis when no Redis URL is configured).

    Refuses to start when a port is taken, --port and --standin-port are the same, another
    serve uses the same --data-dir, or an alias's memory block is broken or misspelt (it would
    run without memory). LiteLLM's banner and access log go to <data-dir>/proxy.log unless
    --verbose; `litellm-memory status` and `stop` find it by its --data-dir.

    Example: litellm-memory serve --config config.yaml --port 4000
    """
    from litellm_memory_hook.store.embedded import EmbeddedRedisError, ServeLock, start_embedded
    from litellm_memory_hook.tools.cli_ops import (
        config_failures,
        fail,
        load_config,
        require_distinct_ports,
    )

    def _stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    require_distinct_ports(port, standin_port)
    loaded = load_config(config)
    faults = config_failures(loaded)
    if faults:
        raise fail(f"{config}: " + "; ".join(faults) + " (see litellm-memory doctor)")
    proxy_settings = loaded.settings
    busy = processes.busy_port_message(
        [("proxy", host, port, "--port"), ("stand-in", "127.0.0.1", standin_port, "--standin-port")]
    )
    if busy:
        raise fail(busy)
    # Stop the children on `kill` as on Ctrl-C; SIGINT explicitly too, since a serve started in
    # the background by a script inherits it ignored (and `kill -INT` would do nothing).
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    settings_env = os.environ.copy()
    embedded = None
    lock = None
    ready = False
    children: list[subprocess.Popen[bytes]] = []
    outputs: list[IO[bytes] | None] = []
    try:
        if (
            "redis_url" not in proxy_settings.model_fields_set
            and not proxy_settings.redis_sentinel_nodes
        ):
            try:
                lock = ServeLock.acquire(data_dir)
                embedded = start_embedded(data_dir, owner=True)
            except EmbeddedRedisError as exc:
                raise fail(str(exc)) from exc
            # Only the memory hook gets it: LiteLLM itself would also use a REDIS_URL it sees.
            settings_env["LITELLM_MEMORY_REDIS_URL"] = embedded.url
            console.print(
                f"embedded Redis: {embedded.socket} (data in {data_dir}/; "
                f"redis-cli -s {embedded.socket})",
                soft_wrap=True,
            )
        settings_env.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        # the children end with serve, even on kill -9 (found by a fresh-user run: they were
        # left holding the ports); the embedded Redis may outlive it (see store/embedded.py)
        if standin_port:
            outputs.append(cli_serve.child_output(data_dir, cli_serve.STANDIN_LOG, verbose))
            command = processes.standin_command(standin_port)
            children.append(cli_serve.spawn_child(command, settings_env, outputs[-1]))
            try:
                processes.wait_http(f"http://127.0.0.1:{standin_port}/v1/models", children[-1], 30)
            except RuntimeError as exc:
                raise fail(f"the stand-in model did not start: {exc}".splitlines()[0]) from exc
            console.print(f"stand-in model: http://127.0.0.1:{standin_port}/v1")
        proxy_config = processes.config_for_standin(config, standin_port, data_dir)
        outputs.append(cli_serve.child_output(data_dir, cli_serve.PROXY_LOG, verbose))
        proxy = cli_serve.spawn_child(
            processes.proxy_command(proxy_config, port, host), settings_env, outputs[-1]
        )
        proxy_log = None if verbose else data_dir / cli_serve.PROXY_LOG
        where = "its output is above" if proxy_log is None else f"its log: {proxy_log}"
        children.append(proxy)
        if lock is not None:  # the folder is this serve's: say where its proxy listens
            processes.ServeRecord(
                os.getpid(),
                host,
                port,
                standin_port,
                str(proxy_config.resolve()),
                {"proxy": proxy.pid, **({"stand-in": children[0].pid} if standin_port else {})},
            ).write(data_dir)
        url = processes.local_url(host, port)
        console.print(
            f"starting the LiteLLM proxy on {host}:{port} ..."
            + ("" if proxy_log is None else f" (its output: {proxy_log})"),
            soft_wrap=True,
        )
        try:
            processes.wait_http(f"{url}/health/liveliness", proxy, 300)
        except RuntimeError as exc:
            cli_serve.print_log_tail(proxy_log)
            raise fail(
                f"the proxy did not start on {host}:{port}: {exc}".splitlines()[0] + f" ({where})"
            ) from exc
        console.print(_ready_line(url, loaded.master_key), soft_wrap=True, highlight=False)
        ready = True
        code = _wait_serving(proxy, embedded)
        if code not in (0, -signal.SIGINT, -signal.SIGTERM):
            raise fail(f"the proxy exited with code {code} ({where})")
    except KeyboardInterrupt:
        pass
    finally:
        stopped = _stop_serving(children, embedded, lock, standin=bool(standin_port))
        cli_serve.close_outputs(outputs)
        if ready:  # a serve that refused to start said why in its one line
            console.print(
                _stopped_line(
                    stopped,
                    data_dir if embedded is not None else None,
                    proxy_settings.redis_url,
                ),
                soft_wrap=True,
                highlight=False,
            )


@app.command("standin")
def standin_command(
    port: Annotated[int, typer.Option(min=1, max=MAX_PORT, help="Port.")] = standin.DEFAULT_PORT,
    host: Annotated[str, typer.Option(help="Host.")] = "127.0.0.1",
    mode: Annotated[
        str | None,
        typer.Option(
            help="How extraction calls are answered: default (a simple rule) or oracle (LoCoMo "
            "observation labels from --oracle). Default: oracle with --oracle, else default; "
            "env STANDIN_MODE."
        ),
    ] = None,
    oracle: Annotated[
        Path | None,
        typer.Option(help="A LoCoMo-format JSON file for oracle mode (env STANDIN_ORACLE)."),
    ] = None,
    assistant_name: Annotated[
        str | None,
        typer.Option(
            help="The assistant's speaker name in extraction prompts, besides 'assistant' "
            "(env STANDIN_ASSISTANT_NAME)."
        ),
    ] = None,
) -> None:
    """Run the local stand-in model (OpenAI-compatible, records what it receives)."""
    try:
        standin.run(host=host, port=port, mode=mode, oracle=oracle, assistant_name=assistant_name)
    except (ValueError, MemoryHookError) as exc:
        raise _fail(str(exc)) from exc


IMPORT_FORMATS = ("locomo", "jsonl", "export")


def _read_history(file: Path, fmt: str, sample_id: str | None) -> History:
    try:
        if fmt == "locomo":
            if not sample_id:
                raise _fail("--sample-id is required with --format locomo")
            return load_locomo(file, sample_id)
        if fmt == "jsonl":
            return load_jsonl(file)
    except MemoryHookError as exc:
        raise _fail(str(exc)) from exc
    raise _fail(f"unknown format {fmt!r} (locomo or jsonl)")


_EXPORT_MARK = re.compile(rb'"format"\s*:\s*"litellm-memory-export"')


def _import_format(file: Path) -> str:
    """The format of a file given without ``--format``: ``jsonl`` for a ``.jsonl`` file, else
    ``export`` when its first 4 KB hold ``"format": "litellm-memory-export"`` (what
    ``litellm-memory export`` writes first), else ``locomo``."""
    if file.suffix.lower() == ".jsonl":
        return "jsonl"
    with file.open("rb") as head:
        return "export" if _EXPORT_MARK.search(head.read(4096)) else "locomo"


@app.command("import")
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
    from litellm_memory_hook.tools.cli_ops import (
        err_console,
        fail,
        import_export_file,
        progress_bar,
        progress_store,
    )
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
    proxy_config = cli_ops.command_config(config, data_dir)
    lines, skipped = importable(_read_history(file, fmt, sample_id))
    if not lines:
        what = f", {skipped_summary(skipped)}" if skipped else " (no lines)"
        raise fail(f"{file}: nothing to import{what}")
    who = _identity(proxy_config, model, user, conversation, tenant or MASTER_TENANT)
    if skipped:
        err_console.print(f"{file}: {skipped_summary(skipped)}", soft_wrap=True, highlight=False)

    async def run() -> Any:
        redis = _redis_client(proxy_config.settings, data_dir, create=True)
        try:
            with progress_bar("lines", len(lines)) as update:
                store = progress_store(redis, proxy_config.settings.retention_s, len(lines), update)
                if fresh:
                    await delete_conversation(
                        store,
                        who,
                        token_ttl_s=forget_token_ttl_s(
                            proxy_config.settings.write_buffer_max_age_s
                        ),
                    )
                result = await import_lines(
                    store,
                    who,
                    lines,
                    max_chars=proxy_config.settings.stored_text_chars,
                    max_messages=proxy_config.settings.max_stored_messages,
                )
                update(len(lines), len(lines))
            queue = ExtractionQueue(redis, proxy_config.settings.key_prefix)
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
    _print_import(result, who, proxy_config.settings.max_stored_messages)


def _print_import(result: Any, who: Any, max_messages: int) -> None:
    """What an import of a history file wrote, and what the bound on stored messages took."""
    console.print(
        f"imported {counted(result.turns, 'turn')} (seq {result.first_seq}-{result.last_seq}) "
        f"into {who.keys.turns}"
    )
    bound = f"to keep max_stored_messages ({max_messages})"
    if result.left_out:
        console.print(f"left out the file's {counted(result.left_out, 'oldest line')} {bound}")
    if result.trimmed:
        console.print(f"deleted the {counted(result.trimmed, 'oldest turn')} {bound}")


@app.command("replay")
def replay_command(
    file: Annotated[Path, typer.Argument(help="The LoCoMo-format file.")],
    sample_id: Annotated[str, typer.Option(help="LoCoMo sample, e.g. conv-26.")],
    user: Annotated[str, typer.Option(help="The user id used at import.")],
    report: Annotated[Path, typer.Option(help="Where to write the JSON report.")],
    fmt: Annotated[str, typer.Option("--format", help="locomo.")] = "locomo",
    base_url: Annotated[
        str, typer.Option(help="The proxy's base URL.")
    ] = "http://127.0.0.1:4000/v1",
    model: Annotated[str, typer.Option(help="The memory-enabled alias.")] = "demo",
    api_key: Annotated[
        str | None, typer.Option(help="Proxy key (default: the master key).")
    ] = None,
    standin_url: Annotated[str, typer.Option(help="The stand-in model.")] = "http://127.0.0.1:4010",
    conversation: Annotated[str | None, typer.Option(help="Conversation id.")] = None,
    config: ConfigOption = Path("config.yaml"),
) -> None:
    """Ask each QA question through the proxy (read-only) and measure what reached the model."""
    from litellm_memory_hook.tools.replay import replay

    if fmt != "locomo":
        raise _fail("replay needs --format locomo (questions and evidence labels)")
    history = _read_history(file, fmt, sample_id)
    key = api_key or (_load_config(config).master_key if config.exists() else None) or "sk-none"
    with console.status(Text("replaying questions")) as status:
        result = replay(
            history,
            base_url=base_url,
            api_key=key,
            model=model,
            user=user,
            standin_url=standin_url,
            conversation=conversation,
            progress=lambda done, total: status.update(Text(f"question {done}/{total}")),
        )
    table = Table(title=f"replay {history.sample_id} through {base_url} ({model})")
    table.add_column("measure")
    table.add_column("value", justify="right")
    for name in (
        "questions",
        "evidence_cover",
        "median_prompt_chars",
        "median_full_history_chars",
        "hook_ms_p50",
        "hook_ms_p95",
    ):
        table.add_row(name, str(getattr(result, name)))
    print_table(table)
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text(json.dumps(result.to_json(), ensure_ascii=False, indent=2), encoding="utf-8")
    console.print(f"report: {report}")


@app.command("show")
def show_command(
    user: Annotated[str, typer.Option(help="The user id (required).")],
    conversation: Annotated[
        str | None, typer.Argument(help="Conversation id (default: the alias's).")
    ] = None,
    model: Annotated[str, typer.Option(help="The memory-enabled alias.")] = "demo",
    tenant: Annotated[str, typer.Option(help="Tenant.")] = MASTER_TENANT,
    message: Annotated[
        str | None,
        typer.Option(
            help="The next user message (recall and the language reminder follow it; default: "
            "the last stored user message)."
        ),
    ] = None,
    config: ConfigOption = Path("config.yaml"),
    data_dir: DataDirOption = Path(".litellm-memory"),
) -> None:
    """Show what the model would receive next, layer by layer."""
    from litellm_memory_hook.proxy.context import ContextOptions, prepare
    from litellm_memory_hook.store.redis_store import MemoryStore

    proxy_config = cli_ops.command_config(config, data_dir)
    who = _identity(proxy_config, model, user, conversation, tenant)
    alias = proxy_config.alias(model)
    settings = proxy_config.settings
    options = ContextOptions.for_alias(settings, alias)

    async def run() -> Any:
        redis = _redis_client(settings, data_dir)
        try:
            store = MemoryStore.for_settings(redis, settings)
            count = await store.count_turns(who.keys)
            known = bool(await redis.exists(who.keys.user_keys.index))
            probe = message
            if probe is None:
                state, _ = await store.load(who.keys, who.memory, tail=options.budget.messages)
                users = [t.text for t in state.tail if t.role == "user" and t.text.strip()]
                probe = users[-1] if users else SHOW_PLACEHOLDER
            prepared = await prepare(
                store, who.keys, who.memory, [{"role": "user", "content": probe}], options
            )
            return count, prepared, probe, known
        finally:
            await redis.aclose()

    from litellm_memory_hook.store.embedded import EmbeddedRedisError

    try:
        count, prepared, probe, known = asyncio.run(run())
    except EmbeddedRedisError as exc:
        raise _fail(f"embedded Redis in {data_dir}/: {exc}") from exc
    except MemoryHookError as exc:
        raise _fail(str(exc)) from exc
    console.print(f"conversation {who.keys.ref}: {counted(count, 'stored turn')}")
    if not known:
        console.print(
            f"no such user {who.user!r} in tenant {who.tenant!r} (`litellm-memory users` lists "
            "them): what follows is what a new user's first message gets",
            highlight=False,
        )
    if message is None:
        console.print(
            "next message (no --message): "
            + ("a placeholder" if probe == SHOW_PLACEHOLDER else "the last stored user message"),
            style="dim",
            highlight=False,
        )
    if prepared is None:
        console.print("nothing to show")
        return
    console.print(Panel(prepared.messages[0]["content"], title=Text("system message")))
    for m in prepared.messages[1:]:
        from litellm_memory_hook.core.messages import content_text

        console.print(Text(m["role"], style="bold"), f": {content_text(m.get('content'))}", sep="")
    table = Table(title="characters per layer")
    table.add_column("layer")
    table.add_column("chars", justify="right")
    for name, chars in prepared.layer_chars.items():
        table.add_row(name, str(chars))
    print_table(table)


def main() -> None:
    """Console-script entry point."""
    from litellm_memory_hook.tools.cli_memory import register

    processes.watch_parent()  # a stand-in serve started where prctl is missing
    register(app)
    cli_serve.register(app)
    app()
