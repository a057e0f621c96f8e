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
from litellm_memory_hook.tools import cli_ops, cli_serve, processes, standin
from litellm_memory_hook.tools.bench_options import (
    DEFAULT_DATA_DIR,
    LOCOMO_FILE,
    LOCOMO_URL,
    bench_redis,
    human_console,
    missing_locomo,
    one_sample,
    print_table,
    write_json,
)
from litellm_memory_hook.tools.cli_common import (
    MASTER_TENANT,
    MAX_PORT,
    ConfigOption,
    DataDirOption,
    console,
    counted,
)
from litellm_memory_hook.tools.datasets import (
    History,
    load_jsonl,
    load_locomo,
    skipped_summary,
)
from litellm_memory_hook.tools.proxyconfig import ProxyConfig

if TYPE_CHECKING:
    from litellm_memory_hook.store.embedded import EmbeddedRedis

app = typer.Typer(help="Long memory for chat models behind a LiteLLM proxy.", no_args_is_help=True)
bench_app = typer.Typer(help="Benchmarks that print a table and write JSON.", no_args_is_help=True)
app.add_typer(bench_app, name="bench")
SERVE_POLL_S = 1.0
"""How often ``serve`` looks at its proxy and reaps its embedded Redis when that died (s)."""

BENCH_REDIS_HELP = (
    "A real Redis (default: LITELLM_MEMORY_REDIS_URL, else REDIS_URL, else the embedded Redis "
    "of the serve running on --data-dir, else redis://127.0.0.1:6379/0); the keys the run "
    "writes (under membench...) are deleted after."
)
BENCH_JSON_HELP = "Write the report to this file; '-': to stdout alone (the tables go to stderr)."
BenchDataDirOption = Annotated[
    Path,
    typer.Option(
        "--data-dir", help="The data folder of a running serve, whose embedded Redis is used."
    ),
]


def _bench_redis(explicit: str | None, data_dir: Path, out: Any) -> str:
    """The Redis URL a benchmark runs on (:func:`bench_options.bench_redis`), said in one dim
    line on ``out`` when it is a running serve's embedded Redis or the default."""
    try:
        chosen = bench_redis(explicit, data_dir)
    except MemoryHookError as exc:
        raise _fail(str(exc)) from exc
    if chosen.source.startswith(("embedded", "default")):
        out.print(f"redis: {chosen.url} ({chosen.source})", style="dim", soft_wrap=True)
    return chosen.url


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


def _plots(write: Callable[..., list[Path]], *args: Any) -> None:
    """Write a benchmark's PNGs (``write(*args)``) and name them; without matplotlib, say how
    to get it."""
    from litellm_memory_hook.tools.plots import PLOTS_EXTRA

    try:
        for png in write(*args):
            console.print(f"plot: {png}")
    except ModuleNotFoundError:
        console.print(f"plots skipped: matplotlib is not installed ({PLOTS_EXTRA})")


@bench_app.command("latency")
def bench_latency(
    data: Annotated[
        Path | None,
        typer.Option(
            help="LoCoMo-format file whose text is cycled (default: LoCoMo when `bench "
            "fetch-locomo` downloaded it, else the repository's multilingual set)."
        ),
    ] = None,
    sample_id: Annotated[
        str | None,
        typer.Option(help="Sample to cycle: ID, or FILE:ID (default conv-26, or the first)."),
    ] = None,
    sizes: Annotated[
        str, typer.Option(help="Comma-separated history sizes.")
    ] = "100,1000,10000,100000",
    runs: Annotated[int, typer.Option(min=1, help="Timed hook calls per size.")] = 200,
    naive: Annotated[bool, typer.Option(help="Also time the naive approach.")] = True,
    redis_url: Annotated[str | None, typer.Option(help=BENCH_REDIS_HELP)] = None,
    data_dir: BenchDataDirOption = DEFAULT_DATA_DIR,
    json_out: Annotated[Path | None, typer.Option("--json", help=BENCH_JSON_HELP)] = None,
) -> None:
    """Pre-call hook time (median, p99) at growing history sizes, naive approach beside it."""
    from litellm_memory_hook.tools.bench import latency_rows_json, run_latency_sync
    from litellm_memory_hook.tools.plots import write_latency_plots

    out = human_console(json_out)
    try:
        size_list = [int(s) for s in sizes.split(",") if s.strip()]
    except ValueError as exc:
        raise _fail(f"bad --sizes: {sizes}") from exc
    if any(size < 0 for size in size_list):
        raise _fail(f"bad --sizes: {sizes} (a history size is 0 or more messages)")
    try:
        data, sample = one_sample(data, sample_id)
    except MemoryHookError as exc:
        raise _fail(str(exc)) from exc
    if not data.is_file():
        raise _fail(missing_locomo(data, "bench latency cycles the text of one"))
    history = _read_history(data, "locomo", sample)
    url = _bench_redis(redis_url, data_dir, out)
    rows = run_latency_sync(url, history, size_list, runs=runs, naive=naive)
    table = Table(title=f"pre-call hook latency on {_shown(url)}, {data.name}:{sample}")
    for column in (
        "messages",
        "hook p50 ms",
        "hook p99 ms",
        "naive p50 ms",
        "naive p99 ms",
        "build s",
        "memory/text",
    ):
        table.add_column(column, justify="right")
    for r in rows:
        table.add_row(
            str(r.messages),
            f"{r.hook_p50_ms:.3f}",
            f"{r.hook_p99_ms:.3f}",
            "-" if r.naive_p50_ms is None else f"{r.naive_p50_ms:.1f}",
            "-" if r.naive_p99_ms is None else f"{r.naive_p99_ms:.1f}",
            f"{r.build_s:.1f}",
            f"{r.memory_bytes / max(r.text_bytes, 1):.2f}",
        )
    print_table(table, out)
    if json_out:
        written = write_json(latency_rows_json(rows), json_out, out)
        if written:
            _plots(write_latency_plots, latency_rows_json(rows), written)


def _curve_lists(ks: str, budgets: str) -> tuple[list[int], list[int]]:
    """``--ks`` and ``--budgets`` as numbers, or exit with one line."""
    try:
        ks_list = [int(x) for x in ks.split(",") if x.strip()]
        budget_list = [int(x) for x in budgets.split(",") if x.strip()]
    except ValueError as exc:
        raise _fail(f"bad --ks or --budgets: {exc}") from exc
    if any(n < 0 for n in (*ks_list, *budget_list)):
        raise _fail(f"bad --ks or --budgets: {ks} / {budgets} (0 or more; 0: recall off)")
    return ks_list, budget_list


@bench_app.command("recall")
def bench_recall(
    files: Annotated[
        list[Path] | None,
        typer.Argument(
            help="LoCoMo-format files (questions + evidence); default: the repository's "
            "multilingual dev set, benchmarks/data/multiling/multiling-dev.json."
        ),
    ] = None,
    fmt: Annotated[str, typer.Option("--format", help="locomo.")] = "locomo",
    mode: Annotated[
        str, typer.Option("--mode", help="budget (the default) or fixed (the best --k lines).")
    ] = "budget",
    k: Annotated[int, typer.Option("--k", min=1, max=20, help="Lines, fixed mode.")] = 4,
    chars: Annotated[
        int | None, typer.Option("--chars", min=1, help="Recall budget, characters (budget mode).")
    ] = None,
    k_max: Annotated[
        int | None, typer.Option("--k-max", min=1, max=64, help="Most lines (budget mode).")
    ] = None,
    min_share: Annotated[
        float | None,
        typer.Option("--min-share", min=0.0, max=1.0, help="Share of the best score (budget)."),
    ] = None,
    curve: Annotated[
        bool, typer.Option("--curve/--no-curve", help="Also measure the cover curve.")
    ] = True,
    ks: Annotated[str, typer.Option("--ks", help="Curve: fixed-mode k values.")] = "2,4,8,12",
    budgets: Annotated[
        str, typer.Option("--budgets", help="Curve: budgets, characters.")
    ] = "1500,2000,2500,3000",
    sample_id: Annotated[
        list[str] | None,
        typer.Option(
            "--sample-id",
            help="Sample to run (repeat; default all): ID (in every file) or FILE:ID (that "
            "file only; naming FILE is enough).",
        ),
    ] = None,
    redis_url: Annotated[str | None, typer.Option(help=BENCH_REDIS_HELP)] = None,
    data_dir: BenchDataDirOption = DEFAULT_DATA_DIR,
    json_out: Annotated[
        Path | None,
        typer.Option(
            "--json",
            help="Write the report (OUT-<file stem>.json for several files); '-': to stdout "
            "alone (a list for several files; the tables go to stderr).",
        ),
    ] = None,
) -> None:
    """Evidence cover of the product's recall on Redis, beside plain IDF and BM25, and the cover
    curve (cover against recalled characters at k = 2, 4, 8, 12 and at several budgets).

    LoCoMo: Maharana et al., ACL 2024 (snap-research/locomo, CC BY-NC 4.0).
    """
    from dataclasses import replace

    from litellm_memory_hook.proxy.recall_step import RecallOptions
    from litellm_memory_hook.tools.bench_options import STDOUT, pick_samples
    from litellm_memory_hook.tools.bench_recall import (
        curve_points,
        curve_table,
        load_histories,
        recall_table,
        run_recall_sync,
    )
    from litellm_memory_hook.tools.datasets import MULTILING_DEV, default_bench_files
    from litellm_memory_hook.tools.plots import write_recall_plots

    if fmt != "locomo":
        raise _fail("bench recall needs --format locomo (questions and evidence labels)")
    if mode not in ("budget", "fixed"):
        raise _fail("--mode is budget or fixed")
    ks_list, budget_list = _curve_lists(ks, budgets) if curve else ([], [])
    base = RecallOptions()
    options = replace(
        base,
        mode="fixed" if mode == "fixed" else "budget",
        k=k,
        chars=base.chars if chars is None else chars,
        k_max=base.k_max if k_max is None else k_max,
        min_share=base.min_share if min_share is None else min_share,
    )
    points = curve_points(ks_list, budget_list, replace(options, mode="budget"))
    out = human_console(json_out)
    try:
        picked = pick_samples(files or [], sample_id or [], [MULTILING_DEV])
        if any(file == MULTILING_DEV for file, _ in picked):
            default_bench_files()  # says where the data is when it is not there (a wheel)
    except MemoryHookError as exc:
        raise _fail(str(exc)) from exc
    url = _bench_redis(redis_url, data_dir, out)
    payloads = []
    for file, wanted in picked:
        try:
            histories = load_histories(file, wanted)
            with out.status(Text(f"running the questions of {file.name}")):
                report = run_recall_sync(url, histories, recall_options=options, points=points)
        except MemoryHookError as exc:
            raise _fail(str(exc)) from exc
        except ModuleNotFoundError as exc:
            raise _fail(f"{exc} (the BM25 baseline needs the dev extra: bm25s)") from exc
        what = f"k={k}" if options.mode == "fixed" else f"budget {options.chars} chars"
        title = f"evidence recall/cover ({what}): {file.name} on {_shown(url)}"
        print_table(recall_table(report, title), out)
        if report.curve:
            print_table(curve_table(report, f"cover curve: {file.name}"), out)
        out.print(
            f"{len(report.questions)} questions, {report.stored_lines} stored lines, "
            f"{report.seconds:.1f} s (import {report.import_s:.1f} s; prepare p50 "
            f"{report.prepare_ms_p50:.2f} ms, p99 {report.prepare_ms_p99:.2f} ms)"
        )
        payload = report.as_json(source=str(file))
        payloads.append(payload)
        if json_out and str(json_out) != STDOUT:
            target = json_out
            if len(picked) > 1:
                target = json_out.with_name(f"{json_out.stem}-{file.stem}{json_out.suffix}")
            written = write_json(payload, target, out)
            if written and payload["curve"]:
                _plots(write_recall_plots, payload, written)
    if json_out and str(json_out) == STDOUT:
        write_json(payloads[0] if len(payloads) == 1 else payloads, json_out, out)


@bench_app.command("extraction")
def bench_extraction(
    data: Annotated[
        Path | None,
        typer.Option(
            help="The LoCoMo file (also the oracle); default: the one `bench fetch-locomo` "
            "downloads, benchmarks/data/locomo/locomo10.json."
        ),
    ] = None,
    sample_id: Annotated[
        list[str] | None,
        typer.Option(
            "--sample-id",
            help="Sample to run (repeat; 'all' or none: every sample): ID or FILE:ID.",
        ),
    ] = None,
    limit_questions: Annotated[
        int | None, typer.Option(min=1, help="Ask at most N questions per sample (quick runs).")
    ] = None,
    model: Annotated[str, typer.Option(help="The memory-enabled alias.")] = "demo",
    config: ConfigOption = Path("config.yaml"),
    redis_url: Annotated[
        str | None,
        typer.Option(
            help="A real Redis (default: LITELLM_MEMORY_REDIS_URL, else REDIS_URL, else the "
            "embedded Redis of the serve running on --data-dir, else redis://127.0.0.1:6379/0); "
            "keys under membench-ext-<hex>: are written and deleted."
        ),
    ] = None,
    data_dir: BenchDataDirOption = DEFAULT_DATA_DIR,
    json_out: Annotated[Path | None, typer.Option("--json", help=BENCH_JSON_HELP)] = None,
) -> None:
    """Extraction cost (calls per 100 messages, characters and tokens per call) and evidence
    cover by layer (window, recall, memories, summary): LoCoMo replayed through a real proxy,
    the stand-in model answering extraction calls with LoCoMo's observations (oracle mode).

    LoCoMo: Maharana et al., ACL 2024 (snap-research/locomo, CC BY-NC 4.0).
    """
    from redis.exceptions import RedisError
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    from litellm_memory_hook.tools.bench_extraction import report_table, run_extraction_bench
    from litellm_memory_hook.tools.bench_options import LOCOMO_FILE, pick_samples
    from litellm_memory_hook.tools.datasets import list_locomo_samples

    out = human_console(json_out)
    try:
        picked = pick_samples(
            [data] if data else [], [s for s in sample_id or () if s != "all"], [LOCOMO_FILE]
        )
    except MemoryHookError as exc:
        raise _fail(str(exc)) from exc
    if len(picked) > 1:
        raise _fail("bench extraction runs one file: --data and FILE:ID name the same one")
    data, chosen = picked[0]
    if not data.is_file():
        raise _fail(missing_locomo(data, "bench extraction replays it, its labels the oracle"))
    try:
        known = list_locomo_samples(data)
    except MemoryHookError as exc:
        raise _fail(str(exc)) from exc
    wanted = chosen or known
    unknown = [s for s in wanted if s not in known]
    if unknown:
        raise _fail(f"{data}: no sample {', '.join(unknown)} (have: {', '.join(known)})")
    url = _bench_redis(redis_url, data_dir, out)

    def _on_sigterm(signum: int, frame: object) -> None:
        raise KeyboardInterrupt  # the run stops its processes and deletes its keys

    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    columns = (
        TextColumn("{task.description}", markup=False),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    try:
        with Progress(*columns, console=out) as bar:
            task = bar.add_task("starting", total=None)

            def progress(phase: str, done: int, total: int) -> None:
                bar.update(task, description=phase, completed=done, total=total or None)

            report = run_extraction_bench(
                data,
                wanted,
                config=config,
                redis_url=url,
                model=model,
                limit_questions=limit_questions,
                progress=progress,
            )
    except (MemoryHookError, RuntimeError, ValueError, RedisError) as exc:
        raise _fail(str(exc)) from exc
    finally:
        signal.signal(signal.SIGTERM, previous)
    title = f"extraction cost and evidence cover: {data.name} on {_shown(url)}"
    print_table(report_table(report, title), out)
    pooled = report.pooled()
    out.print(
        f"{len(report.samples)} samples, {pooled['questions']} questions, "
        f"{pooled['evidence']} evidence lines; every message extracted: "
        f"{pooled['all_extracted']}; {report.seconds:.0f} s"
    )
    if json_out:
        write_json(report.as_json(), json_out, out)


@bench_app.command("proxy")
def bench_proxy(
    clients: Annotated[
        str, typer.Option(help="Comma-separated numbers of concurrent clients.")
    ] = "1,32",
    requests: Annotated[
        int, typer.Option(min=1, help="Timed requests per side (hook on, off) per client count.")
    ] = 400,
    history: Annotated[
        int, typer.Option(min=0, help="Messages each user's memory holds before timing.")
    ] = 200,
    extraction: Annotated[
        str,
        typer.Option(
            help="Where extraction runs: proxy (the in-proxy worker, the default deployment), "
            "worker (a separate `litellm-memory worker` process calling the model directly) "
            "or off."
        ),
    ] = "proxy",
    redis_url: Annotated[
        str | None,
        typer.Option(
            help="A real Redis (default: LITELLM_MEMORY_REDIS_URL, else REDIS_URL, else the "
            "embedded Redis of the serve running on --data-dir, else redis://127.0.0.1:6379/0); "
            "keys under membench-proxy-<hex>: are written and deleted."
        ),
    ] = None,
    data_dir: BenchDataDirOption = DEFAULT_DATA_DIR,
    log_dir: Annotated[
        Path | None, typer.Option(help="Keep the processes' logs and config here.")
    ] = None,
    context_side: Annotated[
        bool,
        typer.Option(
            help="Also send the plain alias the messages the hook built: LiteLLM's own cost "
            "of the larger request, apart from the hook's."
        ),
    ] = True,
    json_out: Annotated[Path | None, typer.Option("--json", help=BENCH_JSON_HELP)] = None,
) -> None:
    """Throughput (requests per second) and latency (p50/p95/p99) through a real LiteLLM proxy
    and the stand-in model, hook on and off side by side in one run (alternating rounds), the
    ratio on/off, the context side (the plain alias given the hook's messages: the floor under
    on/off), and the post-call write's cost. Short mode for CI: --requests 40.
    """
    from litellm_memory_hook.tools.bench_proxy import (
        EXTRACTION_MODES,
        report_table,
        run_proxy_bench,
    )

    out = human_console(json_out)
    url = _bench_redis(redis_url, data_dir, out)
    if extraction not in EXTRACTION_MODES:
        raise _fail(f"bad --extraction {extraction!r}: use one of {', '.join(EXTRACTION_MODES)}")
    try:
        clients_list = [int(c) for c in clients.split(",") if c.strip()]
    except ValueError as exc:
        raise _fail(f"bad --clients: {clients}") from exc

    def _on_sigterm(signum: int, frame: object) -> None:
        raise KeyboardInterrupt  # the run stops its processes and deletes its keys

    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        with out.status(Text("starting")) as status:
            report = run_proxy_bench(
                url,
                clients=clients_list,
                requests=requests,
                history=history,
                extraction=extraction,
                log_dir=log_dir,
                progress=lambda phase: status.update(Text(phase)),
                context_side=context_side,
            )
    except (RuntimeError, ValueError, OSError) as exc:
        raise _fail(str(exc)) from exc
    finally:
        signal.signal(signal.SIGTERM, previous)
    print_table(report_table(report, f"proxy throughput, hook on vs off, on {_shown(url)}"), out)
    payload = report.as_json()
    for row in payload["results"]:
        out.print(
            f"{row['clients']} clients: on/off throughput {row['ratio']:.3f} (rounds "
            f"{', '.join(f'{r:.2f}' for r in row['round_ratios'])}); proxy CPU ratio "
            f"{row['cpu_ratio']:.3f}"
        )
        if "context" in row:
            out.print(
                f"  the plain alias given the hook's messages: {row['context_ratio']:.3f} of off "
                f"(CPU {row['context_cpu_ratio']:.3f}): LiteLLM's own cost of the larger "
                f"request; the hook's own share, on/context: {row['hook_ratio']:.3f} (CPU "
                f"{row['hook_cpu_ratio']:.3f})"
            )
    if payload["write"]:
        w = payload["write"]
        out.print(
            f"in-process, ms p50/p99: pre-call {w['pre_call_ms']['p50']}/{w['pre_call_ms']['p99']}"
            f", post-call {w['post_call_ms']['p50']}/{w['post_call_ms']['p99']} (_write "
            f"{w['write_ms']['p50']}/{w['write_ms']['p99']}, CPU {w['post_call_cpu_ms']['p50']}"
            f"), record signature {w['sign_ms']['p50']}; one Redis round trip (PING) "
            f"{w['round_trip_ms']['p50']} (CPU {w['round_trip_cpu_ms']['p50']})"
        )
    jobs = payload["extraction_stats"]
    worker_ms = [row["on"]["worker_cpu_ms_per_request"] for row in payload["results"]]
    out.print(
        f"extraction {extraction}: {jobs.get('jobs_committed', 0)} jobs committed, "
        f"{jobs.get('jobs_failed', 0)} failed"
        + (f"; worker process CPU ms/req {worker_ms}" if extraction == "worker" else "")
    )
    out.print(f"{report.seconds:.0f} s, load average {payload['config']['load_average']}")
    if json_out:
        write_json(payload, json_out, out)


@bench_app.command("cost")
def bench_cost(
    data: Annotated[
        Path | None,
        typer.Option(
            help="LoCoMo-format file (default: LoCoMo when `bench fetch-locomo` downloaded it, "
            "else the repository's multilingual set)."
        ),
    ] = None,
    sample_id: Annotated[
        str | None,
        typer.Option(help="Sample to replay: ID, or FILE:ID (default conv-26, or the first)."),
    ] = None,
    turns: Annotated[int, typer.Option(min=2, help="Requests replayed (first N).")] = 150,
    limit_questions: Annotated[
        int | None, typer.Option(min=1, help="Ask at most this many questions per run.")
    ] = None,
    config: Annotated[Path, typer.Option(help="Proxy config to derive from.")] = Path(
        "config.yaml"
    ),
    model: Annotated[str, typer.Option(help="Memory-enabled alias of the config.")] = "demo",
    clients: Annotated[
        str, typer.Option(help="Comma-separated clients: new (new message only), whole.")
    ] = "new,whole",
    redis_url: Annotated[str | None, typer.Option(help=BENCH_REDIS_HELP)] = None,
    data_dir: BenchDataDirOption = DEFAULT_DATA_DIR,
    json_out: Annotated[Path | None, typer.Option("--json", help=BENCH_JSON_HELP)] = None,
) -> None:
    """Input cost per request with the provider's prompt cache counted: the cache and seed
    layouts, new-message and whole-history clients, beside the whole history without memory,
    with the evidence cover of each run."""
    from litellm_memory_hook.tools.bench_cost import RATES, cost_json, run_cost_bench
    from litellm_memory_hook.tools.plots import write_cost_plots

    out = human_console(json_out)
    try:
        data, sample = one_sample(data, sample_id)
    except MemoryHookError as exc:
        raise _fail(str(exc)) from exc
    if not data.is_file():
        raise _fail(missing_locomo(data, "bench cost replays one"))
    client_list = [c.strip() for c in clients.split(",") if c.strip()]
    if not client_list or any(c not in ("new", "whole") for c in client_list):
        raise _fail(f"bad --clients: {clients} (new, whole)")
    url = _bench_redis(redis_url, data_dir, out)
    series = run_cost_bench(
        data,
        sample,
        clients=client_list,
        config=config,
        redis_url=url,
        model=model,
        max_steps=turns,
        limit_questions=limit_questions,
        progress=lambda phase, done, total: out.print(f"{phase}: {done}/{total}"),
    )
    report = cost_json(series)
    table = Table(title=f"input per request, {data.name}:{sample}, first {turns} requests")
    columns = ["side", "client", "prompt chars", "cached share"]
    columns += [f"billed @{r}" for r in RATES] + ["billed Anthropic", "extraction/req", "cover"]
    for column in columns:
        table.add_column(column, justify="right")
    for row in report["series"]:
        cover = row["cover"].get("all_layers") if row["cover"] else None
        table.add_row(
            row["name"],
            row["client"],
            f"{row['prompt_chars_mean']:.0f}",
            f"{row['cached_share']:.2f}",
            *(f"{row[f'billed_{r}']:.0f}" for r in RATES),
            f"{row['billed_anthropic']:.0f}",
            f"{row['extraction_chars_per_request']:.0f}",
            "-" if cover is None else f"{cover:.3f}",
        )
    print_table(table, out)
    if json_out:
        written = write_json(report, json_out, out)
        if written:
            _plots(write_cost_plots, report, written)


@bench_app.command("stall")
def bench_stall(
    sizes: Annotated[
        str, typer.Option(help="Comma-separated sizes of the large text, characters.")
    ] = "10000,100000,1000000",
    kinds: Annotated[
        str, typer.Option(help="Comma-separated kinds: english,russian,hindi,hinglish,...")
    ] = "english,russian,hindi,hinglish,chinese,code,log",
    proxy: Annotated[
        bool, typer.Option(help="Also measure through a real proxy, plain alias beside it.")
    ] = False,
    redis_url: Annotated[str | None, typer.Option(help=BENCH_REDIS_HELP)] = None,
    data_dir: BenchDataDirOption = DEFAULT_DATA_DIR,
    json_out: Annotated[Path | None, typer.Option("--json", help=BENCH_JSON_HELP)] = None,
) -> None:
    """Whether one user's large message stalls the others: the hook's time for 10 KB to 1 MB
    texts (new-message and whole-history clients) and another user's added wait meanwhile."""
    from litellm_memory_hook.tools.bench_stall import SAMPLES, run_stall, stall_rows_json

    out = human_console(json_out)
    url = _bench_redis(redis_url, data_dir, out)
    kind_list = [k.strip() for k in kinds.split(",") if k.strip()]
    unknown = [k for k in kind_list if k not in SAMPLES]
    if unknown:
        raise _fail(f"bad --kinds: {', '.join(unknown)} (known: {', '.join(SAMPLES)})")
    try:
        size_list = [int(s) for s in sizes.split(",") if s.strip()]
    except ValueError as exc:
        raise _fail(f"bad --sizes: {sizes}") from exc
    if not size_list or any(size < 1 for size in size_list):
        raise _fail(f"bad --sizes: {sizes} (each at least 1 character)")
    rows = run_stall(url, kinds=kind_list, sizes=size_list, proxy=proxy)
    table = Table(title=f"one large message and another user's small one, on {_shown(url)}")
    columns = ["kind", "chars", "client", "pre-call ms", "write ms", "added wait ms", "small"]
    if proxy:
        columns += ["proxy: memory alias added wait ms", "plain alias (baseline) ms"]
    for column in columns:
        table.add_column(column, justify="right")
    for r in rows:
        cells = [r.kind, str(r.chars), r.client, f"{r.hook_ms:.1f}", f"{r.write_ms:.1f}"]
        cells += [f"{r.added_wait_ms:.1f}", str(r.small_requests)]
        if proxy:
            cells += [
                "-" if ms is None else f"{ms:.1f}"
                for ms in (r.proxy_added_wait_ms, r.plain_added_wait_ms)
            ]
        table.add_row(*cells)
    print_table(table, out)
    worst = max(rows, key=lambda r: r.hook_ms)
    out.print(
        f"targets: pre-call <= 50 ms at 1 MB, added wait <= 20 ms; worst pre-call "
        f"{worst.hook_ms:.1f} ms "
        f"({worst.kind} {worst.chars} {worst.client}), worst added wait "
        f"{max(r.added_wait_ms for r in rows):.1f} ms"
    )
    if json_out:
        write_json(stall_rows_json(rows), json_out, out)


@bench_app.command("fetch-locomo")
def bench_fetch_locomo(
    url: Annotated[str, typer.Option(help="Where LoCoMo's QA file is.")] = LOCOMO_URL,
    to: Annotated[
        Path, typer.Option(help="Where to write it (the benchmarks' default LoCoMo file).")
    ] = LOCOMO_FILE,
    force: Annotated[bool, typer.Option(help="Download again when it is already there.")] = False,
) -> None:
    """Download LoCoMo (CC BY-NC 4.0; not part of this repository) to
    benchmarks/data/locomo/locomo10.json, where `bench latency`, `cost` and `extraction` look
    for it; check that every sample reads and say its licence."""
    from litellm_memory_hook.tools.bench_options import LOCOMO_LICENCE, fetch_locomo

    try:
        fetched = fetch_locomo(url, to, force=force)
    except MemoryHookError as exc:
        raise _fail(str(exc)) from exc
    done = "downloaded" if fetched.downloaded else "already there (--force downloads again)"
    console.print(
        f"{fetched.path}: {done}; {len(fetched.samples)} samples "
        f"({', '.join(fetched.samples)}), {fetched.questions} questions",
        soft_wrap=True,
        highlight=False,
    )
    console.print(LOCOMO_LICENCE, soft_wrap=True, highlight=False)


def main() -> None:
    """Console-script entry point."""
    from litellm_memory_hook.tools.cli_memory import register

    processes.watch_parent()  # a stand-in serve started where prctl is missing
    register(app)
    cli_serve.register(app)
    app()
