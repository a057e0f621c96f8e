"""The ``bench`` commands that measure the hook in this process, on a real Redis: ``latency``
(pre-call time against history size), ``footprint`` (Redis bytes per stored message, by key
kind), ``recall`` (evidence cover of recall) and ``stall`` (one
user's large message against the others' small ones; ``--proxy`` also through a real proxy)."""

from __future__ import annotations

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
from litellm_memory_hook.tools.cli_common import print_table
from litellm_memory_hook.tools.cli_connect import mask_url
from litellm_memory_hook.tools.cli_errors import fail
from litellm_memory_hook.tools.histories import History, load_locomo


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
    count_pairs: Annotated[
        int,
        typer.Option(
            min=0,
            help="Turn pairs (pre-call + post-call) whose Python bytecode instructions are "
            "counted per size (0: none).",
        ),
    ] = 20,
    redis_url: Annotated[str | None, typer.Option(help=BENCH_REDIS_HELP)] = None,
    data_dir: BenchDataDirOption = DEFAULT_DATA_DIR,
    json_out: Annotated[Path | None, typer.Option("--json", help=BENCH_JSON_HELP)] = None,
) -> None:
    """Pre-call hook time (median, p99) at growing history sizes, naive approach beside it, and
    the Python bytecode instructions of a turn pair (pre-call + post-call): a figure the
    machine's load does not move."""
    from benchmarks.instructions import KIND
    from benchmarks.latency import latency_rows_json, run_latency_sync
    from benchmarks.plots import write_latency_plots

    out = human_console(json_out)
    try:
        size_list = [int(s) for s in sizes.split(",") if s.strip()]
    except ValueError as exc:
        raise fail(f"bad --sizes: {sizes}") from exc
    if any(size < 0 for size in size_list):
        raise fail(f"bad --sizes: {sizes} (a history size is 0 or more messages)")
    data, sample, history = _locomo_history(data, sample_id, "bench latency")
    url = bench_url(redis_url, data_dir, out)
    rows = run_latency_sync(
        url, history, size_list, runs=runs, naive=naive, count_pairs=count_pairs
    )
    table = Table(title=f"pre-call hook latency on {mask_url(url)}, {data.name}:{sample}")
    for column in (
        "messages",
        "hook p50 ms",
        "hook p99 ms",
        "naive p50 ms",
        "naive p99 ms",
        "build s",
        "memory/text",
        "bytecode instructions / turn pair",
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
            "-" if r.bytecode_per_pair is None else f"{r.bytecode_per_pair:,}",
        )
    print_table(table, out)
    if count_pairs:
        out.print(
            f"instructions / turn pair: {KIND}, the mean of {count_pairs} pre-call + post-call "
            "pairs of a new message at each size (C code not counted)"
        )
    if json_out:
        written = write_json(latency_rows_json(rows), json_out, out)
        if written:
            write_plots(write_latency_plots, latency_rows_json(rows), written)


def bench_footprint(
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
    sizes: Annotated[str, typer.Option(help="Comma-separated history sizes.")] = "10000,100000",
    chat: Annotated[
        str,
        typer.Option(
            help="Comma-separated sizes of conversations also made by chat requests through "
            "the hook (a turn pair a request, UUID call ids; ~3 ms a pair); '' for none."
        ),
    ] = "",
    redis_url: Annotated[str | None, typer.Option(help=BENCH_REDIS_HELP)] = None,
    data_dir: BenchDataDirOption = DEFAULT_DATA_DIR,
    json_out: Annotated[Path | None, typer.Option("--json", help=BENCH_JSON_HELP)] = None,
) -> None:
    """Redis memory per stored message, by key kind (turns, postings, times, meta, calls, the
    user's keys), and the whole against the messages' text, at growing history sizes."""
    from benchmarks.footprint import KINDS, footprint_rows_json, run_footprint_sync

    out = human_console(json_out)
    try:
        size_list = [int(s) for s in sizes.split(",") if s.strip()]
        chat_list = [int(s) for s in chat.split(",") if s.strip()]
    except ValueError as exc:
        raise fail(f"bad --sizes or --chat: {sizes} / {chat}") from exc
    if not size_list or any(size < 1 for size in (*size_list, *chat_list)):
        raise fail(f"bad --sizes or --chat: {sizes} / {chat} (a size is 1 or more messages)")
    data, sample, history = _locomo_history(data, sample_id, "bench footprint")
    url = bench_url(redis_url, data_dir, out)
    rows = run_footprint_sync(url, history, size_list, chat_sizes=chat_list)
    table = Table(title=f"Redis bytes per stored message on {mask_url(url)}, {data.name}:{sample}")
    for column in ("messages", "built", "text", *KINDS, "total", "x text"):
        table.add_column(column, justify="right")
    for r in rows:
        per = r.per_message
        cells = [f"{per[k]:,.1f}" for k in ("text", *KINDS, "total")]
        table.add_row(f"{r.messages:,}", r.built, *cells, f"{r.x_text:.2f}")
    print_table(table, out)
    out.print(
        "bytes per message: MEMORY USAGE ... SAMPLES 0 of each key, over the messages; built: "
        "store (appended through the store, as an import) or chat (chat requests)"
    )
    if json_out:
        write_json(footprint_rows_json(rows), json_out, out)


def _curve_lists(ks: str, budgets: str) -> tuple[list[int], list[int]]:
    """``--ks`` and ``--budgets`` as numbers, or exit with one line."""
    try:
        ks_list = [int(x) for x in ks.split(",") if x.strip()]
        budget_list = [int(x) for x in budgets.split(",") if x.strip()]
    except ValueError as exc:
        raise fail(f"bad --ks or --budgets: {exc}") from exc
    if any(n < 0 for n in (*ks_list, *budget_list)):
        raise fail(f"bad --ks or --budgets: {ks} / {budgets} (0 or more; 0: recall off)")
    return ks_list, budget_list


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

    from benchmarks.options import MULTILING_DEV, STDOUT, default_bench_files, pick_samples
    from benchmarks.plots import write_recall_plots
    from benchmarks.recall import curve_points, load_histories, run_recall_sync
    from benchmarks.recall_report import curve_table, recall_table
    from litellm_memory_hook.engine.recall_step import RecallOptions

    if fmt != "locomo":
        raise fail("bench recall needs --format locomo (questions and evidence labels)")
    if mode not in ("budget", "fixed"):
        raise fail("--mode is budget or fixed")
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
        raise fail(str(exc)) from exc
    url = bench_url(redis_url, data_dir, out)
    payloads = []
    for file, wanted in picked:
        try:
            histories = load_histories(file, wanted)
            with out.status(Text(f"running the questions of {file.name}")):
                report = run_recall_sync(url, histories, recall_options=options, points=points)
        except MemoryHookError as exc:
            raise fail(str(exc)) from exc
        except ModuleNotFoundError as exc:
            raise fail(f"{exc} (the BM25 baseline needs the dev extra: bm25s)") from exc
        what = f"k={k}" if options.mode == "fixed" else f"budget {options.chars} chars"
        title = f"evidence recall/cover ({what}): {file.name} on {mask_url(url)}"
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
                write_plots(write_recall_plots, payload, written)
    if json_out and str(json_out) == STDOUT:
        write_json(payloads[0] if len(payloads) == 1 else payloads, json_out, out)


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
    from benchmarks.stall import SAMPLES, run_stall, stall_rows_json

    out = human_console(json_out)
    url = bench_url(redis_url, data_dir, out)
    kind_list = [k.strip() for k in kinds.split(",") if k.strip()]
    unknown = [k for k in kind_list if k not in SAMPLES]
    if unknown:
        raise fail(f"bad --kinds: {', '.join(unknown)} (known: {', '.join(SAMPLES)})")
    try:
        size_list = [int(s) for s in sizes.split(",") if s.strip()]
    except ValueError as exc:
        raise fail(f"bad --sizes: {sizes}") from exc
    if not size_list or any(size < 1 for size in size_list):
        raise fail(f"bad --sizes: {sizes} (each at least 1 character)")
    rows = run_stall(url, kinds=kind_list, sizes=size_list, proxy=proxy)
    table = Table(title=f"one large message and another user's small one, on {mask_url(url)}")
    columns = ["kind", "chars", "client", "pre-call ms", "post-call ms", "write ms"]
    columns += ["added wait ms"]
    columns += ["quiet wait ms (baseline)", "small"]
    if proxy:
        columns += ["proxy: memory alias added wait ms", "plain alias (baseline) ms"]
    for column in columns:
        table.add_column(column, justify="right")
    for r in rows:
        cells = [r.kind, str(r.chars), r.client, f"{r.hook_ms:.1f}", f"{r.post_call_ms:.1f}"]
        cells += [f"{r.write_ms:.1f}"]
        cells += [f"{r.added_wait_ms:.1f}", f"{r.quiet_wait_ms:.1f}", str(r.small_requests)]
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
        f"({worst.kind} {worst.chars} {worst.client}), worst post-call "
        f"{max(r.post_call_ms for r in rows):.1f} ms, worst added wait "
        f"{max(r.added_wait_ms for r in rows):.1f} ms (quiet: "
        f"{max(r.quiet_wait_ms for r in rows):.1f} ms)"
    )
    if json_out:
        write_json(stall_rows_json(rows), json_out, out)


def _locomo_history(
    data: Path | None, sample_id: str | None, command: str
) -> tuple[Path, str, History]:
    """The LoCoMo file, the sample and its history that ``command`` cycles; a one-line error
    (:func:`fail`) when the file is missing or the sample is not in it."""
    try:
        data, sample = one_sample(data, sample_id)
    except MemoryHookError as exc:
        raise fail(str(exc)) from exc
    if not data.is_file():
        raise fail(missing_locomo(data, f"{command} cycles the text of one"))
    try:
        return data, sample, load_locomo(data, sample)
    except MemoryHookError as exc:
        raise fail(str(exc)) from exc


__all__ = ["bench_footprint", "bench_latency", "bench_recall", "bench_stall"]
