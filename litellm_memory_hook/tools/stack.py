"""The stand-in model and a LiteLLM proxy on free ports, writing to a Redis under a key prefix of
their own: what the end-to-end tests and the benchmarks run against (:func:`stack`).

The proxy's config is the caller's (:func:`stack_config` derives one from a config such as the
package's ``config.yaml``: every alias on the stand-in, the key prefix, memory settings); both
processes run in the caller's folder with their logs there; on exit both are stopped and every
key under the prefix is deleted. ``serve`` starts the same two commands
(:func:`~.processes.standin_command`, :func:`~.processes.proxy_command`) for a user, with its own
logs, waits and lines.
"""

from __future__ import annotations

import contextlib
import copy
import os
import subprocess
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, cast

import httpx
import openai
import yaml
from redis.exceptions import RedisError

from litellm_memory_hook.extraction.prompt import is_extraction_call
from litellm_memory_hook.tools.processes import (
    PROXY_ENV,
    PROXY_START_S,
    STANDIN_START_S,
    free_port,
    proxy_command,
    spawn,
    standin_command,
    terminate_all,
    wait_http,
)


@dataclass(frozen=True)
class StandinAndProxy:
    """A running stand-in model and LiteLLM proxy (:func:`standin_and_proxy`)."""

    standin: subprocess.Popen[bytes]
    proxy: subprocess.Popen[bytes]
    #: ``http://127.0.0.1:<port>``, no path (the OpenAI base URLs add ``/v1``).
    standin_url: str
    proxy_url: str
    standin_log: Path
    proxy_log: Path


@contextlib.contextmanager
def standin_and_proxy(
    config: Path,
    folder: Path,
    *,
    standin_port: int,
    proxy_port: int,
    env: Mapping[str, str] | None = None,
    standin_env: Mapping[str, str] | None = None,
    proxy_env: Mapping[str, str] | None = None,
    proxy_args: Sequence[str] = (),
    stop_timeout_s: float = 15.0,
) -> Iterator[StandinAndProxy]:
    """The stand-in model on ``standin_port`` and a LiteLLM proxy with ``config`` on
    ``proxy_port`` (both on 127.0.0.1), started together; once both answer, yields them; on exit
    (also on an error while starting) stops both (:func:`~.processes.terminate_all`).

    ``config`` must already point its aliases at the stand-in's port (pick both ports with
    :func:`~.processes.free_port` first). Both run in ``folder`` and log to
    ``folder/standin.log`` and ``folder/proxy.log``.

    Args:
        env: the environment both start from (``None``: this process's).
        standin_env: added to ``env`` for the stand-in (e.g. ``STANDIN_MODE``).
        proxy_env: added to ``env`` and :data:`~.processes.PROXY_ENV` for the proxy (e.g.
            ``REDIS_URL``).
        proxy_args: added to the proxy's command line (e.g. ``--num_workers 2``).
        stop_timeout_s: seconds each may take to stop on SIGTERM before it is killed.

    Raises:
        RuntimeError: a process exited before it answered, or did not answer within
            :data:`~.processes.STANDIN_START_S` / :data:`~.processes.PROXY_START_S` seconds
            (:func:`~.processes.wait_http`; the message ends with its log).
        OSError: a process could not be started.
    """
    base = dict(os.environ if env is None else env)
    standin_log, proxy_log = folder / "standin.log", folder / "proxy.log"
    standin_url, proxy_url = f"http://127.0.0.1:{standin_port}", f"http://127.0.0.1:{proxy_port}"
    processes: list[subprocess.Popen[bytes]] = []
    try:
        processes.append(
            spawn(
                standin_command(standin_port),
                standin_log,
                cwd=folder,
                env={**base, **(standin_env or {})},
            )
        )
        processes.append(
            spawn(
                [*proxy_command(config, proxy_port, "127.0.0.1"), *proxy_args],
                proxy_log,
                cwd=folder,
                env={**base, **PROXY_ENV, **(proxy_env or {})},
            )
        )
        # the proxy does not call the stand-in before a request: both start at once
        wait_http(f"{standin_url}/v1/models", processes[0], STANDIN_START_S, standin_log)
        wait_http(f"{proxy_url}/health/liveliness", processes[1], PROXY_START_S, proxy_log)
        yield StandinAndProxy(
            processes[0], processes[1], standin_url, proxy_url, standin_log, proxy_log
        )
    finally:
        terminate_all(processes, stop_timeout_s)


# -- the proxy's config ------------------------------------------------------------------------


def point_at_standin(config: dict[str, Any], standin_port: int) -> None:
    """Point every alias of ``config`` that has an ``api_base`` at the stand-in on
    ``standin_port``: its ``/v1``, or its root for an ``anthropic/`` model (LiteLLM adds
    ``/v1/messages`` itself)."""
    for entry in config.get("model_list") or ():
        params = entry.get("litellm_params") if isinstance(entry, dict) else None
        if isinstance(params, dict) and "api_base" in params:
            root = str(params.get("model", "")).startswith("anthropic/")
            params["api_base"] = f"http://127.0.0.1:{standin_port}" + ("" if root else "/v1")


def stack_config(
    source: Mapping[str, Any],
    *,
    standin_port: int,
    prefix: str | None = None,
    extra_models: Iterable[Mapping[str, Any]] = (),
    extra: Mapping[str, Any] | None = None,
    memory: Mapping[str, Any] | None = None,
    general: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A copy of the proxy config ``source`` for a stack, in this order: ``extra_models`` added
    to ``model_list``, every alias on the stand-in (:func:`point_at_standin`, the added ones
    too), ``prefix`` as the hook's ``storage.key_prefix``, the top-level sections of ``extra``
    replacing the source's (e.g. ``router_settings``), ``memory`` merged into
    ``callback_settings.memory`` (a group key by key) and ``general`` into ``general_settings``."""
    config = copy.deepcopy(dict(source))
    config.setdefault("model_list", []).extend(copy.deepcopy(list(extra_models)))
    point_at_standin(config, standin_port)
    if prefix is not None:
        _merge(_memory_block(config), {"storage": {"key_prefix": prefix}})
    config.update(extra or {})
    if memory:
        _merge(_memory_block(config), memory)
    if general:
        config.setdefault("general_settings", {}).update(general)
    return config


def _memory_block(config: dict[str, Any]) -> dict[str, Any]:
    return cast(dict[str, Any], config.setdefault("callback_settings", {}).setdefault("memory", {}))


def _merge(block: dict[str, Any], update: Mapping[str, Any]) -> None:
    """``update`` merged into a settings block, a group (``storage: {...}``) key by key."""
    for key, value in update.items():
        if isinstance(value, Mapping) and isinstance(block.get(key), Mapping):
            block[key] = {**block[key], **value}
        else:
            block[key] = value


def write_config(config: Mapping[str, Any], path: Path) -> Path:
    """Write a proxy config as YAML (UTF-8); returns ``path``."""
    path.write_text(yaml.safe_dump(dict(config), allow_unicode=True), encoding="utf-8")
    return path


# -- the running stack -------------------------------------------------------------------------


def delete_keys(client: Any, prefix: str, batch: int = 500) -> int:
    """Delete every key under ``<prefix>:`` with a sync client (``redis.Redis`` or a
    ``RedisCluster``): one SCAN, one DEL per key, sent ``batch`` at a time. Returns how many
    were deleted."""
    deleted = 0
    keys: list[Any] = []

    def flush() -> int:
        pipe = client.pipeline(transaction=False)
        for key in keys:
            pipe.delete(key)
        found = sum(int(n) for n in pipe.execute())
        keys.clear()
        return found

    for key in client.scan_iter(match=f"{prefix}:*", count=1000):
        keys.append(key)
        if len(keys) >= batch:
            deleted += flush()
    if keys:
        deleted += flush()
    return deleted


@dataclass
class Stack:
    """A running stand-in model and LiteLLM proxy (:func:`stack`), with clients."""

    folder: Path
    #: the hook's key prefix (every key the proxy writes starts with it and ``:``).
    prefix: str
    #: the proxy's URL, ``http://127.0.0.1:<port>`` (the OpenAI base URL adds ``/v1``).
    proxy: str
    #: a client of the stand-in's root (its ``/_standin/...`` control routes).
    standin: httpx.Client
    #: a plain client (no base URL), timeout 60 s.
    http: httpx.Client
    #: a sync client (``decode_responses``) of the proxy's memory Redis, or ``None``.
    redis: Any
    #: the proxy's log.
    log: Path
    #: the two processes, their URLs and logs.
    processes: StandinAndProxy
    #: the config the proxy runs (as written to ``folder/config.yaml``).
    config: dict[str, Any] = field(default_factory=dict)

    @property
    def master_key(self) -> str:
        """The config's ``general_settings.master_key`` ("" when it has none)."""
        return str((self.config.get("general_settings") or {}).get("master_key") or "")

    @property
    def standin_url(self) -> str:
        """The stand-in's ``http://127.0.0.1:<port>`` (the OpenAI base URL adds ``/v1``)."""
        return self.processes.standin_url

    def openai(self, key: str | None = None) -> openai.OpenAI:
        """An openai client of the proxy with ``key`` (default: the master key; no retries,
        60 s timeout)."""
        return openai.OpenAI(
            base_url=f"{self.proxy}/v1", api_key=key or self.master_key, max_retries=0, timeout=60
        )

    def chat_calls(self) -> list[dict[str, Any]]:
        """The chat request bodies the stand-in received, oldest first (extraction calls left
        out: :func:`chat_calls`)."""
        return chat_calls(self.standin.get("/_standin/requests").json())

    def script(self, *replies: Any) -> None:
        """Queue the stand-in's replies to the next chat calls."""
        self.standin.post("/_standin/replies", json=list(replies)).raise_for_status()


def chat_calls(bodies: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The chat request bodies among ``bodies`` (the stand-in's ``/_standin/requests``
    records), in their order: the background extraction calls
    (:func:`litellm_memory_hook.extraction.prompt.is_extraction_call`) are left out."""
    return [body for body in bodies if not is_extraction_call(body.get("messages"))]


StackT = TypeVar("StackT", bound=Stack)


@contextlib.contextmanager
def stack(
    folder: Path,
    config: Callable[[int], Mapping[str, Any]],
    *,
    prefix: str,
    redis_env: Mapping[str, str],
    keys: Any = None,
    kind: type[StackT] = Stack,  # type: ignore[assignment]
    env: Mapping[str, str] | None = None,
    standin_env: Mapping[str, str] | None = None,
    proxy_args: Sequence[str] = (),
    control_timeout_s: float = 30.0,
) -> Iterator[StackT]:
    """The stand-in model and a LiteLLM proxy on free ports (:func:`standin_and_proxy`), the
    proxy with ``config(standin_port)`` written to ``folder/config.yaml``; yields a ``kind``.

    Args:
        prefix: the key prefix the config gives the hook (its keys are deleted after).
        redis_env: the proxy's memory Redis settings (environment variables, e.g. ``REDIS_URL``).
        keys: a sync client (``decode_responses``) of that Redis, or ``None`` (no keys are
            deleted); the stack deletes the prefix's keys with it after and closes it.
        env: the environment both processes start from (``None``: this process's).
        standin_env: added to it for the stand-in (e.g. ``STANDIN_MODE``).
        proxy_args: added to the proxy's command line.
        control_timeout_s: the timeout of the stand-in's control client.

    Raises:
        RuntimeError: a process did not start (the message ends with its log).
        redis.RedisError: the keys could not be deleted after a run that went well (after a
            failed one the first error is raised).
    """
    standin_port, proxy_port = free_port(), free_port()
    written = dict(config(standin_port))
    path = write_config(written, folder / "config.yaml")
    ended = False
    try:
        with (
            standin_and_proxy(
                path,
                folder,
                standin_port=standin_port,
                proxy_port=proxy_port,
                env=env,
                standin_env=standin_env,
                proxy_env=redis_env,
                proxy_args=proxy_args,
            ) as started,
            httpx.Client(base_url=started.standin_url, timeout=control_timeout_s) as control,
            httpx.Client(timeout=60) as http,
        ):
            yield kind(
                folder,
                prefix,
                started.proxy_url,
                control,
                http,
                keys,
                started.proxy_log,
                started,
                written,
            )
        ended = True
    finally:
        if keys is not None:
            try:
                delete_keys(keys, prefix)
            except RedisError:
                if ended:
                    raise
            finally:
                keys.close()


__all__ = [
    "Stack",
    "StandinAndProxy",
    "chat_calls",
    "delete_keys",
    "point_at_standin",
    "stack",
    "stack_config",
    "standin_and_proxy",
    "write_config",
]
