"""``litellm-memory show``, ``replay`` and ``forget``: what the model would receive next, layer by
layer; a LoCoMo sample's questions asked through a running proxy; a user or a conversation
deleted (through the user's index, no ``KEYS``, with their entries in the due set).
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from litellm_memory_hook.errors import MemoryHookError
from litellm_memory_hook.memory_api import MemoryAPI, resolve_user
from litellm_memory_hook.tools.cli_common import (
    DEFAULT_CONFIG,
    DEFAULT_DATA_DIR,
    MASTER_TENANT,
    ConfigOption,
    DataDirOption,
    ModelOption,
    OneConversationOption,
    TenantOption,
    UserOption,
    console,
    counted,
    out_console,
    print_table,
)
from litellm_memory_hook.tools.cli_connect import (
    command_config,
    identity,
    load_config,
    memory_target,
    open_redis,
    run_on_redis,
    who,
)
from litellm_memory_hook.tools.cli_errors import fail
from litellm_memory_hook.tools.cli_import_export import read_history

#: The next message ``show`` assumes when none is given and none is stored: no letters, so the
#: language reminder names no script (a chat's first message decides it).
SHOW_PLACEHOLDER = "\u2026"


def show_command(
    user: Annotated[str, typer.Option(help="The user id (required).")],
    conversation: Annotated[
        str | None, typer.Argument(help="Conversation id (default: the alias's).")
    ] = None,
    model: Annotated[str, typer.Option(help="The memory-enabled alias.")] = "demo",
    tenant: Annotated[str, typer.Option(help="Tenant.")] = MASTER_TENANT,
    message: Annotated[
        str | None,
        typer.Option(
            help="The next user message (recall and the language reminder follow it; default: "
            "the last stored user message)."
        ),
    ] = None,
    config: ConfigOption = Path("config.yaml"),
    data_dir: DataDirOption = Path(".litellm-memory"),
) -> None:
    """Show what the model would receive next, layer by layer."""
    from litellm_memory_hook.engine.options import ContextOptions
    from litellm_memory_hook.engine.rebuild import prepare
    from litellm_memory_hook.store.redis_store import MemoryStore

    proxy_config = command_config(config, data_dir)
    who = identity(proxy_config, model, user, conversation, tenant)
    alias = proxy_config.alias(model)
    settings = proxy_config.settings
    options = ContextOptions.for_alias(settings, alias)

    async def run() -> Any:
        redis = open_redis(settings, data_dir)
        try:
            store = MemoryStore.for_settings(redis, settings)
            count = await store.count_turns(who.keys)
            known = bool(await redis.exists(who.keys.user_keys.index))
            probe = message
            if probe is None:
                state, _ = await store.load(who.keys, who.memory, tail=options.budget.messages)
                users = [t.text for t in state.tail if t.role == "user" and t.text.strip()]
                probe = users[-1] if users else SHOW_PLACEHOLDER
            prepared = await prepare(
                store, who.keys, who.memory, [{"role": "user", "content": probe}], options
            )
            return count, prepared, probe, known
        finally:
            await redis.aclose()

    from litellm_memory_hook.store.embedded import EmbeddedRedisError

    try:
        count, prepared, probe, known = asyncio.run(run())
    except EmbeddedRedisError as exc:
        raise fail(f"embedded Redis in {data_dir}/: {exc}") from exc
    except MemoryHookError as exc:
        raise fail(str(exc)) from exc
    console.print(f"conversation {who.keys.ref}: {counted(count, 'stored turn')}")
    if not known:
        console.print(
            f"no such user {who.user!r} in tenant {who.tenant!r} (`litellm-memory users` lists "
            "them): what follows is what a new user's first message gets",
            highlight=False,
        )
    if message is None:
        console.print(
            "next message (no --message): "
            + ("a placeholder" if probe == SHOW_PLACEHOLDER else "the last stored user message"),
            style="dim",
            highlight=False,
        )
    if prepared is None:
        console.print("nothing to show")
        return
    console.print(Panel(prepared.messages[0]["content"], title=Text("system message")))
    for m in prepared.messages[1:]:
        from litellm_memory_hook.core.messages import content_text

        console.print(Text(m["role"], style="bold"), f": {content_text(m.get('content'))}", sep="")
    table = Table(title="characters per layer")
    table.add_column("layer")
    table.add_column("chars", justify="right")
    for name, chars in prepared.layer_chars.items():
        table.add_row(name, str(chars))
    print_table(table)


def replay_command(
    file: Annotated[Path, typer.Argument(help="The LoCoMo-format file.")],
    sample_id: Annotated[str, typer.Option(help="LoCoMo sample, e.g. conv-26.")],
    user: Annotated[str, typer.Option(help="The user id used at import.")],
    report: Annotated[Path, typer.Option(help="Where to write the JSON report.")],
    fmt: Annotated[str, typer.Option("--format", help="locomo.")] = "locomo",
    base_url: Annotated[
        str, typer.Option(help="The proxy's base URL.")
    ] = "http://127.0.0.1:4000/v1",
    model: Annotated[str, typer.Option(help="The memory-enabled alias.")] = "demo",
    api_key: Annotated[
        str | None, typer.Option(help="Proxy key (default: the master key).")
    ] = None,
    standin_url: Annotated[str, typer.Option(help="The stand-in model.")] = "http://127.0.0.1:4010",
    conversation: Annotated[str | None, typer.Option(help="Conversation id.")] = None,
    config: ConfigOption = Path("config.yaml"),
) -> None:
    """Ask each QA question through the proxy (read-only) and measure what reached the model."""
    from litellm_memory_hook.tools.replay import replay

    if fmt != "locomo":
        raise fail("replay needs --format locomo (questions and evidence labels)")
    history = read_history(file, fmt, sample_id)
    key = api_key or (load_config(config).master_key if config.exists() else None) or "sk-none"
    with console.status(Text("replaying questions")) as status:
        result = replay(
            history,
            base_url=base_url,
            api_key=key,
            model=model,
            user=user,
            standin_url=standin_url,
            conversation=conversation,
            progress=lambda done, total: status.update(Text(f"question {done}/{total}")),
        )
    table = Table(title=f"replay {history.sample_id} through {base_url} ({model})")
    table.add_column("measure")
    table.add_column("value", justify="right")
    for name in (
        "questions",
        "evidence_cover",
        "median_prompt_chars",
        "median_full_history_chars",
        "hook_ms_p50",
        "hook_ms_p95",
    ):
        table.add_row(name, str(getattr(result, name)))
    print_table(table)
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text(json.dumps(result.to_json(), ensure_ascii=False, indent=2), encoding="utf-8")
    console.print(f"report: {report}")


def forget_command(
    user: UserOption,
    conversation: OneConversationOption = None,
    model: ModelOption = "demo",
    tenant: TenantOption = MASTER_TENANT,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the counts as JSON.")] = False,
    config: ConfigOption = DEFAULT_CONFIG,
    data_dir: DataDirOption = DEFAULT_DATA_DIR,
) -> None:
    """Forget a user: delete their conversations, summaries, recall index and memories.

    Without --conversation: everything of the user in the tenant, whatever the alias (--model
    is not used).

    With --conversation: that conversation only (shared memories stay), named with --model.

    Without --yes it asks first; answering no prints "not forgotten" and exits 1.

    Example: litellm-memory forget --user alice --yes
    """
    proxy_config = command_config(config, data_dir)
    if conversation:
        target = memory_target(
            proxy_config, user=user, model=model, tenant=tenant, conversation=conversation
        )
    else:  # the whole user, whatever the alias: --model is not needed (it may have left)
        try:
            target = resolve_user(proxy_config.settings, tenant=tenant, user=user)
        except MemoryHookError as exc:
            raise fail(str(exc)) from exc
    what = who(target, conversation)
    if not yes:
        if not sys.stdin.isatty():
            raise fail(f"forgetting {what} cannot be undone: add --yes to confirm")
        if not typer.confirm(f"Forget {what}? This cannot be undone", default=False):
            out_console.print(f"not forgotten: {what} is kept", highlight=False)
            raise typer.Exit(code=1)

    async def job(redis: Any) -> Any:
        return await MemoryAPI(redis, proxy_config.settings).forget(
            target, whole_user=not conversation
        )

    result = run_on_redis(proxy_config, data_dir, job)
    if as_json:
        payload = {"user": target.user, "tenant": target.tenant, "conversation": conversation}
        payload.update(result.__dict__)
        typer.echo(json.dumps(payload, ensure_ascii=False))
        return
    if not result.deleted_keys:
        out_console.print(f"nothing stored for {what}", highlight=False)
        return
    out_console.print(
        f"forgot {what}: {result.conversations} conversation(s), {result.memory_sets} memory "
        f"set(s), {counted(result.deleted_keys, 'key')} deleted",
        highlight=False,
    )


__all__ = [
    "SHOW_PLACEHOLDER",
    "forget_command",
    "replay_command",
    "show_command",
]
