"""Starting real processes for end-to-end tests: the stand-in model and a LiteLLM proxy, alone or
together on the tests' Redis (:func:`stack`, over :func:`litellm_memory_hook.tools.stack.stack`,
which the benchmarks use too)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import openai
import redis
import yaml

from litellm_memory_hook.core.models import Turn
from litellm_memory_hook.tools import stack as stacks
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
from litellm_memory_hook.tools.stack import chat_calls
from tests.support.paths import REPO
from tests.support.redis_url import real_redis_url

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
    changes = {"extra_models": extra_models, "extra": extra, "memory": memory, "general": general}
    return stacks.write_config(_derived(standin_port, prefix, changes), path)


def _derived(standin_port: int, prefix: str, changes: dict[str, Any]) -> dict[str, Any]:
    """The package's config.yaml with the changes of :func:`derived_config`."""
    source = yaml.safe_load((REPO / "config.yaml").read_text())
    return stacks.stack_config(
        source,
        standin_port=standin_port,
        prefix=prefix,
        extra_models=changes["extra_models"] or (),
        extra=changes["extra"],
        memory=changes["memory"],
        general=changes["general"],
    )


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


#: runs the ``litellm-memory`` CLI (every command, ``worker`` included)
_CLI_SCRIPT = "from litellm_memory_hook.tools import cli\ncli.app()\n"


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


class Running(stacks.Stack):
    """A running stand-in model and proxy of :func:`stack`, with clients. Test modules
    subclass it (methods only) and pass the subclass as ``stack(kind=...)``."""

    def openai(self, key: str | None = MASTER_KEY) -> openai.OpenAI:
        """An openai client of the proxy with ``key`` (no retries, 60 s timeout)."""
        return super().openai(key)

    def turns(self, user: str, conversation: str = "demo") -> list[dict[str, Any]]:
        """Stored turns of a conversation of the master tenant, oldest first, each in the full
        form (:meth:`Turn.full_body`: the store writes a compact member) with its ``seq`` and
        its ``text`` (which the store leaves out when it is ``msg``'s content)."""
        key = f"{self.prefix}:{{master:{user}}}:c:{conversation}:turns"
        turns = [Turn.from_member(m) for m in self.redis.zrange(key, 0, -1)]
        return [{**t.full_body(), "seq": t.seq, "text": t.text} for t in turns]


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
    env: dict[str, str] | None = None,
    proxy_args: Sequence[str] = (),
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
        env: the environment both processes start from (default: this process's).
        proxy_args: added to the proxy's command line (e.g. ``--num_workers 2``).

    On exit the processes are stopped and, with a client, every key of the prefix deleted.

    Raises:
        RuntimeError: a process did not start (the message ends with its log).
    """
    prefix = stem + uuid.uuid4().hex[:8]
    if redis_env is None:
        redis_env = {"REDIS_URL": real_redis_url()}
        keys = keys or redis.Redis.from_url(real_redis_url(), decode_responses=True)

    changes = {"extra_models": extra_models, "extra": extra, "memory": memory, "general": general}
    with stacks.stack(
        folder,
        lambda standin_port: _derived(standin_port, prefix, changes),
        prefix=prefix,
        redis_env=redis_env,
        keys=keys,
        kind=kind,
        env=env,
        proxy_args=proxy_args,
    ) as running:
        yield running
