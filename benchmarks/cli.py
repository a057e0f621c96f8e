"""``litellm-memory bench``: the benchmarks' command group, which the ``litellm-memory`` command
loads from a clone of the repository (:mod:`litellm_memory_hook.tools.cli_bench`).

Commands, in the order ``bench --help`` lists them: ``latency``, ``footprint``, ``recall``
(:mod:`benchmarks.commands_hook`), ``extraction``, ``proxy``, ``cost``
(:mod:`benchmarks.commands_proxy`), ``stall`` and ``fetch-locomo``. This module and those
import only what their options need; each command imports its benchmark when it runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from benchmarks.commands_hook import bench_footprint, bench_latency, bench_recall, bench_stall
from benchmarks.commands_proxy import bench_cost, bench_extraction, bench_proxy
from benchmarks.options import LOCOMO_FILE, LOCOMO_URL
from litellm_memory_hook.errors import MemoryHookError
from litellm_memory_hook.tools.cli_bench import BENCH_HELP
from litellm_memory_hook.tools.cli_common import console
from litellm_memory_hook.tools.cli_errors import fail

bench_app = typer.Typer(help=BENCH_HELP, no_args_is_help=True)


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
    from benchmarks.options import LOCOMO_LICENCE, fetch_locomo

    try:
        fetched = fetch_locomo(url, to, force=force)
    except MemoryHookError as exc:
        raise fail(str(exc)) from exc
    done = "downloaded" if fetched.downloaded else "already there (--force downloads again)"
    console.print(
        f"{fetched.path}: {done}; {len(fetched.samples)} samples "
        f"({', '.join(fetched.samples)}), {fetched.questions} questions",
        soft_wrap=True,
        highlight=False,
    )
    console.print(LOCOMO_LICENCE, soft_wrap=True, highlight=False)


for _name, _command in (
    ("latency", bench_latency),
    ("footprint", bench_footprint),
    ("recall", bench_recall),
    ("extraction", bench_extraction),
    ("proxy", bench_proxy),
    ("cost", bench_cost),
    ("stall", bench_stall),
    ("fetch-locomo", bench_fetch_locomo),
):
    bench_app.command(_name)(_command)


__all__ = ["bench_app"]
