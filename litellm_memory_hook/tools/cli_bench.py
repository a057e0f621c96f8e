"""``litellm-memory bench``: the benchmarks, which run from a clone of the repository.

They are the repository's top-level ``benchmarks`` package, not part of the installed package
(they need its data and the dev extra's libraries). The ``bench`` group loads their commands
when one is first needed (:class:`BenchGroup`); where there is no such package (an installed
wheel, the Docker image), every ``bench`` command says so in one line, exit code 2.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import typer
import typer.main
from typer.core import TyperGroup

from litellm_memory_hook.tools.cli_errors import adopt_command, fail

#: what ``litellm-memory --help`` says of the group (also when the benchmarks are not here).
BENCH_HELP = "Benchmarks that print a table and write JSON."
#: the one line of ``bench`` where the benchmarks are not.
NOT_IN_A_CLONE = (
    "the benchmarks run from a clone of the repository (its benchmarks/ folder is not "
    "installed with the package): run litellm-memory bench in the clone, after "
    "pip install -e '.[dev]'"
)
#: the module of the benchmarks that holds their command group (``bench_app``).
BENCH_MODULE = "benchmarks.cli"


def _clones() -> list[Path]:
    """Where the benchmarks may be: the ``benchmarks`` folder beside this package's own source
    (a clone it runs from: an editable install, ``PYTHONPATH``), then the working directory's
    (a clone the command runs in)."""
    return [Path(__file__).resolve().parents[2] / "benchmarks", Path.cwd() / "benchmarks"]


def _package_at(folder: Path) -> ModuleType | None:
    """The ``benchmarks`` package of ``folder`` (imported from there when it is not yet), or
    ``None`` when ``folder`` holds none or another ``benchmarks`` is already imported."""
    if not (folder / "cli.py").is_file():
        return None
    package = sys.modules.get("benchmarks")
    if package is None:
        spec = importlib.util.spec_from_file_location(
            "benchmarks", folder / "__init__.py", submodule_search_locations=[str(folder)]
        )
        if spec is None or spec.loader is None:
            return None
        package = importlib.util.module_from_spec(spec)
        sys.modules["benchmarks"] = package
        try:
            spec.loader.exec_module(package)
        except BaseException:
            del sys.modules["benchmarks"]
            raise
    where = getattr(package, "__file__", None)
    return package if where and Path(where).resolve().parent == folder.resolve() else None


def load_benchmarks() -> ModuleType | None:
    """The benchmarks' command module (:data:`BENCH_MODULE`) of the first clone of
    :func:`_clones` that has them; ``None`` when none has."""
    for folder in _clones():
        if _package_at(folder) is not None:
            return importlib.import_module(BENCH_MODULE)
    return None


class BenchGroup(TyperGroup):
    """The ``bench`` group: its commands are those of the benchmarks' ``bench_app``, loaded the
    first time the group is parsed, listed or asked for a command."""

    _loaded: Any = None

    def benchmarks(self) -> Any:
        """The benchmarks' command group (a click group), or ``None`` when they are not here."""
        if self._loaded is None:
            module = load_benchmarks()
            if module is None:
                return None
            group = typer.main.get_command(module.bench_app)
            adopt_command(group)
            self._loaded = group
        return self._loaded

    def list_commands(self, ctx: Any) -> list[str]:
        """The benchmarks' commands, in their order (none when they are not here)."""
        group = self.benchmarks()
        return list(group.list_commands(ctx)) if group is not None else []

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        """One of the benchmarks' commands (``None``: no such command, or no benchmarks)."""
        group = self.benchmarks()
        return group.get_command(ctx, cmd_name) if group is not None else None

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        """Refuse in one line (exit code 2) where the benchmarks are not: every ``bench``
        command, ``--help`` included."""
        if self.benchmarks() is None:
            raise fail(NOT_IN_A_CLONE)
        return super().parse_args(ctx, args)


def register(app: typer.Typer) -> None:
    """Add the ``bench`` group to ``app`` (nothing when it is there)."""
    if "bench" not in {g.name for g in app.registered_groups}:
        app.add_typer(
            typer.Typer(cls=BenchGroup, help=BENCH_HELP, no_args_is_help=True), name="bench"
        )


__all__ = ["BENCH_HELP", "NOT_IN_A_CLONE", "BenchGroup", "load_benchmarks", "register"]
