"""How a command reaches its data: the config it reads (``--config``, else the ``serve`` of
``--data-dir``), the Redis it uses (the configured one, else the embedded one of ``--data-dir``)
and the user, conversation and memory set its options name.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import typer
from redis.exceptions import RedisError
from typer._click import core as click_core
from typer._click.globals import get_current_context

from litellm_memory_hook.engine.identity import Identity
from litellm_memory_hook.errors import MemoryHookError, StoreError
from litellm_memory_hook.memory_api import MemoryTarget, resolve_target
from litellm_memory_hook.settings import (
    AliasMemoryConfig,
    MemorySettings,
    load_settings,
    parse_alias_config,
)
from litellm_memory_hook.store.keys import (
    ConversationKeys,
    conversation_scope,
    normalize_user_id,
    user_scope,
)
from litellm_memory_hook.tools.cli_common import err_console
from litellm_memory_hook.tools.cli_errors import debug_enabled, fail
from litellm_memory_hook.tools.proxyconfig import ProxyConfig

T = TypeVar("T")


CLI_REDIS_TIMEOUT_S = 10.0


def load_config(path: Path) -> ProxyConfig:
    """Read config.yaml, or exit with one line."""
    try:
        return ProxyConfig.load(path)
    except MemoryHookError as exc:
        raise fail(str(exc)) from exc


def option_given(name: str) -> bool:
    """Whether the running command's option ``name`` (its parameter name, e.g. ``config``) was
    given on the command line (or from the environment), not left at its default; ``True``
    outside a command (a caller's value counts as given)."""
    ctx = get_current_context(silent=True)
    if ctx is None:
        return True
    source = ctx.get_parameter_source(name)
    return source is not None and source is not click_core.ParameterSource.DEFAULT


def serve_config(data_dir: Path) -> Path | None:
    """The config a ``serve`` on ``data_dir`` runs (or ran last): the one its record names
    (:class:`litellm_memory_hook.tools.processes.ServeRecord`), else the folder's
    ``serve-config.yaml``; ``None`` when neither is there."""
    from litellm_memory_hook.tools.processes import SERVE_CONFIG, ServeRecord

    record = ServeRecord.read(data_dir)
    if record is not None and Path(record.config).is_file():
        return Path(record.config)
    derived = data_dir / SERVE_CONFIG
    return derived if derived.is_file() else None


def command_config(config: Path, data_dir: Path, *, optional: bool = False) -> ProxyConfig:
    """The config a command reads: ``--config`` when given (or ``config.yaml`` when it is in
    the working directory); else the config of the ``serve`` on ``--data-dir``
    (:func:`serve_config`: the command then works from any folder); else, with ``optional``
    (commands that need no alias: ``stats``), the settings of the environment alone; else exit
    with one line saying what to give.
    """
    if config.exists() or option_given("config"):
        return load_config(config)
    found = serve_config(data_dir)
    if found is not None:
        err_console.print(f"config: {found} (the serve of {data_dir}/)", style="dim")
        return load_config(found)
    where = f"no {config} in {Path.cwd()}, and {data_dir}/ holds no config of a serve"
    if optional:
        try:
            settings = load_settings()
        except MemoryHookError as exc:
            raise fail(str(exc)) from exc
        err_console.print(f"config: none ({where}): the environment's settings", style="dim")
        return ProxyConfig(path=config, raw={}, settings=settings)
    raise fail(
        f"cannot read {config}: {where}; give --config, run from the config's folder, or "
        "--data-dir of a serve"
    )


def alias_lookup(config: ProxyConfig) -> Callable[[str], AliasMemoryConfig | None]:
    """Alias name -> its memory config from config.yaml (``None``: unknown or memory off)."""

    def lookup(name: str) -> AliasMemoryConfig | None:
        return parse_alias_config(config.model_info(name))

    return lookup


def redis_url(
    settings: MemorySettings, data_dir: Path, *, quiet: bool = False, create: bool = False
) -> str:
    """The configured Redis URL; with none configured, the embedded Redis of ``data_dir`` (the
    one ``serve`` runs, attached to; started for this command when none runs, and left
    running when a ``serve`` holds the folder: that serve's Redis had stopped). Notes go to
    stderr, so stdout stays clean for JSON.

    Raises:
        EmbeddedRedisError: the embedded Redis did not start, or ``data_dir`` does not exist
            and ``create`` is false (only imports create it; other commands would read or
            write an empty store no proxy uses).
    """
    if "url" in settings.redis.model_fields_set:
        return settings.redis.url
    from litellm_memory_hook.store.embedded import serve_lock_holder, start_embedded

    embedded = start_embedded(data_dir, create=create)
    if not quiet:
        holder = serve_lock_holder(data_dir) if embedded.started else None
        if not embedded.started:
            state = "running"
        elif holder is not None:  # serve's own Redis had stopped: it stays up for that serve
            state = f"started again, left running for serve pid {holder}"
        else:
            state = "started for this command"
        err_console.print(f"embedded Redis {embedded.socket} ({state})", style="dim")
    return embedded.url


def open_redis(
    settings: MemorySettings, data_dir: Path, *, quiet: bool = False, create: bool = False
) -> Any:
    """An asyncio client of :func:`redis_url` (a Cluster client with ``redis.cluster``; with
    ``redis.sentinel_nodes``, of the master the Sentinels name, never the embedded Redis)."""
    from litellm_memory_hook.store.client import client_for_settings, redis_client

    if settings.redis.sentinel_nodes:
        return client_for_settings(settings, timeout_s=CLI_REDIS_TIMEOUT_S)
    url = redis_url(settings, data_dir, quiet=quiet, create=create)
    cluster = settings.redis.cluster and not url.startswith("unix:")
    return redis_client(url, cluster=cluster, timeout_s=CLI_REDIS_TIMEOUT_S)


def run_on_redis(
    config: ProxyConfig,
    data_dir: Path,
    job: Callable[[Any], Awaitable[T]],
    *,
    quiet: bool = False,
    create: bool = False,
) -> T:
    """Run ``job(redis)`` on a fresh client; Redis and package errors become one line, exit 2.
    ``create``: an embedded Redis folder that does not exist yet is created (imports)."""

    async def main() -> T:
        redis = open_redis(config.settings, data_dir, quiet=quiet, create=create)
        try:
            return await job(redis)
        finally:
            await redis.aclose()

    from litellm_memory_hook.store.embedded import EmbeddedRedisError

    try:
        return asyncio.run(main())
    except typer.Exit:
        raise
    except (EmbeddedRedisError, StoreError, MemoryHookError, RedisError, OSError) as exc:
        if debug_enabled():
            raise
        if isinstance(exc, EmbeddedRedisError):
            raise fail(f"embedded Redis in {data_dir}/: {exc}") from exc
        if isinstance(exc, StoreError | RedisError | OSError):
            raise fail(f"Redis ({_safe_url(config.settings, data_dir)}): {exc}") from exc
        raise fail(str(exc)) from exc


def _safe_url(settings: MemorySettings, data_dir: Path) -> str:
    if "url" not in settings.redis.model_fields_set:
        return f"embedded, {data_dir}/"
    return mask_url(settings.redis.url)


def mask_url(url: str) -> str:
    """The URL without its password."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username or ''}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def identity(
    config: ProxyConfig, model: str, user: str, conversation: str | None, tenant: str
) -> Identity:
    """The keys a chat request of ``user`` to alias ``model`` would use (``import``, ``show``),
    or exit with one line (an unknown alias, a user id that gets no memory)."""
    try:
        namespace = config.namespace(model)
    except MemoryHookError as exc:
        raise fail(str(exc)) from exc
    user_id = normalize_user_id(user)
    if user_id is None:
        raise fail(f"user id {user!r} is empty or a placeholder: such requests get no memory")
    conv = conversation or namespace
    keys = ConversationKeys.for_ids(config.settings.storage.key_prefix, tenant, user_id, conv)
    scope = (
        conversation_scope(keys.conversation)
        if config.alias(model).memory_scope == "conversation"
        else user_scope(namespace)
    )
    memory = keys.user_keys.memory_set(scope)
    return Identity(tenant, user_id, conv, namespace, keys, memory, model)


def memory_target(
    config: ProxyConfig, *, user: str, model: str, tenant: str, conversation: str | None
) -> MemoryTarget:
    """The memory API's target of ``--user``, ``--model``, ``--tenant``, ``--conversation``,
    or exit with one line."""
    try:
        return resolve_target(
            config.settings,
            alias_lookup(config),
            tenant=tenant,
            user=user,
            model=model,
            conversation=conversation,
        )
    except MemoryHookError as exc:
        raise fail(str(exc)) from exc


def who(target: MemoryTarget, conversation: str | None) -> str:
    """``user 'alice' of tenant 'master'``, or that conversation of them: what a line names."""
    who = f"user {target.user!r} of tenant {target.tenant!r}"
    return f"conversation {conversation!r} of {who}" if conversation else who


__all__ = [
    "alias_lookup",
    "command_config",
    "identity",
    "load_config",
    "mask_url",
    "memory_target",
    "open_redis",
    "option_given",
    "redis_url",
    "run_on_redis",
    "serve_config",
    "who",
]
