"""Starting real processes for end-to-end tests: the stand-in model and a LiteLLM proxy."""

from __future__ import annotations

import contextlib
import copy
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx
import openai
import redis
import yaml

from litellm_memory_hook.core.models import stored_text
from litellm_memory_hook.extraction.prompt import is_extraction_call
from litellm_memory_hook.tools.processes import (
    PROXY_ENV,
    PROXY_START_S,
    STANDIN_START_S,
    free_port,
    proxy_command,
    spawn,
    standin_and_proxy,
    standin_command,
    terminate_all,
    wait_http,
)

from .conftest import real_redis_url

REPO = Path(__file__).resolve().parents[1]
MASTER_KEY = "sk-memory-demo"

__all__ = [
    "MASTER_KEY",
    "REPO",
    "Running",
    "chat_calls",
    "derived_config",
    "free_port",
    "stack",
    "start_proxy",
    "start_standin",
    "stop",
    "wait_http",
]


def chat_calls(bodies: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The chat request bodies among ``bodies`` (the stand-in's ``/_standin/requests``
    records), in their order: the background extraction calls
    (:func:`litellm_memory_hook.extraction.prompt.is_extraction_call`) are left out."""
    return [body for body in bodies if not is_extraction_call(body.get("messages"))]


def start_standin(port: int, log: Path) -> subprocess.Popen[bytes]:
    """The package's stand-in model on ``port``; returns once it answers."""
    process = spawn(standin_command(port), log, cwd=REPO)
    wait_http(f"http://127.0.0.1:{port}/v1/models", process, STANDIN_START_S, log)
    return process


def derived_config(
    path: Path,
    *,
    standin_port: int,
    prefix: str,
    extra_models: list[dict[str, Any]] | None = None,
    extra: dict[str, Any] | None = None,
    memory: dict[str, Any] | None = None,
    general: dict[str, Any] | None = None,
) -> Path:
    """Write the package's config.yaml to ``path`` with changes; returns ``path``.

    Args:
        standin_port: every alias with an ``api_base`` (also in ``extra_models``) points at the
            stand-in on this port (``/v1``; the root for an ``anthropic/`` model).
        prefix: the hook's ``key_prefix``.
        extra_models: aliases added to ``model_list``.
        extra: top-level sections that replace the package's (e.g. ``router_settings``).
        memory: settings merged into ``callback_settings.memory``.
        general: settings merged into ``general_settings``.
    """
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    config["model_list"].extend(copy.deepcopy(extra_models or []))
    for entry in config["model_list"]:
        params = entry["litellm_params"]
        if "api_base" in params:
            # an anthropic/ model's base is the root: LiteLLM adds /v1/messages itself
            root = str(params.get("model", "")).startswith("anthropic/")
            params["api_base"] = f"http://127.0.0.1:{standin_port}" + ("" if root else "/v1")
    config["callback_settings"]["memory"]["key_prefix"] = prefix
    config.update(extra or {})
    config["callback_settings"]["memory"].update(memory or {})
    config["general_settings"].update(general or {})
    path.write_text(yaml.safe_dump(config, allow_unicode=True))
    return path


def start_proxy(config: Path, port: int, log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """A real LiteLLM proxy process with ``config`` and ``env`` added to this environment;
    returns once it answers."""
    process = spawn(
        proxy_command(config, port, "127.0.0.1"),
        log,
        cwd=config.parent,
        env={**os.environ, **PROXY_ENV, **env},
    )
    wait_http(f"http://127.0.0.1:{port}/health/liveliness", process, PROXY_START_S, log)
    return process


#: runs the ``litellm-memory`` CLI with the memory commands registered (``worker`` included)
_CLI_SCRIPT = (
    "from litellm_memory_hook.tools import cli\n"
    "from litellm_memory_hook.tools.cli_memory import register\n"
    "register(cli.app)\n"
    "cli.app()\n"
)


def start_worker(config: Path, cwd: Path) -> tuple[subprocess.Popen[str], str]:
    """A real ``litellm-memory worker --config CONFIG`` process, returned once it says it runs
    (within 60 s), with what it printed until then; killed when it does not."""
    process = subprocess.Popen(
        [sys.executable, "-c", _CLI_SCRIPT, "worker", "--config", str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=cwd,
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "COLUMNS": "200"},
    )
    assert process.stdout is not None
    seen = ""
    started = time.monotonic()
    while "Ctrl-C stops" not in seen and time.monotonic() - started < 60:
        line = process.stdout.readline()
        if not line:
            break
        seen += line
    if "Ctrl-C stops" not in seen:
        process.kill()
        process.wait()
        raise AssertionError(f"the worker did not start: {seen}")
    return process, seen


def stop(process: subprocess.Popen[bytes]) -> None:
    """Terminate a process and wait for it (killed after 15 s)."""
    terminate_all([process])


@dataclass
class Running:
    """A running stand-in model and proxy of :func:`stack`, with clients. Test modules
    subclass it (methods only) and pass the subclass as ``stack(kind=...)``."""

    folder: Path
    #: the hook's key prefix (every key the proxy writes starts with it and ``:``).
    prefix: str
    #: the proxy's URL, ``http://127.0.0.1:<port>`` (the OpenAI base URL adds ``/v1``).
    proxy: str
    #: a client of the stand-in's root (``/_standin/...`` control routes), timeout 30 s.
    standin: httpx.Client
    #: a plain client (no base URL), timeout 60 s.
    http: httpx.Client
    #: a sync client (``decode_responses``) of the proxy's memory Redis (``keys`` of
    #: :func:`stack`): ``redis.Redis``, a ``RedisCluster``, or ``None``.
    redis: Any
    #: the proxy's log.
    log: Path

    def openai(self, key: str = MASTER_KEY) -> openai.OpenAI:
        """An openai client of the proxy with ``key`` (no retries, 60 s timeout)."""
        return openai.OpenAI(base_url=f"{self.proxy}/v1", api_key=key, max_retries=0, timeout=60)

    def chat_calls(self) -> list[dict[str, Any]]:
        """The chat request bodies the stand-in received, oldest first (extraction calls left
        out: :func:`chat_calls`)."""
        return chat_calls(self.standin.get("/_standin/requests").json())

    def script(self, *replies: Any) -> None:
        """Queue the stand-in's replies to the next chat calls."""
        self.standin.post("/_standin/replies", json=list(replies)).raise_for_status()

    def turns(self, user: str, conversation: str = "demo") -> list[dict[str, Any]]:
        """Stored turns of a conversation of the master tenant, oldest first, each with its
        ``text`` (which the store leaves out when it is ``msg``'s content)."""
        key = f"{self.prefix}:{{master:{user}}}:c:{conversation}:turns"
        turns = [json.loads(m) for m in self.redis.zrange(key, 0, -1)]
        return [{**turn, "text": stored_text(turn)} for turn in turns]


RunningT = TypeVar("RunningT", bound=Running)


@contextlib.contextmanager
def stack(
    folder: Path,
    *,
    stem: str,
    kind: type[RunningT] = Running,  # type: ignore[assignment]
    extra_models: list[dict[str, Any]] | None = None,
    extra: dict[str, Any] | None = None,
    memory: dict[str, Any] | None = None,
    general: dict[str, Any] | None = None,
    redis_env: dict[str, str] | None = None,
    keys: Any = None,
) -> Iterator[RunningT]:
    """The stand-in model and a LiteLLM proxy with :func:`derived_config` (written to
    ``folder/config.yaml``; ``extra_models``, ``extra``, ``memory`` and ``general`` as there),
    on free ports, with the key prefix ``stem`` plus 8 hex digits; yields a ``kind``.

    Args:
        redis_env: the proxy's memory Redis settings (environment variables); default
            ``REDIS_URL`` = the tests' real Redis (``real_redis_url()``).
        keys: a sync client (``decode_responses``) of that Redis; default with no
            ``redis_env`` a ``redis.Redis`` of the tests' Redis, else none (``Running.redis``
            is ``None`` and no keys are deleted). The stack closes it.

    On exit the processes are stopped and, with a client, every key of the prefix deleted.

    Raises:
        RuntimeError: a process did not start (the message ends with its log).
    """
    standin_port, proxy_port = free_port(), free_port()
    prefix = stem + uuid.uuid4().hex[:8]
    config = derived_config(
        folder / "config.yaml",
        standin_port=standin_port,
        prefix=prefix,
        extra_models=extra_models,
        extra=extra,
        memory=memory,
        general=general,
    )
    if redis_env is None:
        redis_env = {"REDIS_URL": real_redis_url()}
        keys = keys or redis.Redis.from_url(real_redis_url(), decode_responses=True)
    try:
        with (
            standin_and_proxy(
                config,
                folder,
                standin_port=standin_port,
                proxy_port=proxy_port,
                proxy_env=redis_env,
            ) as started,
            httpx.Client(base_url=started.standin_url, timeout=30) as control,
            httpx.Client(timeout=60) as http,
        ):
            yield kind(folder, prefix, started.proxy_url, control, http, keys, started.proxy_log)
    finally:
        if keys is not None:
            for key in keys.scan_iter(match=f"{prefix}:*"):
                keys.delete(key)
            keys.close()
