"""The ``bench`` commands that run a real LiteLLM proxy with the hook and the stand-in model:
``extraction`` (what extraction costs, and the evidence each layer delivers), ``proxy``
(throughput and latency, hook on against off) and ``cost`` (input cost per request with the
provider's prompt cache)."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from benchmarks.options import (
    BENCH_JSON_HELP,
    BENCH_REDIS_HELP,
    DEFAULT_DATA_DIR,
    BenchDataDirOption,
    bench_url,
    human_console,
    missing_locomo,
    one_sample,
    write_json,
    write_plots,
)
from litellm_memory_hook.errors import MemoryHookError
from litellm_memory_hook.tools.cli_common import ConfigOption, print_table
from litellm_memory_hook.tools.cli_connect import mask_url
from litellm_memory_hook.tools.cli_errors import fail


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
            help="A real Redis (default: LITELLM_MEMORY_REDIS__URL, else REDIS_URL, else the "
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

    from benchmarks.extraction import run_extraction_bench
    from benchmarks.extraction_report import report_table
    from benchmarks.options import LOCOMO_FILE, pick_samples
    from litellm_memory_hook.tools.histories import list_locomo_samples

    out = human_console(json_out)
    try:
        picked = pick_samples(
            [data] if data else [], [s for s in sample_id or () if s != "all"], [LOCOMO_FILE]
        )
    except MemoryHookError as exc:
        raise fail(str(exc)) from exc
    if len(picked) > 1:
        raise fail("bench extraction runs one file: --data and FILE:ID name the same one")
    data, chosen = picked[0]
    if not data.is_file():
        raise fail(missing_locomo(data, "bench extraction replays it, its labels the oracle"))
    try:
        known = list_locomo_samples(data)
    except MemoryHookError as exc:
        raise fail(str(exc)) from exc
    wanted = chosen or known
    unknown = [s for s in wanted if s not in known]
    if unknown:
        raise fail(f"{data}: no sample {', '.join(unknown)} (have: {', '.join(known)})")
    url = bench_url(redis_url, data_dir, out)

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
        raise fail(str(exc)) from exc
    finally:
        signal.signal(signal.SIGTERM, previous)
    title = f"extraction cost and evidence cover: {data.name} on {mask_url(url)}"
    print_table(report_table(report, title), out)
    pooled = report.pooled()
    out.print(
        f"{len(report.samples)} samples, {pooled['questions']} questions, "
        f"{pooled['evidence']} evidence lines; every message extracted: "
        f"{pooled['all_extracted']}; {report.seconds:.0f} s"
    )
    if json_out:
        write_json(report.as_json(), json_out, out)


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
            help="A real Redis (default: LITELLM_MEMORY_REDIS__URL, else REDIS_URL, else the "
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
    profile: Annotated[
        bool,
        typer.Option(
            help="After the rounds at the largest number of clients, profile the proxy with "
            "py-spy (the dev extra) over one more phase per side, memory and context: where "
            "its CPU goes, per request, by category."
        ),
    ] = False,
    profile_requests: Annotated[
        int, typer.Option(min=1, help="Requests per side of the profiled phase.")
    ] = 300,
    json_out: Annotated[Path | None, typer.Option("--json", help=BENCH_JSON_HELP)] = None,
) -> None:
    """Throughput (requests per second) and latency (p50/p95/p99) through a real LiteLLM proxy
    and the stand-in model, hook on and off side by side in one run (alternating rounds), the
    ratio on/off, the context side (the plain alias given the hook's messages: the floor under
    on/off), and the post-call write's cost; with --profile, where the proxy's CPU per request
    goes, by category, memory side against context side (py-spy). Short mode for CI:
    --requests 40.
    """
    from benchmarks.proxy import EXTRACTION_MODES, run_proxy_bench
    from benchmarks.proxy_report import report_table

    out = human_console(json_out)
    if extraction not in EXTRACTION_MODES:
        raise fail(f"bad --extraction {extraction!r}: use one of {', '.join(EXTRACTION_MODES)}")
    try:
        clients_list = [int(c) for c in clients.split(",") if c.strip()]
    except ValueError as exc:
        raise fail(f"bad --clients: {clients}") from exc
    if profile:
        from benchmarks.py_spy import profiler_problem

        if not context_side:
            raise fail(
                "--profile compares the memory side with the context side: drop --no-context-side"
            )
        problem = profiler_problem()
        if problem:
            raise fail(f"--profile: {problem}")
    url = bench_url(redis_url, data_dir, out)

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
                profile_requests=profile_requests if profile else 0,
            )
    except (RuntimeError, ValueError, OSError) as exc:
        raise fail(str(exc)) from exc
    finally:
        signal.signal(signal.SIGTERM, previous)
    print_table(report_table(report, f"proxy throughput, hook on vs off, on {mask_url(url)}"), out)
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
        growth = {
            side: row[side]["proxy_rss_growth_bytes_per_request"]
            for side in ("on", "off", "context")
            if side in row
        }
        out.print(
            "  proxy RSS growth after warm-up, bytes per request: "
            + ", ".join(f"{side} {value:.0f}" for side, value in growth.items())
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
    if payload["profile"]:
        from benchmarks.proxy_profile import profile_tables

        shown = payload["profile"]
        title = (
            f"proxy CPU ms per request by category (py-spy, {shown['rate']} Hz; "
            f"{shown['requests']['memory']} requests per side, "
            f"{max(clients_list)} clients): memory side, context side"
        )
        for table in profile_tables(shown, title):
            print_table(table, out)
    out.print(f"{report.seconds:.0f} s, load average {payload['config']['load_average']}")
    if json_out:
        write_json(payload, json_out, out)


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
    from benchmarks.cost import RATES, cost_json, run_cost_bench
    from benchmarks.plots import write_cost_plots

    out = human_console(json_out)
    try:
        data, sample = one_sample(data, sample_id)
    except MemoryHookError as exc:
        raise fail(str(exc)) from exc
    if not data.is_file():
        raise fail(missing_locomo(data, "bench cost replays one"))
    client_list = [c.strip() for c in clients.split(",") if c.strip()]
    if not client_list or any(c not in ("new", "whole") for c in client_list):
        raise fail(f"bad --clients: {clients} (new, whole)")
    url = bench_url(redis_url, data_dir, out)
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
            write_plots(write_cost_plots, report, written)


__all__ = ["bench_cost", "bench_extraction", "bench_proxy"]
