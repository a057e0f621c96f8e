"""``litellm-memory memories list|pin|edit|delete|flush|history|restore --user U [--model demo]
[--tenant master] [--conversation C]``: read and edit a user's memories, as the HTTP API
(``/memory/v1``) does for the user's own key. ``--tenant`` is the tenant a key maps to
(``master`` for the master key, ``team-<id>``, ``user-<id>``, ``key-<hash>``; see
``litellm_memory_hook.proxy.identity``). ``history`` and ``restore`` are in
:mod:`.cli_history`.

They read the proxy's config.yaml (``--config``) and use the same Redis as the other commands:
the configured one, else the embedded one in ``--data-dir``. Errors are one line on the console
and exit code 2.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.table import Table

from litellm_memory_hook.errors import MemoryHookError
from litellm_memory_hook.memory_api import (
    MemoryAPI,
    MemoryListing,
    MemoryNotFoundError,
    MemoryTarget,
    resolve_target,
)
from litellm_memory_hook.store.memory_sets import MemoryItem
from litellm_memory_hook.tools.cli_common import (
    DEFAULT_CONFIG,
    DEFAULT_DATA_DIR,
    MASTER_TENANT,
    ConfigOption,
    DataDirOption,
    JsonFlag,
    TenantOption,
    UserOption,
    console,
)
from litellm_memory_hook.tools.cli_connect import alias_lookup, command_config, run_on_redis
from litellm_memory_hook.tools.cli_errors import fail as _fail
from litellm_memory_hook.tools.cli_users import NO_SUCH_USER_EXIT

T = TypeVar("T")

memories_app = typer.Typer(
    help=(
        "Read and edit a user's memories (pinned: written by the user, never changed by the "
        "model; extracted: written by the model). "
        "Example: litellm-memory memories list --user alice"
    ),
    no_args_is_help=True,
)

ModelOption = Annotated[str, typer.Option("--model", help="The memory-enabled model alias.")]
ConversationOption = Annotated[
    str | None,
    typer.Option(
        "--conversation",
        help="Conversation id (default: the alias's default conversation; needed for aliases "
        "with memory_scope: conversation).",
    ),
]


@dataclass(frozen=True)
class MemorySetOptions:
    """The options every ``memories`` command shares: the memory set and where it is stored."""

    user: str
    model: str
    tenant: str
    conversation: str | None
    config: Path
    data_dir: Path

    def call(
        self,
        call: Callable[[MemoryAPI, MemoryTarget], Awaitable[T]],
        *,
        require_user: bool = False,
    ) -> tuple[MemoryTarget, T]:
        """Resolve the memory set the options name and run ``call(api, target)`` on it.

        Args:
            require_user: first check that something is stored for the user (the user's index
                or the memory set): a mistyped ``--user`` then says so instead of listing
                nothing.

        Returns:
            The resolved target and what ``call`` returned.

        Raises:
            typer.Exit: (code 2) bad config, unknown alias or user, Redis failure, or any
                :class:`MemoryHookError` from ``call``; (code 1) ``require_user`` and nothing
                is stored for the user.
        """
        config = command_config(self.config, self.data_dir)
        try:
            target = resolve_target(
                config.settings,
                alias_lookup(config),
                tenant=self.tenant,
                user=self.user,
                model=self.model,
                conversation=self.conversation,
            )
        except MemoryHookError as exc:
            raise _fail(str(exc)) from exc

        async def job(redis: Any) -> T | MemoryNotFoundError:
            api = MemoryAPI(redis, config.settings)
            if require_user and not await redis.exists(
                target.memory.pinned, target.memory.memories
            ):
                try:
                    await api.existing_user(target.tenant, target.user)
                except MemoryNotFoundError as exc:
                    return exc
            return await call(api, target)

        result = run_on_redis(config, self.data_dir, job)
        if isinstance(result, MemoryNotFoundError):
            raise _fail(f"{result} (`litellm-memory users` lists them)", code=NO_SUCH_USER_EXIT)
        return target, result


def _option(name: str, annotation: object, default: object = inspect.Parameter.empty) -> Any:
    """A keyword-only parameter, as typer reads a command's option from its signature."""
    return inspect.Parameter(
        name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation
    )


#: the shared options of :class:`MemorySetOptions`, in the order the help lists them: the memory
#: set's before a command's own options, where it is stored after them.
_SET_OPTIONS = (
    _option("user", UserOption),
    _option("model", ModelOption, "demo"),
    _option("tenant", TenantOption, MASTER_TENANT),
    _option("conversation", ConversationOption, None),
)


_STORE_OPTIONS = (
    _option("config", ConfigOption, DEFAULT_CONFIG),
    _option("data_dir", DataDirOption, DEFAULT_DATA_DIR),
)


def _memories_command(name: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Register ``body(options: MemorySetOptions, ...)`` as ``memories <name>``.

    The command's parameters, as typer reads them: ``body``'s own arguments (its parameters
    without a default), ``--user --model --tenant --conversation``, ``body``'s own options,
    ``--config --data-dir``; its help is ``body``'s docstring. Returns ``body`` unchanged.
    """

    def register(body: Callable[..., None]) -> Callable[..., None]:
        own = [
            p.replace(kind=inspect.Parameter.KEYWORD_ONLY)
            for p in list(inspect.signature(body, eval_str=True).parameters.values())[1:]
        ]
        params = [
            *(p for p in own if p.default is p.empty),
            *_SET_OPTIONS,
            *(p for p in own if p.default is not p.empty),
            *_STORE_OPTIONS,
        ]
        shared = [p.name for p in (*_SET_OPTIONS, *_STORE_OPTIONS)]

        def command(**values: Any) -> None:
            body(MemorySetOptions(**{n: values.pop(n) for n in shared}), **values)

        command.__signature__ = inspect.Signature(params, return_annotation=None)  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in params}
        command.__doc__ = body.__doc__
        command.__name__ = command.__qualname__ = body.__name__
        memories_app.command(name)(command)
        return body

    return register


def _when(ms: int | None) -> str:
    """Epoch ms as ``YYYY-MM-DD HH:MM:SS UTC`` ("-" for none)."""
    if not ms:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _item_json(item: MemoryItem) -> dict[str, object]:
    return {"id": item.id, "text": item.text, "created_ms": item.created_ms}


def _describe(target: MemoryTarget) -> str:
    return f"user {target.user!r} of tenant {target.tenant!r}, alias {target.alias!r}"


@_memories_command("list")
def list_command(options: MemorySetOptions, as_json: JsonFlag = False) -> None:
    """List pinned and extracted memories with their ids, oldest first.

    Example: litellm-memory memories list --user alice --model demo
    """

    async def call(api: MemoryAPI, target: MemoryTarget) -> MemoryListing:
        return await api.list(target)

    target, listing = options.call(call, require_user=True)
    if as_json:
        payload = {
            "pinned": [_item_json(i) for i in listing.pinned],
            "memories": [_item_json(i) for i in listing.memories],
            "version": listing.version,
        }
        typer.echo(json.dumps(payload, ensure_ascii=False, indent=2))
        return
    table = Table(title=f"memories of {_describe(target)} (version {listing.version})")
    table.add_column("kind")
    table.add_column("id", no_wrap=True)
    table.add_column("created", no_wrap=True)
    table.add_column("text", overflow="fold")
    for kind, items in (("pinned", listing.pinned), ("extracted", listing.memories)):
        for item in items:
            table.add_row(kind, item.id, _when(item.created_ms), item.text)
    console.print(table)
    console.print(f"{len(listing.pinned)} pinned, {len(listing.memories)} extracted")


@_memories_command("pin")
def pin_command(
    options: MemorySetOptions,
    text: Annotated[str, typer.Argument(help="The memory, as the user would write it.")],
) -> None:
    """Pin a memory: the model sees it in every chat and never changes it.

    Example: litellm-memory memories pin "My cat is called Miso." --user alice
    """

    async def call(api: MemoryAPI, target: MemoryTarget) -> MemoryItem:
        return await api.pin(target, text)

    target, item = options.call(call)
    console.print(f"pinned {item.id} for {_describe(target)}")


@_memories_command("edit")
def edit_command(
    options: MemorySetOptions,
    item_id: Annotated[
        str, typer.Argument(metavar="ID", help="A pinned or extracted memory's id.")
    ],
    text: Annotated[str, typer.Argument(help="The new text.")],
) -> None:
    """Replace the text of a memory (ids: `memories list`). A pinned memory keeps its id; an
    extracted one is corrected: the new text is pinned (a new id) and the extracted memory
    deleted (not extracted again), as the inspector's Edit does.

    Example: litellm-memory memories edit 1718000000000-a1b2c3 "My cat is Mochi." --user alice
    """

    async def call(api: MemoryAPI, target: MemoryTarget) -> tuple[str, MemoryItem]:
        if any(m.id == item_id for m in (await api.list(target)).memories):
            return "extracted", await api.correct_extracted(target, item_id, text)
        return "pinned", await api.edit(target, item_id, text)

    target, (kind, item) = options.call(call)
    if kind == "pinned":
        console.print(f"edited {item.id} for {_describe(target)}")
    else:
        console.print(
            f"corrected extracted memory {item_id} of {_describe(target)}: pinned as {item.id}, "
            "the extracted one deleted"
        )


@_memories_command("delete")
def delete_command(
    options: MemorySetOptions,
    item_id: Annotated[
        str, typer.Argument(metavar="ID", help="A pinned or extracted memory's id.")
    ],
) -> None:
    """Delete a memory: a pinned one, else an extracted one (which is then not extracted again).

    Example: litellm-memory memories delete 1718000000000-a1b2c3 --user alice
    """

    async def call(api: MemoryAPI, target: MemoryTarget) -> str:
        try:
            await api.delete_pinned(target, item_id)
            return "pinned"
        except MemoryNotFoundError:
            pass
        try:
            await api.delete_memory(target, item_id)
        except MemoryNotFoundError as exc:
            raise MemoryNotFoundError(f"no memory {item_id!r} (pinned or extracted)") from exc
        return "extracted"

    target, kind = options.call(call)
    console.print(f"deleted {kind} memory {item_id} of {_describe(target)}")


@_memories_command("flush")
def flush_command(options: MemorySetOptions) -> None:
    """Make the conversation due for extraction now (a worker picks it up at its next poll).

    Example: litellm-memory memories flush --user alice --conversation chat-7
    """

    async def call(api: MemoryAPI, target: MemoryTarget) -> int:
        return await api.flush(target)

    target, due_ms = options.call(call)
    console.print(f"{target.conversation.ref} is due for extraction since {_when(due_ms)}")


def register(app: typer.Typer) -> None:
    """Add the ``memories`` group to ``app`` (nothing when it is there)."""
    if "memories" not in {g.name for g in app.registered_groups}:
        app.add_typer(memories_app, name="memories")


__all__ = ["MemorySetOptions", "memories_app", "register"]

# ``memories history`` and ``memories restore`` live in their own module, which registers them on
# ``memories_app`` through :func:`_memories_command` (defined above) when imported here.
from litellm_memory_hook.tools import cli_history as _cli_history  # noqa: E402, F401
