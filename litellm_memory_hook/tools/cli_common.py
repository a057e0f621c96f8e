"""What every command module of the CLI shares: the console and the common options.

Kept apart so that ``cli``, ``cli_memory`` and ``cli_ops`` import it and not each other (the
imports run one way: ``cli`` -> ``cli_memory`` -> ``cli_ops`` -> ``cli_common``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console, RenderableType
from rich.measure import Measurement

#: Markup and emoji codes off: what the CLI prints holds text users wrote (memories, chat turns,
#: user and conversation ids, file names), which must show as written (``[/]`` or ``:cat:`` in a
#: memory is text, not a rich tag or an emoji). Styling is explicit (``style=``, :class:`Text`).
console = Console(markup=False, emoji=False)

ConfigOption = Annotated[Path, typer.Option("--config", help="The proxy's config.yaml.")]
DataDirOption = Annotated[
    Path, typer.Option("--data-dir", help="The embedded Redis folder (when REDIS_URL is unset).")
]
MASTER_TENANT = "master"

#: the highest TCP port. Port options are checked as click does their type: a value outside
#: 1..65535 (0..65535 where 0 means "none") is a usage error, exit code 2.
MAX_PORT = 65535


def counted(count: int, singular: str, plural: str | None = None) -> str:
    """``1 turn``, ``2 turns``, ``0 turns``: a count with its noun in the right number
    (``plural``: for nouns that do not just add ``s``, e.g. ``memories``)."""
    return f"{count} {singular if count == 1 else plural or singular + 's'}"


def print_table(table: RenderableType, out: Console | None = None) -> None:
    """Print a table whole: on a terminal as rich fits it; piped or redirected, at its natural
    width (no column cut or folded at 80 characters, whatever ``COLUMNS`` says)."""
    out = out or console
    if out.is_terminal:
        out.print(table)
        return
    natural = Measurement.get(out, out.options.update_width(100_000), table).maximum
    out.print(table, width=max(natural, 1), crop=False, soft_wrap=False)
