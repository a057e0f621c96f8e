"""``litellm-memory memories history`` and ``memories restore``: what extraction jobs removed.

* ``litellm-memory memories history --user U [--model demo] [--json]``: the memories extraction
  jobs replaced or deleted from the user's memory set, newest first, with the entry id, when,
  why (``update``, ``delete``, ``cap``), by what, and the job (conversation and message seqs).
* ``litellm-memory memories restore ID --user U``: put one back, exactly (its id and text).

Registered on ``memories`` by :mod:`litellm_memory_hook.tools.cli_memory` (which imports this
module), with the same options and error handling as the other ``memories`` commands.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Annotated

import typer
from rich.table import Table

from litellm_memory_hook.memory_api import MemoryAPI, MemoryTarget
from litellm_memory_hook.store.memory_history import HistoryEntry
from litellm_memory_hook.store.memory_sets import MemoryItem
from litellm_memory_hook.tools.cli_common import JsonFlag, console
from litellm_memory_hook.tools.cli_memory import (
    MemorySetOptions,
    _describe,
    _memories_command,
    _when,
)


@_memories_command("history")
def history_command(options: MemorySetOptions, as_json: JsonFlag = False) -> None:
    """List the memories extraction jobs replaced or deleted, newest first (restorable).

    Example: litellm-memory memories history --user alice --model demo
    """

    async def call(api: MemoryAPI, target: MemoryTarget) -> Sequence[HistoryEntry]:
        return await api.history(target)

    target, entries = options.call(call)
    if as_json:
        payload = {"history": [e.as_json() for e in entries]}
        typer.echo(json.dumps(payload, ensure_ascii=False, indent=2))
        return
    table = Table(title=f"removed memories of {_describe(target)}")
    for column in ("entry id", "removed", "reason", "text", "by", "job"):
        table.add_column(column, overflow="fold", no_wrap=column in ("entry id", "removed"))
    for entry in entries:
        job = f"{entry.conversation} seq {entry.from_seq}-{entry.through_seq}"
        table.add_row(entry.id, _when(entry.removed_ms), entry.reason, entry.text, entry.by, job)
    console.print(table)
    console.print(f"{len(entries)} removed (restore one: litellm-memory memories restore ID)")


@_memories_command("restore")
def restore_command(
    options: MemorySetOptions,
    entry_id: Annotated[
        str, typer.Argument(metavar="ID", help="The history entry's id (`memories history`).")
    ],
) -> None:
    """Put a removed memory back, exactly as it was (its id and text).

    Example: litellm-memory memories restore 1718000000000-a1b2c3 --user alice
    """

    async def call(api: MemoryAPI, target: MemoryTarget) -> MemoryItem:
        return await api.restore(target, entry_id)

    target, item = options.call(call)
    console.print(f"restored {item.id} for {_describe(target)}: {item.text}")


__all__ = ["history_command", "restore_command"]
