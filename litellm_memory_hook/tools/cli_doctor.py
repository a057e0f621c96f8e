"""``litellm-memory doctor``: is Redis reachable, which version, cluster or not, persistence
(AOF/RDB) and ``maxmemory-policy`` with recommendations (:mod:`.cli_doctor_redis`), whether an
extraction worker is alive (a warning when jobs are queued and none is), the config's
memory-enabled aliases, the LiteLLM version, whether the ports ``serve`` would take with the
same ``--host``, ``--port`` and ``--standin-port`` are free; and the configuration faults that
make ``serve`` refuse to start.
"""

from __future__ import annotations

import difflib
import importlib.metadata
import json
import re
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from litellm_memory_hook.errors import MemoryHookError
from litellm_memory_hook.settings import parse_alias_config, shadowed_env
from litellm_memory_hook.tools.cli_common import (
    DEFAULT_CONFIG,
    DEFAULT_DATA_DIR,
    MAX_PORT,
    ConfigOption,
    DataDirOption,
    out_console,
)
from litellm_memory_hook.tools.cli_connect import option_given, serve_config
from litellm_memory_hook.tools.cli_doctor_redis import (
    Check,
    configured_redis_checks,
    reachable,
    read_worker_check,
    redis_checks,
)
from litellm_memory_hook.tools.cli_errors import usage_error
from litellm_memory_hook.tools.proxyconfig import ProxyConfig

#: the LiteLLM versions this package supports, ``>=LITELLM_OLDEST,<LITELLM_BELOW`` (pyproject.toml
#: declares the same range; 1.94.0 is the first whose proxy imports a callback named in
#: config.yaml from an installed package, and tests/e2e/test_package.py runs it end to end).
LITELLM_OLDEST = "1.94.0"


LITELLM_BELOW = "2"


#: the LiteLLM version CI's main run installs (.ci/constraints.txt) and the Docker image is.
LITELLM_VERSION = "1.108.7"


def _release(version: str) -> tuple[int, ...]:
    """The release numbers of a version (``1.77.2.post1`` -> ``(1, 77, 2)``)."""
    found = re.match(r"\d+(?:\.\d+)*", version.strip())
    return tuple(int(part) for part in found.group(0).split(".")) if found else ()


def litellm_supported(version: str) -> bool:
    """Whether a LiteLLM version is in the supported range."""
    release = _release(version)
    return bool(release) and _release(LITELLM_OLDEST) <= release < _release(LITELLM_BELOW)


def _misspelt_memory(block: object) -> str | None:
    """A key of ``block`` that looks like a misspelt ``memory`` (``memroy``, ``Memory``), if
    ``memory`` itself is not there: its block would be silently ignored."""
    if not isinstance(block, dict) or "memory" in block:
        return None
    close = difflib.get_close_matches("memory", [str(k).lower() for k in block], n=1, cutoff=0.7)
    if not close:
        return None
    return next(str(k) for k in block if str(k).lower() == close[0])


def _alias_checks(config: ProxyConfig) -> list[Check]:
    """The memory-enabled aliases and the problems of their memory blocks.

    A failing check (``fail``) is a configuration that would start and then run without memory
    on every request of an alias (a bad ``model_info.memory`` block, a misspelt ``memory``
    key); :func:`config_failures` makes ``serve`` refuse it.
    """
    enabled: list[str] = []
    problems: list[Check] = []
    entries = [e for e in config.raw.get("model_list") or () if isinstance(e, dict)]
    names = {str(e.get("model_name")) for e in entries}
    misspelt = _misspelt_memory(config.raw.get("callback_settings"))
    if misspelt is not None:
        problems.append(
            Check(
                "callback_settings",
                "fail",
                f"{misspelt!r} is not 'memory': the memory settings would be ignored",
            )
        )
    for entry in entries:
        name = str(entry.get("model_name"))
        info = entry.get("model_info") or {}
        misspelt = _misspelt_memory(info)
        if misspelt is not None:
            problems.append(
                Check(
                    f"alias {name}",
                    "fail",
                    f"model_info.{misspelt} is not 'memory': the alias would run without it",
                )
            )
        try:
            alias = parse_alias_config(info)
        except MemoryHookError as exc:
            problems.append(Check(f"alias {name}", "fail", str(exc)))
            continue
        if alias is not None:
            scope = f"namespace {alias.namespace or name}, scope {alias.memory_scope}"
            enabled.append(f"{name} ({scope})")
            wanted = alias.extraction_model
            own_proxy = "base_url" not in config.settings.extraction.model_fields_set
            if wanted and wanted not in names and own_proxy:
                problems.append(
                    Check(
                        f"alias {name}",
                        "warn",
                        f"extraction_model {wanted!r} is not a model_name of this config: "
                        "its extraction jobs would fail",
                    )
                )
    if enabled:
        detail = f"{len(enabled)}: " + "; ".join(enabled)
        return [Check("memory aliases", "ok", detail), *problems]
    return [
        Check("memory aliases", "warn", "none: set model_info.memory.enabled on an alias"),
        *problems,
    ]


def _port_check(name: str, host: str, port: int, probe: str, option: str) -> Check:
    """Whether ``serve`` could take ``host:port``: ``ok`` when it is free; ``info`` when it is
    taken by what answers ``probe`` with 200, as serve's own proxy or stand-in does (a running
    serve, or the deployment doctor is checking); ``fail`` when another program holds it, since
    serve would refuse to start."""
    import httpx

    from litellm_memory_hook.tools.processes import local_url, port_taken

    reason = port_taken(host, port)
    if reason is None:
        return Check(name, "ok", f"{host}:{port} free")
    try:
        answering = httpx.get(local_url(host, port) + probe, timeout=2).status_code == 200
    except httpx.HTTPError:
        answering = False
    if answering:
        return Check(name, "info", f"{host}:{port} in use; it answers {probe} (already running?)")
    return Check(
        name,
        "fail",
        f"{host}:{port} {reason} by another program: serve would refuse to start; stop it or "
        f"pick another port with {option}",
    )


def leftover_check(data_dir: Path) -> Check | None:
    """``warn`` when no ``serve`` holds ``data_dir`` but ports its last ``serve`` recorded
    (:class:`litellm_memory_hook.tools.processes.ServeRecord`) are still taken: its proxy or
    stand-in outlived it (a ``kill -9`` of a serve older than the children's death signal, or
    what took the port since); names the children's pids still alive. ``None`` otherwise."""
    from litellm_memory_hook.store.embedded import serve_lock_holder
    from litellm_memory_hook.tools.processes import ServeRecord, port_taken, process_alive

    record = ServeRecord.read(data_dir)
    if record is None or serve_lock_holder(data_dir) is not None:
        return None
    held: list[str] = []
    pids: list[int] = []
    for name, (host, port) in record.ports().items():
        if port_taken(host, port) is None:
            continue
        pid = record.children.get(name, 0)
        if process_alive(pid):
            pids.append(pid)
            held.append(f"{name} port {host}:{port} (its {name}, pid {pid})")
        else:
            held.append(f"{name} port {host}:{port} (another process)")
    if not held:
        return None
    stop = f"kill {' '.join(map(str, pids))}" if pids else "stop what listens there"
    return Check(
        "serve leftovers",
        "warn",
        f"no serve holds {data_dir}/ (its last serve, pid {record.pid}, is gone), but its "
        f"{', '.join(held)} {'is' if len(held) == 1 else 'are'} still taken: a serve with "
        f"those ports would be refused; {stop}",
    )


def require_distinct_ports(port: int, standin_port: int) -> None:
    """Refuse, as a usage error of the running command (exit code 2), a stand-in port equal to
    the proxy port: ``serve`` starts the stand-in first, and the proxy would then fail to bind.

    Raises:
        click.UsageError: both are the same port.
    """
    if standin_port and standin_port == port:
        raise usage_error(
            f"--port and --standin-port are both {port}: the proxy and the stand-in model "
            "need a port each (--standin-port 0: no stand-in)"
        )


def config_failures(config: ProxyConfig) -> list[str]:
    """The configuration faults that would leave an alias without memory once started (the
    failing checks of :func:`_alias_checks`), one line each; ``serve`` refuses to start on
    any."""
    return [f"{c.name}: {c.detail}" for c in _alias_checks(config) if c.status == "fail"]


def doctor_checks(
    config_path: Path, data_dir: Path, host: str, port: int, standin_port: int = 4010
) -> list[Check]:
    """Every check of ``litellm-memory doctor``, in report order.

    The ports are those ``serve`` would take with the same options: the proxy's ``host:port``
    and the stand-in's ``127.0.0.1:standin_port`` (0: no stand-in, not checked); one another
    program holds fails (:func:`_port_check`).
    """
    from litellm_memory_hook.store.embedded import answers, serve_lock_holder, socket_path

    checks: list[Check] = []
    try:
        config: ProxyConfig | None = ProxyConfig.load(config_path)
        checks.append(Check("config", "ok", str(config_path)))
    except MemoryHookError as exc:
        config = None
        checks.append(Check("config", "fail", str(exc)))
    if config is not None:
        checks.extend(_alias_checks(config))
        shadowed = shadowed_env(config.raw.get("callback_settings"))
        if shadowed:
            checks.append(
                Check(
                    "environment",
                    "warn",
                    f"{', '.join(shadowed)} ignored: {config_path} sets the same key(s), and the "
                    "file wins",
                )
            )
    try:
        installed = importlib.metadata.version("litellm")
    except importlib.metadata.PackageNotFoundError:
        installed = ""
    supported = f"supported: >={LITELLM_OLDEST},<{LITELLM_BELOW}"
    if installed and litellm_supported(installed):
        checks.append(Check("litellm", "ok", f"{installed} ({supported})"))
    else:
        checks.append(
            Check(
                "litellm",
                "warn" if installed else "fail",
                f"{installed or 'not installed'}: this package is {supported}",
            )
        )
    if config is not None:
        settings = config.settings
        configured = configured_redis_checks(settings)
        if configured is not None:
            checks.extend(configured)
        else:
            sock = socket_path(data_dir)
            holder = serve_lock_holder(data_dir)
            if answers(sock):
                owner = f"serve pid {holder}" if holder else "no serve holds it"
                checks.append(Check("redis", "info", f"embedded, socket {sock} ({owner})"))
                found = redis_checks(
                    f"unix://{sock}", cluster_setting=False, prefix=settings.storage.key_prefix
                )
                checks.extend(found)
                if reachable(found):
                    checks.append(read_worker_check(f"unix://{sock}", settings))
            elif holder is not None:
                # the serve that owns the folder runs, but its Redis died (kill, OOM): its
                # proxy answers every request without memory
                checks.append(
                    Check(
                        "redis",
                        "fail",
                        f"serve (pid {holder}) holds {data_dir}/ but its embedded Redis does not "
                        f"answer on {sock}: requests go without memory (their turns wait in the "
                        "proxy's buffer); any litellm-memory command with this --data-dir "
                        "(e.g. stats) starts it again for that serve, or restart serve",
                    )
                )
            else:
                checks.append(
                    Check(
                        "redis",
                        "info",
                        f"no redis.url configured and no embedded Redis running: serve starts "
                        f"one in {data_dir}/ (socket {sock}); set REDIS_URL for your own Redis",
                    )
                )
    leftover = leftover_check(data_dir)
    if leftover is not None:
        checks.append(leftover)
    checks.append(_port_check("proxy port", host, port, "/health/liveliness", "--port"))
    if standin_port:
        checks.append(
            _port_check(
                "stand-in port",
                "127.0.0.1",
                standin_port,
                "/v1/models",
                "--standin-port (0: no stand-in)",
            )
        )
    return checks


_STYLE = {"ok": "green", "warn": "yellow", "fail": "red", "info": "cyan"}


def doctor_command(
    config: ConfigOption = DEFAULT_CONFIG,
    data_dir: DataDirOption = DEFAULT_DATA_DIR,
    port: Annotated[
        int, typer.Option(min=1, max=MAX_PORT, help="The proxy port serve would use.")
    ] = 4000,
    host: Annotated[str, typer.Option(help="The proxy host serve would use.")] = "127.0.0.1",
    standin_port: Annotated[
        int,
        typer.Option(
            min=0, max=MAX_PORT, help="The stand-in model port serve would use (0: none)."
        ),
    ] = 4010,
    as_json: Annotated[bool, typer.Option("--json", help="Print the checks as JSON.")] = False,
) -> None:
    """Check Redis, persistence, eviction policy, extraction workers, memory aliases, LiteLLM
    and ports.

    Redis: reachable, version (6.2+), cluster or not, Lua, AOF/RDB, maxmemory-policy.

    Extraction workers: how many are alive (a heartbeat in Redis); a warning when jobs are
    queued and none is (they wait until one runs).

    Ports: those serve takes with the same --host, --port and --standin-port; one that
    another program holds fails (serve would refuse to start), one that answers as serve's
    proxy or stand-in does is information (already running).

    Exit code 1 when a check fails (Redis unreachable or too old, a broken memory block, a
    taken port ...); warnings (persistence, eviction policy ...) come with a recommendation
    and leave the exit code 0.

    Example: litellm-memory doctor --config config.yaml
    """
    require_distinct_ports(port, standin_port)
    if not config.exists() and not option_given("config"):
        config = serve_config(data_dir) or config
    checks = doctor_checks(config, data_dir, host, port, standin_port)
    failed = any(c.status == "fail" for c in checks)
    if as_json:
        typer.echo(json.dumps([c.__dict__ for c in checks], ensure_ascii=False, indent=2))
    else:
        table = Table(title="litellm-memory doctor")
        table.add_column("check")
        table.add_column("status")
        table.add_column("detail", overflow="fold")
        for check in checks:
            table.add_row(check.name, Text(check.status, style=_STYLE[check.status]), check.detail)
        out_console.print(table)
        warnings = sum(1 for c in checks if c.status == "warn")
        verdict = "problems found" if failed else "ready"
        out_console.print(f"{verdict}: {warnings} warning(s)", highlight=False)
    if failed:
        raise typer.Exit(code=1)


__all__ = [
    "LITELLM_BELOW",
    "LITELLM_OLDEST",
    "LITELLM_VERSION",
    "config_failures",
    "doctor_checks",
    "doctor_command",
    "leftover_check",
    "litellm_supported",
    "require_distinct_ports",
]
