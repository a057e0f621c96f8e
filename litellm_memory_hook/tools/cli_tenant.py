"""``litellm-memory tenant move --from OLD --to NEW``: move a tenant's memory to a new tenant id.

A one-off for deployments whose tenant changes (keys that got a team, an owner or an alias, so
:func:`litellm_memory_hook.proxy.identity.tenant_from_auth` names them differently): every key
of the tenant is moved by SCAN (:func:`litellm_memory_hook.store.tenant_move.move_tenant`).
Prints ``moved N keys (M due entries) from OLD to NEW``; a key whose new name is taken is kept
and named, exit 1; Redis errors are one line, exit 2.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from litellm_memory_hook.store.keys import TENANT_FORMS, is_tenant
from litellm_memory_hook.store.tenant_move import TenantMove, move_tenant
from litellm_memory_hook.tools.cli_common import (
    DEFAULT_CONFIG,
    DEFAULT_DATA_DIR,
    ConfigOption,
    DataDirOption,
    console,
)
from litellm_memory_hook.tools.cli_connect import command_config, run_on_redis
from litellm_memory_hook.tools.cli_errors import fail

#: exit code when some keys were left in place (their new names were taken).
CONFLICT_EXIT = 1

tenant_app = typer.Typer(help="Tenant-wide operations.", no_args_is_help=True)


@tenant_app.command("move")
def move_command(
    old: Annotated[str, typer.Option("--from", help="The tenant id memory is stored under.")],
    new: Annotated[str, typer.Option("--to", help="The tenant id to move it to.")],
    config: ConfigOption = DEFAULT_CONFIG,
    data_dir: DataDirOption = DEFAULT_DATA_DIR,
) -> None:
    """Move every key of tenant --from to tenant --to (users, conversations, memories).

    Example: litellm-memory tenant move --from key-0123456789abcdef01234567 --to alias-my-app
    """
    for value in (old, new):
        if not is_tenant(value):
            raise fail(f"{value!r} is not a tenant id: use {TENANT_FORMS}", code=2)
    if old == new:
        raise fail("--from and --to are the same tenant", code=2)
    proxy_config = command_config(config, data_dir, optional=True)
    prefix = proxy_config.settings.storage.key_prefix

    async def job(redis: Any) -> TenantMove:
        return await move_tenant(redis, prefix, old, new)

    report = run_on_redis(proxy_config, data_dir, job)
    console.print(f"moved {report.moved} keys ({report.due} due entries) from {old} to {new}")
    if report.conflicts:
        for name in report.conflicts[:20]:
            console.print(f"kept (its new name is taken): {name}")
        raise fail(f"{len(report.conflicts)} keys kept under {old}", code=CONFLICT_EXIT)


def register(app: typer.Typer) -> None:
    """Add the ``tenant`` group (``tenant move``) to ``app`` (nothing when it is there)."""
    if "tenant" not in {g.name for g in app.registered_groups}:
        app.add_typer(tenant_app, name="tenant")


__all__ = ["CONFLICT_EXIT", "move_command", "register", "tenant_app"]
