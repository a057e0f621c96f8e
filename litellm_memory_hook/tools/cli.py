"""The ``litellm-memory`` command: every command and group, in the order ``--help`` lists them,
and the console script's entry point.

Each command lives in the module of its concern: ``serve``, ``standin`` (:mod:`.cli_serve`);
``import``, ``export`` (:mod:`.cli_import_export`); ``replay``, ``show``, ``forget``
(:mod:`.cli_data`); ``doctor`` (:mod:`.cli_doctor`); ``users``, ``conversations``
(:mod:`.cli_users`); ``stats`` (:mod:`.cli_stats`); ``worker`` (:mod:`.cli_worker`);
``status``, ``stop`` (:mod:`.cli_status`); the groups ``bench`` (:mod:`.cli_bench`, the
benchmarks of a clone), ``memories`` (:mod:`.cli_memory`) and ``tenant`` (:mod:`.cli_tenant`).
How errors are printed: :mod:`.cli_errors`; how a command finds its config and Redis:
:mod:`.cli_connect`.
"""

from __future__ import annotations

import os

# LiteLLM fetches its model cost map from the internet at import unless told not to.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from collections.abc import Callable
from typing import Any

import typer

from litellm_memory_hook.tools import (
    cli_bench,
    cli_data,
    cli_doctor,
    cli_import_export,
    cli_memory,
    cli_serve,
    cli_stats,
    cli_status,
    cli_tenant,
    cli_users,
    cli_worker,
    processes,
)
from litellm_memory_hook.tools.cli_errors import CommandGroup

#: the commands, in the order ``litellm-memory --help`` lists them (the groups follow).
COMMANDS: tuple[tuple[str, Callable[..., Any]], ...] = (
    ("serve", cli_serve.serve),
    ("standin", cli_serve.standin_command),
    ("import", cli_import_export.import_command),
    ("replay", cli_data.replay_command),
    ("show", cli_data.show_command),
    ("forget", cli_data.forget_command),
    ("export", cli_import_export.export_command),
    ("doctor", cli_doctor.doctor_command),
    ("users", cli_users.users_command),
    ("conversations", cli_users.conversations_command),
    ("stats", cli_stats.stats_command),
    ("worker", cli_worker.worker_command),
    ("status", cli_status.status_command),
    ("stop", cli_status.stop_command),
)

app = typer.Typer(help="Long memory for chat models behind a LiteLLM proxy.", no_args_is_help=True)


def register(target: typer.Typer) -> None:
    """Add every command and group to ``target`` (nothing that is there already) and give it
    the one-line error handling and ``--debug`` option of :class:`CommandGroup`."""
    target.info.cls = CommandGroup
    present = {c.name for c in target.registered_commands}
    for name, command in COMMANDS:
        if name not in present:
            target.command(name)(command)
    cli_bench.register(target)
    cli_memory.register(target)
    cli_tenant.register(target)


register(app)


def main() -> None:
    """Console-script entry point."""
    processes.watch_parent()  # a stand-in serve started where prctl is missing
    app()


__all__ = ["COMMANDS", "app", "main", "register"]
