"""``litellm-memory users`` and ``conversations``: which users and conversations are stored.

* ``litellm-memory users [--search TEXT] [--tenant master] [--offset N] [--limit N] [--json]``:
  one page of the tenant's users, sorted by id (found by SCAN over their index keys, never
  KEYS), with their conversation and memory-set counts and last write.
* ``litellm-memory conversations --user U [--search TEXT] [--tenant master] [--offset N]
  [--limit N] [--json]``: one page of the user's conversations, newest first; a user with
  nothing stored in the tenant (a mistyped id) is one line, ``error: no such user ...``, exit 1.

Both read the same Redis as the other commands (``--config``, ``--data-dir``) through the memory
API (:meth:`litellm_memory_hook.memory_api.MemoryAPI.users`, ``.conversations``).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Annotated, Any

import typer
from rich.table import Table

from litellm_memory_hook.memory_api import MemoryAPI, MemoryNotFoundError
from litellm_memory_hook.store.directory import MAX_PAGE, ConversationEntry, Page, UserEntry
from litellm_memory_hook.tools.cli_common import (
    DEFAULT_CONFIG,
    DEFAULT_DATA_DIR,
    MASTER_TENANT,
    ConfigOption,
    DataDirOption,
    TenantOption,
    UserOption,
    console,
    counted,
)
from litellm_memory_hook.tools.cli_connect import command_config, run_on_redis
from litellm_memory_hook.tools.cli_errors import fail

#: exit code of a command given a user with nothing stored (a mistyped ``--user``).
NO_SUCH_USER_EXIT = 1

SearchOption = Annotated[
    str, typer.Option("--search", help="Only ids containing this (case-insensitive).")
]
OffsetOption = Annotated[int, typer.Option("--offset", min=0, help="Skip this many first.")]
LimitOption = Annotated[
    int, typer.Option("--limit", min=1, max=MAX_PAGE, help=f"At most this many (<= {MAX_PAGE}).")
]
JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


def _when(ms: int | None) -> str:
    if not ms:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _page_json(page: Page[Any]) -> dict[str, Any]:
    return {
        "items": [vars(item) for item in page.items],
        "total": page.total,
        "offset": page.offset,
        "next_offset": page.next_offset,
    }


def _footer(page: Page[Any], noun: str, plural: str | None = None) -> str:
    shown = f"{page.offset + 1}-{page.offset + len(page.items)}" if page.items else "none"
    line = f"{counted(page.total, noun, plural)}; shown: {shown}"
    if page.next_offset is not None:
        line += f" (next page: --offset {page.next_offset})"
    return line


def users_command(
    search: SearchOption = "",
    tenant: TenantOption = MASTER_TENANT,
    offset: OffsetOption = 0,
    limit: LimitOption = 50,
    as_json: JsonFlag = False,
    config: ConfigOption = DEFAULT_CONFIG,
    data_dir: DataDirOption = DEFAULT_DATA_DIR,
) -> None:
    """List the tenant's stored users, sorted by id (one page).

    Example: litellm-memory users --search ali
    """
    proxy_config = command_config(config, data_dir, optional=True)

    async def job(redis: Any) -> Page[UserEntry]:
        api = MemoryAPI(redis, proxy_config.settings)
        return await api.users(tenant, search=search, offset=offset, limit=limit)

    page = run_on_redis(proxy_config, data_dir, job)
    if as_json:
        typer.echo(json.dumps({"tenant": tenant, **_page_json(page)}, ensure_ascii=False))
        return
    table = Table(title=f"users of tenant {tenant!r}" + (f" matching {search!r}" if search else ""))
    table.add_column("user", overflow="fold")
    table.add_column("conversations", justify="right")
    table.add_column("memory sets", justify="right")
    table.add_column("last write", no_wrap=True)
    for user in page.items:
        table.add_row(
            user.user, str(user.conversations), str(user.memory_sets), _when(user.updated_ms)
        )
    console.print(table)
    console.print(_footer(page, "user"))


def conversations_command(
    user: UserOption,
    search: SearchOption = "",
    tenant: TenantOption = MASTER_TENANT,
    offset: OffsetOption = 0,
    limit: LimitOption = 50,
    as_json: JsonFlag = False,
    config: ConfigOption = DEFAULT_CONFIG,
    data_dir: DataDirOption = DEFAULT_DATA_DIR,
) -> None:
    """List a user's stored conversations, most recently written first (one page).

    Example: litellm-memory conversations --user alice
    """
    proxy_config = command_config(config, data_dir, optional=True)

    async def job(redis: Any) -> Page[ConversationEntry] | str:
        api = MemoryAPI(redis, proxy_config.settings)
        try:
            return await api.conversations(tenant, user, search=search, offset=offset, limit=limit)
        except MemoryNotFoundError as exc:
            return str(exc)

    page = run_on_redis(proxy_config, data_dir, job)
    if isinstance(page, str):
        raise fail(f"{page} (`litellm-memory users` lists them)", code=NO_SUCH_USER_EXIT)
    if as_json:
        payload = {"tenant": tenant, "user": user, **_page_json(page)}
        typer.echo(json.dumps(payload, ensure_ascii=False))
        return
    table = Table(title=f"conversations of user {user!r} of tenant {tenant!r}")
    table.add_column("conversation", overflow="fold")
    table.add_column("alias")
    table.add_column("turns", justify="right")
    table.add_column("extracted through", justify="right")
    table.add_column("last write", no_wrap=True)
    for c in page.items:
        table.add_row(c.id, c.alias or "?", str(c.turns), str(c.cursor), _when(c.updated_ms))
    console.print(table)
    console.print(_footer(page, "conversation"))


__all__ = ["NO_SUCH_USER_EXIT", "conversations_command", "users_command"]
