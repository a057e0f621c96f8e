"""The ``litellm-memory`` command: serve, import, replay, show, bench, standin."""

from __future__ import annotations

import os

# LiteLLM fetches its model cost map from the internet at import unless told not to.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import asyncio
import json
import signal
import subprocess
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.panel import Panel
from rich.table import Table

from litellm_memory_hook.errors import MemoryHookError
from litellm_memory_hook.proxy.identity import Identity
from litellm_memory_hook.settings import MemorySettings
from litellm_memory_hook.store.keys import (
    ConversationKeys,
    conversation_scope,
    normalize_user_id,
    user_scope,
)
from litellm_memory_hook.tools import processes, standin
from litellm_memory_hook.tools.datasets import History, load_jsonl, load_locomo
from litellm_memory_hook.tools.proxyconfig import ProxyConfig

app = typer.Typer(help="Long memory for chat models behind a LiteLLM proxy.", no_args_is_help=True)
bench_app = typer.Typer(help="Benchmarks that print a table and write JSON.", no_args_is_help=True)
app.add_typer(bench_app, name="bench")
console = Console()

ConfigOption = Annotated[Path, typer.Option("--config", help="The proxy's config.yaml.")]
DataDirOption = Annotated[
    Path, typer.Option("--data-dir", help="The embedded Redis folder (when REDIS_URL is unset).")
]
MASTER_TENANT = "master"
BENCH_REDIS_HELP = (
    "A real Redis (default: LITELLM_MEMORY_REDIS_URL, else REDIS_URL, else "
    "redis://127.0.0.1:6379/0); keys under membench: are written and deleted."
)


def _fail(message: str) -> typer.Exit:
    console.print(f"[red]error:[/red] {message}")
    return typer.Exit(code=2)


def _load_config(path: Path) -> ProxyConfig:
    try:
        return ProxyConfig.load(path)
    except MemoryHookError as exc:
        raise _fail(str(exc)) from exc


_embedded: list[Any] = []


def _redis_url(settings: MemorySettings, data_dir: Path) -> str:
    """The configured Redis; with none configured, the embedded one that ``serve`` uses with
    the same ``--data-dir`` (reattached while ``serve`` runs, else started on its data)."""
    if "redis_url" in settings.model_fields_set:
        return settings.redis_url
    from litellm_memory_hook.store.embedded import start_embedded

    if not _embedded:
        _embedded.append(start_embedded(data_dir))
        console.print(f"embedded Redis of {data_dir}/", style="dim")
    return str(_embedded[0].url)


def _redis_client(settings: MemorySettings, data_dir: Path) -> Any:
    """An asyncio client of :func:`_redis_url`."""
    import redis.asyncio as aioredis

    return aioredis.from_url(_redis_url(settings, data_dir), decode_responses=False)


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


@app.command()
def serve(
    config: ConfigOption = Path("config.yaml"),
    port: Annotated[int, typer.Option(help="Proxy port.")] = 4000,
    host: Annotated[str, typer.Option(help="Proxy host.")] = "127.0.0.1",
    standin_port: Annotated[int, typer.Option(help="Stand-in model port (0: none).")] = 4010,
    data_dir: DataDirOption = Path(".litellm-memory"),
) -> None:
    """Run the LiteLLM proxy with memory (an embedded Redis when no Redis URL is configured)."""

    def _stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _stop)  # stop the children on `kill` as on Ctrl-C
    proxy_settings = _load_config(config).settings
    settings_env = os.environ.copy()
    embedded = None
    if "redis_url" not in proxy_settings.model_fields_set:
        from litellm_memory_hook.store.embedded import start_embedded

        embedded = start_embedded(data_dir)
        # Only the memory hook gets it: LiteLLM itself would also use a REDIS_URL it sees.
        settings_env["LITELLM_MEMORY_REDIS_URL"] = embedded.url
        console.print(f"embedded Redis: {embedded.socket} (data in {data_dir}/)")
    settings_env.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    children: list[subprocess.Popen[bytes]] = []
    try:
        if standin_port:
            children.append(
                subprocess.Popen(processes.standin_command(standin_port), env=settings_env)
            )
            try:
                processes.wait_http(f"http://127.0.0.1:{standin_port}/v1/models", children[-1], 30)
            except RuntimeError as exc:
                raise _fail(str(exc)) from exc
            console.print(f"stand-in model: http://127.0.0.1:{standin_port}/v1")
        proxy = subprocess.Popen(processes.proxy_command(config, port, host), env=settings_env)
        children.append(proxy)
        console.print(f"proxy with memory: http://{host}:{port}  (Ctrl-C stops)")
        proxy.wait()
    except KeyboardInterrupt:
        pass
    finally:
        for child in reversed(children):
            if child.poll() is None:
                child.send_signal(signal.SIGINT)
                try:
                    child.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    child.kill()
        if embedded is not None:
            embedded.stop()


@app.command("standin")
def standin_command(
    port: Annotated[int, typer.Option(help="Port.")] = standin.DEFAULT_PORT,
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


@app.command("import")
def import_command(
    file: Annotated[Path, typer.Argument(help="The history file.")],
    user: Annotated[str, typer.Option(help="The user id (the request's 'user' field).")],
    fmt: Annotated[str, typer.Option("--format", help="locomo or jsonl.")] = "locomo",
    sample_id: Annotated[str | None, typer.Option(help="LoCoMo sample, e.g. conv-26.")] = None,
    model: Annotated[str, typer.Option(help="The memory-enabled alias.")] = "demo",
    conversation: Annotated[str | None, typer.Option(help="Conversation id.")] = None,
    tenant: Annotated[
        str, typer.Option(help="Tenant (default: the master key's).")
    ] = MASTER_TENANT,
    fresh: Annotated[bool, typer.Option(help="Delete the conversation first.")] = False,
    config: ConfigOption = Path("config.yaml"),
    data_dir: DataDirOption = Path(".litellm-memory"),
) -> None:
    """Bulk-load a chat history into the conversation a chat request for USER reads."""
    from litellm_memory_hook.store.queue import ExtractionQueue
    from litellm_memory_hook.store.redis_store import MemoryStore
    from litellm_memory_hook.tools.importer import (
        delete_conversation,
        import_lines,
        schedule_import,
    )

    proxy_config = _load_config(config)
    history = _read_history(file, fmt, sample_id)
    who = _identity(proxy_config, model, user, conversation, tenant)

    async def run() -> Any:
        redis = _redis_client(proxy_config.settings, data_dir)
        try:
            store = MemoryStore(redis, ttl_s=proxy_config.settings.retention_s)
            if fresh:
                await delete_conversation(store, who)
            result = await import_lines(
                store, who, history.lines, max_chars=proxy_config.settings.stored_text_chars
            )
            queue = ExtractionQueue(redis, proxy_config.settings.key_prefix)
            await schedule_import(queue, who, result)
            return result
        finally:
            await redis.aclose()

    try:
        result = asyncio.run(run())
    except MemoryHookError as exc:
        raise _fail(str(exc)) from exc
    if result.turns == 0 and history.lines:
        console.print(f"nothing new: these lines are already in {who.keys.turns}")
        return
    console.print(
        f"imported {result.turns} turns (seq {result.first_seq}-{result.last_seq}) into "
        f"{who.keys.turns}"
    )


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
    with console.status("replaying questions") as status:
        result = replay(
            history,
            base_url=base_url,
            api_key=key,
            model=model,
            user=user,
            standin_url=standin_url,
            conversation=conversation,
            progress=lambda done, total: status.update(f"question {done}/{total}"),
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
    console.print(table)
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
    message: Annotated[str, typer.Option(help="The next user message.")] = "(next message)",
    config: ConfigOption = Path("config.yaml"),
    data_dir: DataDirOption = Path(".litellm-memory"),
) -> None:
    """Show what the model would receive next, layer by layer."""
    from litellm_memory_hook.proxy.context import ContextOptions, prepare
    from litellm_memory_hook.store.redis_store import MemoryStore

    proxy_config = _load_config(config)
    who = _identity(proxy_config, model, user, conversation, tenant)
    alias = proxy_config.alias(model)
    settings = proxy_config.settings
    options = ContextOptions.for_alias(settings, alias)

    async def run() -> Any:
        redis = _redis_client(settings, data_dir)
        try:
            store = MemoryStore(redis, ttl_s=settings.retention_s)
            count = await store.count_turns(who.keys)
            prepared = await prepare(
                store, who.keys, who.memory, [{"role": "user", "content": message}], options
            )
            return count, prepared
        finally:
            await redis.aclose()

    try:
        count, prepared = asyncio.run(run())
    except MemoryHookError as exc:
        raise _fail(str(exc)) from exc
    console.print(f"conversation {who.keys.ref}: {count} stored turns")
    if prepared is None:
        console.print("nothing to show")
        return
    console.print(Panel(prepared.messages[0]["content"], title="system message"))
    for m in prepared.messages[1:]:
        from litellm_memory_hook.core.messages import content_text

        console.print(f"[bold]{m['role']}[/bold]: {content_text(m.get('content'))}")
    table = Table(title="characters per layer")
    table.add_column("layer")
    table.add_column("chars", justify="right")
    for name, chars in prepared.layer_chars.items():
        table.add_row(name, str(chars))
    console.print(table)


@bench_app.command("latency")
def bench_latency(
    data: Annotated[Path, typer.Option(help="LoCoMo file whose text is cycled.")] = Path(
        "../shared/data/locomo/locomo-dev.json"
    ),
    sample_id: Annotated[str, typer.Option(help="Sample to cycle.")] = "conv-26",
    sizes: Annotated[
        str, typer.Option(help="Comma-separated history sizes.")
    ] = "100,1000,10000,100000",
    runs: Annotated[int, typer.Option(help="Timed hook calls per size.")] = 200,
    naive: Annotated[bool, typer.Option(help="Also time the naive approach.")] = True,
    redis_url: Annotated[str | None, typer.Option(help=BENCH_REDIS_HELP)] = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write rows as JSON.")] = None,
) -> None:
    """Pre-call hook time (median, p99) at growing history sizes, naive approach beside it."""
    from litellm_memory_hook.tools.bench import latency_rows_json, run_latency_sync

    url = redis_url or MemorySettings().redis_url
    history = _read_history(data, "locomo", sample_id)
    try:
        size_list = [int(s) for s in sizes.split(",") if s.strip()]
    except ValueError as exc:
        raise _fail(f"bad --sizes: {sizes}") from exc
    rows = run_latency_sync(url, history, size_list, runs=runs, naive=naive)
    table = Table(title=f"pre-call hook latency on {url}")
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
    console.print(table)
    if json_out:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(latency_rows_json(rows), indent=2), encoding="utf-8")
        console.print(f"json: {json_out}")


@bench_app.command("recall")
def bench_recall(
    file: Annotated[Path, typer.Argument(help="The LoCoMo-format file (questions + evidence).")],
    fmt: Annotated[str, typer.Option("--format", help="locomo.")] = "locomo",
    k: Annotated[int, typer.Option("--k", min=1, max=20, help="Lines recalled.")] = 4,
    sample_id: Annotated[
        list[str] | None, typer.Option("--sample-id", help="Sample to run (repeat; default all).")
    ] = None,
    redis_url: Annotated[str | None, typer.Option(help=BENCH_REDIS_HELP)] = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the report.")] = None,
) -> None:
    """Evidence recall@k and cover@k of the product's recall on Redis, beside plain IDF and BM25.

    LoCoMo: Maharana et al., ACL 2024 (snap-research/locomo, CC BY-NC 4.0).
    """
    from litellm_memory_hook.tools.bench_recall import load_histories, recall_table, run_recall_sync

    if fmt != "locomo":
        raise _fail("bench recall needs --format locomo (questions and evidence labels)")
    url = redis_url or MemorySettings().redis_url
    try:
        histories = load_histories(file, sample_id or ())
        with console.status("running questions"):
            report = run_recall_sync(url, histories, k=k)
    except MemoryHookError as exc:
        raise _fail(str(exc)) from exc
    except ModuleNotFoundError as exc:
        raise _fail(f"{exc} (the BM25 baseline needs the dev extra: bm25s)") from exc
    console.print(recall_table(report, f"evidence recall@{k} / cover@{k}: {file.name} on {url}"))
    console.print(
        f"{len(report.questions)} questions, {report.stored_lines} stored lines, "
        f"{report.seconds:.1f} s (import {report.import_s:.1f} s; prepare p50 "
        f"{report.prepare_ms_p50:.2f} ms, p99 {report.prepare_ms_p99:.2f} ms)"
    )
    if json_out:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        payload = report.as_json(source=str(file))
        json_out.write_text(json.dumps(payload, indent=2, ensure_ascii=False), encoding="utf-8")
        console.print(f"json: {json_out}")


def main() -> None:
    """Console-script entry point."""
    from litellm_memory_hook.tools.cli_memory import register

    register(app)
    app()
