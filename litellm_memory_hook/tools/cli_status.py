"""``litellm-memory status`` and ``stop``: the ``serve`` running on a data folder.

* ``litellm-memory status [--data-dir .litellm-memory] [--json]``: the ``serve`` running on that
  data folder, from its record (``<data-dir>/serve.json``, kept valid by the folder's lock):
  its pid, each child's pid and whether it is alive (proxy, stand-in), the proxy URL, the
  inspector URL, the embedded Redis (socket, pid, whether it answers) and the log files. Exit 0
  when a serve runs, 1 when none does (a record left by a stopped serve is named as such).
* ``litellm-memory stop [--data-dir .litellm-memory] [--timeout 30]``: SIGTERM to that serve (it
  stops its children and the embedded Redis, which saves first, as on Ctrl-C), waits for it to
  exit and says so. Exit 0 when it stopped, 1 when none runs, 2 when it still runs after the
  timeout.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from litellm_memory_hook.tools import processes
from litellm_memory_hook.tools.cli_common import DataDirOption, console
from litellm_memory_hook.tools.cli_serve import PROXY_LOG, STANDIN_LOG

#: seconds ``stop`` waits for the serve to exit, by default.
STOP_TIMEOUT_S = 30.0


#: exit codes of ``status`` / ``stop``.
NONE_RUNS_EXIT = 1


STILL_RUNS_EXIT = 2


def _redis_state(data_dir: Path) -> dict[str, Any]:
    from litellm_memory_hook.store.embedded import answers, socket_path

    socket = socket_path(data_dir)
    try:
        pid: int | None = int((data_dir / "redis.pid").read_text().strip())
    except (OSError, ValueError):
        pid = None
    return {
        "socket": str(socket),
        "pid": pid,
        "alive": pid is not None and processes.process_alive(pid),
        "answers": answers(socket),
    }


def serve_status(data_dir: Path) -> dict[str, Any]:
    """What ``status`` reports, as JSON-ready data: ``{"running": bool, "data_dir", ...}``;
    with a running serve also ``pid``, ``proxy_url`` (``.../v1``), ``inspector_url``,
    ``children`` (name -> ``{"pid", "alive"}``), ``redis`` (``socket``, ``pid``, ``alive``,
    ``answers``), ``config`` and ``logs`` (paths)."""
    from litellm_memory_hook.store.embedded import serve_lock_holder

    folder = data_dir.resolve()
    holder = serve_lock_holder(folder)
    record = processes.ServeRecord.read(folder)
    status: dict[str, Any] = {"running": False, "data_dir": str(folder)}
    if holder is None or record is None or record.pid != holder:
        if record is not None:
            status["last_pid"] = record.pid
        return status
    base = processes.local_url(record.host, record.port)
    status.update(
        running=True,
        pid=record.pid,
        proxy_url=f"{base}/v1",
        inspector_url=f"{base}/memory/ui",
        standin_url=f"http://127.0.0.1:{record.standin_port}/v1" if record.standin_port else None,
        children={
            name: {"pid": pid, "alive": processes.process_alive(pid)}
            for name, pid in record.children.items()
        },
        redis=_redis_state(folder),
        config=record.config,
        logs=[str(folder / n) for n in (PROXY_LOG, STANDIN_LOG) if (folder / n).exists()],
    )
    return status


def _alive(flag: bool) -> str:
    return "alive" if flag else "NOT RUNNING"


def status_command(
    data_dir: DataDirOption = Path(".litellm-memory"),
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Report the serve running on --data-dir: pids, URLs, its Redis (exit 1 when none runs).

    Example: litellm-memory status
    """
    status = serve_status(data_dir)
    if as_json:
        typer.echo(json.dumps(status))
    elif not status["running"]:
        last = (
            f" (the last one, pid {status['last_pid']}, has stopped)"
            if "last_pid" in status
            else ""
        )
        console.print(f"no serve runs on {status['data_dir']}/{last}", highlight=False)
    else:
        lines = [f"serve: pid {status['pid']} on {status['data_dir']}/"]
        for name, child in status["children"].items():
            lines.append(f"  {name}: pid {child['pid']} {_alive(child['alive'])}")
        lines.append(f"  proxy URL: {status['proxy_url']}")
        lines.append(f"  inspector: {status['inspector_url']}")
        if status["standin_url"]:
            lines.append(f"  stand-in URL: {status['standin_url']}")
        redis = status["redis"]
        answering = "answers" if redis["answers"] else "does NOT answer"
        lines.append(
            f"  embedded Redis: {redis['socket']} (pid {redis['pid']}, {answering})"
            if redis["pid"] is not None or redis["answers"]
            else "  Redis: the config's (not embedded)"
        )
        lines.append(f"  config: {status['config']}")
        for log in status["logs"]:
            lines.append(f"  log: {log}")
        console.print("\n".join(lines), highlight=False, soft_wrap=True)
    if not status["running"]:
        raise typer.Exit(code=NONE_RUNS_EXIT)


def stop_command(
    data_dir: DataDirOption = Path(".litellm-memory"),
    timeout: Annotated[
        float, typer.Option("--timeout", min=0, help="Seconds to wait for it to exit.")
    ] = STOP_TIMEOUT_S,
) -> None:
    """Stop the serve running on --data-dir (SIGTERM, as Ctrl-C) and wait for it to exit.

    Example: litellm-memory stop
    """
    status = serve_status(data_dir)
    if not status["running"]:
        console.print(f"no serve runs on {status['data_dir']}/", highlight=False)
        raise typer.Exit(code=NONE_RUNS_EXIT)
    pid = int(status["pid"])
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while processes.process_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if processes.process_alive(pid):
        console.print(f"serve (pid {pid}) still runs {timeout:g} s after SIGTERM", highlight=False)
        raise typer.Exit(code=STILL_RUNS_EXIT)
    children = [name for name, child in status["children"].items() if child["alive"]]
    left = [name for name in children if processes.process_alive(status["children"][name]["pid"])]
    what = ", ".join(["serve", *children, "its embedded Redis"])
    line = f"stopped {what} (pid {pid}); the memory stays in {status['data_dir']}/"
    if left:
        line += f"; still running: {', '.join(left)}"
    console.print(line, highlight=False, soft_wrap=True)


__all__ = [
    "NONE_RUNS_EXIT",
    "STILL_RUNS_EXIT",
    "serve_status",
    "status_command",
    "stop_command",
]
