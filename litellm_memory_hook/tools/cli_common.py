"""What every command module of the CLI shares: the consoles, the common options and how a table
is printed.

Every command module imports it; it imports none of them (the CLI's modules import one way:
``cli`` -> the command modules -> ``cli_connect`` -> ``cli_errors`` -> ``cli_common``).
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
#: the same, on stderr (errors, notes, progress bars: stdout stays clean for JSON).
err_console = Console(stderr=True, markup=False, emoji=False)
#: stdout, for commands that print their result apart from :data:`console`'s lines.
out_console = Console(markup=False, emoji=False)

ConfigOption = Annotated[Path, typer.Option("--config", help="The proxy's config.yaml.")]
DataDirOption = Annotated[
    Path, typer.Option("--data-dir", help="The embedded Redis folder (when REDIS_URL is unset).")
]
MASTER_TENANT = "master"
DEFAULT_CONFIG = Path("config.yaml")
DEFAULT_DATA_DIR = Path(".litellm-memory")

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
JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]

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
