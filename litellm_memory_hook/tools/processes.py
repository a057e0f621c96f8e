"""The child processes ``serve`` runs (the stand-in model, the LiteLLM proxy) and waiting for them.

Shared by the CLI, the benchmarks and the end-to-end tests, so all start exactly the same
commands (:mod:`.stack` starts both on free loopback ports for the tests and benchmarks).
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import httpx

#: hosts that mean "every interface": reach such a server through the loopback address.
ANY_HOSTS = {"0.0.0.0": "127.0.0.1", "": "127.0.0.1", "::": "::1"}


def standin_command(port: int) -> list[str]:
    """The command line of the package's stand-in model on ``port``."""
    return [sys.executable, "-m", "litellm_memory_hook", "standin", "--port", str(port)]


def worker_command(config: Path) -> list[str]:
    """The command line of a standalone extraction worker (``litellm-memory worker``) reading
    the memory settings of the proxy config ``config``."""
    return [sys.executable, "-m", "litellm_memory_hook", "worker", "--config", str(config)]


def proxy_command(config: Path, port: int, host: str) -> list[str]:
    """The command line of a LiteLLM proxy with ``config`` (the ``litellm`` CLI of this Python;
    :func:`watch_parent` first, which does nothing unless :data:`PARENT_ENV` is set)."""
    return [
        sys.executable,
        "-c",
        "from litellm_memory_hook.tools.processes import watch_parent; watch_parent(); "
        "from litellm.proxy.proxy_cli import run_server; run_server()",
        "--config",
        str(config),
        "--port",
        str(port),
        "--host",
        host,
    ]


def free_port() -> int:
    """A TCP port that was free a moment ago on 127.0.0.1 (another process may take it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def spawn(
    command: Sequence[str], log: Path, *, cwd: Path, env: Mapping[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """Start ``command`` in ``cwd`` with stdout and stderr written to ``log`` (truncated first).

    Args:
        command: the command line.
        log: the log file; the child keeps writing to it after this returns.
        cwd: the child's working directory.
        env: the child's whole environment (``None``: this process's).

    Raises:
        OSError: the log cannot be opened or the command cannot be started.
    """
    with log.open("wb") as handle:
        return subprocess.Popen(
            list(command),
            stdout=handle,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=None if env is None else dict(env),
        )


def wait_http(
    url: str, process: subprocess.Popen[bytes], timeout_s: float, log: Path | None = None
) -> None:
    """Wait until ``url`` answers with any HTTP status (polled every 0.3 s).

    Raises:
        RuntimeError: ``process`` exited first (the message ends with the last 4,000 characters
            of ``log`` when given), or ``timeout_s`` seconds passed.
    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            text = log.read_text(errors="replace")[-4000:] if log and log.exists() else ""
            raise RuntimeError(
                f"process exited with {process.returncode} before {url} answered:\n{text}"
            )
        try:
            httpx.get(url, timeout=2)
            return
        except httpx.HTTPError:
            time.sleep(0.3)
    raise RuntimeError(f"{url} did not answer within {timeout_s:.0f} s")


def port_taken(host: str, port: int) -> str | None:
    """Why ``host:port`` cannot be listened on (``None``: it is free).

    Tries to bind it as a server would (with ``SO_REUSEADDR``, so a port in TIME_WAIT after a
    previous run counts as free, but one another process listens on does not).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return "already in use"
            return exc.strerror or str(exc)
    return None


def local_url(host: str, port: int) -> str:
    """``http://host:port`` as a client on this machine reaches a server bound to ``host``."""
    target = ANY_HOSTS.get(host, host)
    if ":" in target:
        target = f"[{target}]"
    return f"http://{target}:{port}"


def busy_port_message(ports: Sequence[tuple[str, str, int, str]]) -> str | None:
    """Why ``serve`` cannot start: the first of ``(name, host, port, option)`` that is taken,
    as one sentence naming the option to change; ``None`` when all are free (port 0: unused)."""
    for name, host, port, option in ports:
        if not port:
            continue
        reason = port_taken(host, port)
        if reason is not None:
            return (
                f"{name} port {host}:{port} is {reason}: stop what listens there or pick "
                f"another with {option} (litellm-memory doctor lists the ports)"
            )
    return None


def terminate_all(processes: Sequence[subprocess.Popen[bytes]], timeout_s: float = 15.0) -> None:
    """SIGTERM every process still running, then wait for each; kill those still running after
    ``timeout_s`` seconds (per process)."""
    for process in processes:
        if process.poll() is None:
            process.terminate()
    for process in processes:
        try:
            process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


#: what every proxy started here gets in its environment: LiteLLM's bundled model cost map (no
#: download at start).
PROXY_ENV: Mapping[str, str] = {"LITELLM_LOCAL_MODEL_COST_MAP": "True"}
#: seconds the stand-in and the proxy may take to answer after their start.
STANDIN_START_S, PROXY_START_S = 60.0, 180.0


#: the copy of the config ``serve`` writes in its data folder when the stand-in's port moves.
SERVE_CONFIG = "serve-config.yaml"
#: the stand-in's address in the package's config.yaml.
DEFAULT_STANDIN_BASE = "http://127.0.0.1:4010/v1"


def config_for_standin(config: Path, standin_port: int, folder: Path) -> Path:
    """The config the proxy runs with: ``config`` itself, or, when the stand-in runs on another
    port than 4010, a copy in ``folder`` (``serve-config.yaml``) whose aliases that point at the
    default stand-in address (``http://127.0.0.1:4010/v1``, or its root for an ``anthropic/``
    alias) point at ``standin_port`` instead (so ``serve --standin-port`` reaches the ``demo``
    alias). The callback path in the copy resolves to the installed package.
    """
    import yaml

    if standin_port in (0, 4010):
        return config
    loaded = yaml.safe_load(config.read_text(encoding="utf-8"))
    changed = False
    root = DEFAULT_STANDIN_BASE.removesuffix("/v1")
    for entry in (loaded or {}).get("model_list") or ():
        params = entry.get("litellm_params") if isinstance(entry, dict) else None
        base = str(params.get("api_base", "")).rstrip("/") if isinstance(params, dict) else ""
        if isinstance(params, dict) and base in (DEFAULT_STANDIN_BASE, root):
            # an anthropic/ alias names the root (LiteLLM adds /v1/messages), the others /v1
            params["api_base"] = f"http://127.0.0.1:{standin_port}" + base.removeprefix(root)
            changed = True
    if not changed:
        return config
    folder.mkdir(parents=True, exist_ok=True)
    derived = folder / SERVE_CONFIG
    derived.write_text(yaml.safe_dump(loaded, allow_unicode=True, sort_keys=False))
    return derived


# -- children that end with their parent ----------------------------------------------------------

#: Linux's ``prctl`` option that sends the child a signal when its parent dies.
PR_SET_PDEATHSIG = 1
#: where prctl is missing: the parent's pid, given to a child that runs :func:`watch_parent`.
PARENT_ENV = "MEMORY_HOOK_PARENT_PID"  # not LITELLM_MEMORY_*: settings refuse unknown ones
#: how often :func:`watch_parent` looks whether its parent is gone (s).
WATCH_PARENT_S = 1.0


def _prctl() -> Callable[..., int] | None:
    """libc's ``prctl`` (Linux), else ``None``."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def die_with_parent() -> tuple[Callable[[], None] | None, dict[str, str]]:
    """What makes a child end (SIGTERM: it shuts down cleanly) when this process dies, even by
    ``kill -9``: ``(preexec_fn, extra environment)`` for :class:`subprocess.Popen`.

    On Linux, ``prctl(PR_SET_PDEATHSIG, SIGTERM)`` in the child before it runs (and SIGTERM at
    once should this process have died before that). Elsewhere, :data:`PARENT_ENV` names this
    process, and a child that calls :func:`watch_parent` (the proxy of :func:`proxy_command`,
    the stand-in of :func:`standin_command`: ``litellm-memory`` calls it) ends itself.
    """
    prctl = _prctl()
    if prctl is None:
        return None, {PARENT_ENV: str(os.getpid())}
    parent = os.getpid()

    def preexec() -> None:  # runs in the child, between fork and exec
        prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGTERM)

    return preexec, {}


def watch_parent() -> None:
    """When :data:`PARENT_ENV` names this process's parent (:func:`die_with_parent` without
    prctl), SIGTERM this process once that parent is gone (checked every
    :data:`WATCH_PARENT_S` s by a daemon thread); nothing when it is unset. The variable is
    taken out of the environment, so this process's own children do not watch it."""
    value = os.environ.pop(PARENT_ENV, "")
    if not value.isdigit():
        return
    parent = int(value)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(WATCH_PARENT_S)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="watch-parent", daemon=True).start()


def popen_with_parent(command: Sequence[str], env: Mapping[str, str]) -> subprocess.Popen[bytes]:
    """:class:`subprocess.Popen` of ``command`` with ``env``, ending with this process
    (:func:`die_with_parent`)."""
    preexec, extra = die_with_parent()
    return subprocess.Popen(list(command), env={**env, **extra}, preexec_fn=preexec)


# -- what a running serve records in its data folder ----------------------------------------------

#: the file ``serve`` writes in its data folder once its children run.
SERVE_RECORD = "serve.json"


@dataclass(frozen=True)
class ServeRecord:
    """What ``serve`` wrote in its data folder (:data:`SERVE_RECORD`): its pid, the ports, the
    config the proxy runs (absolute) and its children's pids by name (``proxy``, ``stand-in``).
    Written when ``serve`` holds the folder's lock (its embedded Redis), left after it stops."""

    pid: int
    host: str
    port: int
    standin_port: int
    config: str
    children: dict[str, int] = field(default_factory=dict)

    @property
    def proxy_url(self) -> str:
        """The proxy's OpenAI base URL, as a client on this machine reaches it (``.../v1``)."""
        return local_url(self.host, self.port) + "/v1"

    def ports(self) -> dict[str, tuple[str, int]]:
        """The child name -> ``(host, port)`` it listens on (no stand-in: port 0)."""
        found = {"proxy": (self.host, self.port)}
        if self.standin_port:
            found["stand-in"] = ("127.0.0.1", self.standin_port)
        return found

    def write(self, folder: Path) -> None:
        """Write the record into ``folder`` (replacing it at once)."""
        path = folder / SERVE_RECORD
        temporary = path.with_suffix(".tmp")
        temporary.write_text(json.dumps(asdict(self)) + "\n", encoding="utf-8")
        temporary.replace(path)

    @classmethod
    def read(cls, folder: Path) -> ServeRecord | None:
        """The record in ``folder``, ``None`` when there is none or it cannot be read."""
        try:
            data = json.loads((folder / SERVE_RECORD).read_text(encoding="utf-8"))
            children = {str(k): int(v) for k, v in dict(data.get("children") or {}).items()}
            return cls(
                int(data["pid"]),
                str(data["host"]),
                int(data["port"]),
                int(data["standin_port"]),
                str(data["config"]),
                children,
            )
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None


def running_serve(folder: Path) -> ServeRecord | None:
    """The record of the ``serve`` running on ``folder`` now (it holds the folder's lock and
    wrote the record), else ``None``."""
    from litellm_memory_hook.store.embedded import serve_lock_holder

    holder = serve_lock_holder(folder)
    record = ServeRecord.read(folder) if holder else None
    return record if record is not None and record.pid == holder else None


def process_alive(pid: int) -> bool:
    """Whether a process ``pid`` runs (a zombie counts as gone, where ``/proc`` says so)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[:1] != ["Z"]
