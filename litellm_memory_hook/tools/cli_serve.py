"""``litellm-memory serve`` and ``standin``: the LiteLLM proxy with memory, with the stand-in model
and (when no Redis URL is configured) an embedded Redis, looked after until Ctrl-C; the stand-in
model alone.

A ``serve`` writes the LiteLLM proxy's output (its banner, feedback box and access log) to
``<data-dir>/proxy.log`` and the stand-in's to ``<data-dir>/standin.log`` unless ``--verbose``
(:func:`child_output`), so its terminal shows its own lines: the ready line, the embedded Redis's
restarts, the stop line.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Annotated, Any

import typer

from litellm_memory_hook.errors import MemoryHookError
from litellm_memory_hook.tools import processes, standin
from litellm_memory_hook.tools.cli_common import MAX_PORT, ConfigOption, DataDirOption, console
from litellm_memory_hook.tools.cli_connect import load_config, mask_url
from litellm_memory_hook.tools.cli_doctor import config_failures, require_distinct_ports
from litellm_memory_hook.tools.cli_errors import fail

if TYPE_CHECKING:
    from litellm_memory_hook.store.embedded import EmbeddedRedis


#: the files a quiet ``serve`` writes its children's output to, in its data folder.
PROXY_LOG = "proxy.log"


STANDIN_LOG = "standin.log"
SERVE_POLL_S = 1.0
"""How often ``serve`` looks at its proxy and reaps its embedded Redis when that died (s)."""


#: the longest wait between two attempts to start a dead embedded Redis that would not start.
RESTART_BACKOFF_MAX_S = 30.0


#: lines of a failed restart ``serve`` prints at most once per period.
SERVE_LINE_PERIOD_S = 60.0


#: restart lines are printed at most once per this period (s): each restart is said (a
#: second one a minute after the first was held back for the rest of that minute), a crash
#: loop is one line per period with a count
RESTART_LINE_PERIOD_S = 5.0


#: the key of the example configuration; ``serve`` names it in its ready line.
DEMO_KEY = "sk-memory-demo"


def child_output(data_dir: Path, name: str, verbose: bool) -> IO[bytes] | None:
    """Where a child of ``serve`` writes stdout and stderr: ``None`` (the terminal) with
    ``verbose``, else ``data_dir/name`` opened for appending (the folder is made when missing).
    The caller closes it."""
    if verbose:
        return None
    data_dir.mkdir(parents=True, exist_ok=True)
    return (data_dir / name).open("ab")


def spawn_child(
    command: Sequence[str], env: Mapping[str, str], output: IO[bytes] | None
) -> subprocess.Popen[bytes]:
    """A child of ``serve`` that ends with it (:func:`processes.die_with_parent`), its output
    to ``output`` (``None``: inherited)."""
    preexec, extra = processes.die_with_parent()
    return subprocess.Popen(
        list(command),
        env={**env, **extra},
        preexec_fn=preexec,
        stdout=output,
        stderr=subprocess.STDOUT if output is not None else None,
    )


def log_tail(path: Path, lines: int = 15) -> str:
    """The last ``lines`` lines of a log file ("" when it cannot be read)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def print_log_tail(path: Path | None) -> None:
    """Print the end of a child's log (nothing for ``None``: its output was on the terminal)."""
    if path is not None:
        console.print(log_tail(path), highlight=False, soft_wrap=True)


def close_outputs(outputs: Sequence[IO[bytes] | None]) -> None:
    """Close the children's log files (:func:`child_output`)."""
    for output in outputs:
        if output is not None:
            output.close()


class _Supervisor:
    """``serve``'s watch over its embedded Redis: a server that died is started again at the
    next poll (within :data:`SERVE_POLL_S` s), with one line saying so; one that will not start
    is tried again with a growing pause (up to :data:`RESTART_BACKOFF_MAX_S`); a failure's
    lines repeat at most once per :data:`SERVE_LINE_PERIOD_S`, restart lines once per
    :data:`RESTART_LINE_PERIOD_S`, with a count."""

    def __init__(
        self, embedded: EmbeddedRedis, clock: Callable[[], float] = time.monotonic
    ) -> None:
        from litellm_memory_hook.ratelimited_log import RateLimitedLog

        self.embedded = embedded
        self.clock = clock
        self.lines = RateLimitedLog(lambda text: _serve_line(text), SERVE_LINE_PERIOD_S, clock)
        self.restart_lines = RateLimitedLog(
            lambda text: _serve_line(text), RESTART_LINE_PERIOD_S, clock
        )
        self.failures = 0
        self.next_try = 0.0
        self.restarts = 0

    def poll(self) -> None:
        """Reap or restart the server if it died; print what happened."""
        from litellm_memory_hook.store.embedded import EmbeddedRedisError

        self.lines.flush()
        self.restart_lines.flush()
        now = self.clock()
        if now < self.next_try:
            self.embedded.reap()
            return
        try:
            line = self.embedded.restart_if_dead()
        except EmbeddedRedisError as exc:
            self.failures += 1
            pause = min(RESTART_BACKOFF_MAX_S, 2.0**self.failures)
            self.next_try = now + pause
            self.lines.emit("failed", f"{exc}; trying again in {pause:g} s")
            return
        if line is not None:
            self.restarts += 1
            self.failures = 0
            self.next_try = 0.0
            self.restart_lines.emit("restarted", line)

    def close(self) -> None:
        """Print the counts still held back."""
        self.lines.flush(force=True)
        self.restart_lines.flush(force=True)


def _serve_line(text: str) -> None:
    console.print(text, soft_wrap=True, highlight=False)


def _wait_serving(proxy: subprocess.Popen[bytes], embedded: EmbeddedRedis | None) -> int:
    """Wait for the proxy to exit (its exit code), looking after the embedded Redis meanwhile:
    a server that died is reaped (no defunct process is left under a serve that runs on) and
    started again within about :data:`SERVE_POLL_S` seconds (:class:`_Supervisor`)."""
    supervisor = _Supervisor(embedded) if embedded is not None else None
    try:
        while (code := proxy.poll()) is None:
            if supervisor is not None:
                supervisor.poll()
            time.sleep(SERVE_POLL_S)
    finally:
        if supervisor is not None:
            supervisor.close()
    return code


def _stop_serving(
    children: list[subprocess.Popen[bytes]],
    embedded: EmbeddedRedis | None,
    lock: Any,
    *,
    standin: bool,
) -> list[str]:
    """Stop what ``serve`` started: its children all at once (each waits for its own shutdown),
    so the proxy's pending memory writes land before the embedded Redis saves and stops; then
    release the data folder. Returns what was stopped, for the last line."""
    processes.terminate_all(children, timeout_s=10)
    names = (["the stand-in model"] if standin else []) + ["the proxy"]
    stopped = names[: len(children)]
    if embedded is not None:
        embedded.stop()
        stopped.append("the embedded Redis (saved)")
    if lock is not None:
        lock.release()
    return stopped


def _ready_line(url: str, master_key: str | None) -> str:
    """``serve``'s ready line: the proxy URL, the inspector's URL and the key to use (the demo
    key by name; any other master key only by where it is set, never its text)."""
    if master_key == DEMO_KEY:
        key = f"key: {DEMO_KEY}"
    elif master_key:
        key = "key: the master_key of the config"
    else:
        key = "no master key set"
    return f"proxy with memory: {url}  inspector: {url}/memory/ui  {key}  (Ctrl-C stops)"


def _stopped_line(stopped: list[str], data_dir: Path | None, redis_url: str) -> str:
    """``serve``'s last line: what it stopped and where the memory stays."""
    what = ", ".join(stopped) if stopped else "nothing was running"
    if data_dir is not None:
        where = f"the memory stays in {data_dir.resolve()}/ (the next serve there uses it)"
    else:
        where = f"the memory stays in the Redis at {mask_url(redis_url)}"
    return f"serve stopped: {what}; {where}"


def serve(
    config: ConfigOption = Path("config.yaml"),
    port: Annotated[int, typer.Option(min=1, max=MAX_PORT, help="Proxy port.")] = 4000,
    host: Annotated[str, typer.Option(help="Proxy host.")] = "127.0.0.1",
    standin_port: Annotated[
        int, typer.Option(min=0, max=MAX_PORT, help="Stand-in model port (0: none).")
    ] = 4010,
    data_dir: DataDirOption = Path(".litellm-memory"),
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose",
            help="Show the proxy's and the stand-in's own output here (default: "
            "<data-dir>/proxy.log and standin.log).",
        ),
    ] = False,
) -> None:
    """Run the LiteLLM proxy with memory (an embedded Redis when no Redis URL is configured).

    Refuses to start when a port is taken, --port and --standin-port are the same, another
    serve uses the same --data-dir, or an alias's memory block is broken or misspelt (it would
    run without memory). LiteLLM's banner and access log go to <data-dir>/proxy.log unless
    --verbose; `litellm-memory status` and `stop` find it by its --data-dir.

    Example: litellm-memory serve --config config.yaml --port 4000
    """
    from litellm_memory_hook.store.embedded import EmbeddedRedisError, ServeLock, start_embedded

    def _stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    require_distinct_ports(port, standin_port)
    loaded = load_config(config)
    faults = config_failures(loaded)
    if faults:
        raise fail(f"{config}: " + "; ".join(faults) + " (see litellm-memory doctor)")
    proxy_settings = loaded.settings
    busy = processes.busy_port_message(
        [("proxy", host, port, "--port"), ("stand-in", "127.0.0.1", standin_port, "--standin-port")]
    )
    if busy:
        raise fail(busy)
    # Stop the children on `kill` as on Ctrl-C; SIGINT explicitly too, since a serve started in
    # the background by a script inherits it ignored (and `kill -INT` would do nothing).
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    settings_env = os.environ.copy()
    embedded = None
    lock = None
    ready = False
    children: list[subprocess.Popen[bytes]] = []
    outputs: list[IO[bytes] | None] = []
    try:
        if (
            "url" not in proxy_settings.redis.model_fields_set
            and not proxy_settings.redis.sentinel_nodes
        ):
            try:
                lock = ServeLock.acquire(data_dir)
                embedded = start_embedded(data_dir, owner=True)
            except EmbeddedRedisError as exc:
                raise fail(str(exc)) from exc
            # Only the memory hook gets it: LiteLLM itself would also use a REDIS_URL it sees.
            settings_env["LITELLM_MEMORY_REDIS__URL"] = embedded.url
            console.print(
                f"embedded Redis: {embedded.socket} (data in {data_dir}/; "
                f"redis-cli -s {embedded.socket})",
                soft_wrap=True,
            )
        settings_env.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        # the children end with serve, even on kill -9 (found by a fresh-user run: they were
        # left holding the ports); the embedded Redis may outlive it (see store/embedded.py)
        if standin_port:
            outputs.append(child_output(data_dir, STANDIN_LOG, verbose))
            command = processes.standin_command(standin_port)
            children.append(spawn_child(command, settings_env, outputs[-1]))
            try:
                processes.wait_http(f"http://127.0.0.1:{standin_port}/v1/models", children[-1], 30)
            except RuntimeError as exc:
                raise fail(f"the stand-in model did not start: {exc}".splitlines()[0]) from exc
            console.print(f"stand-in model: http://127.0.0.1:{standin_port}/v1")
        proxy_config = processes.config_for_standin(config, standin_port, data_dir)
        outputs.append(child_output(data_dir, PROXY_LOG, verbose))
        proxy = spawn_child(
            processes.proxy_command(proxy_config, port, host), settings_env, outputs[-1]
        )
        proxy_log = None if verbose else data_dir / PROXY_LOG
        where = "its output is above" if proxy_log is None else f"its log: {proxy_log}"
        children.append(proxy)
        if lock is not None:  # the folder is this serve's: say where its proxy listens
            processes.ServeRecord(
                os.getpid(),
                host,
                port,
                standin_port,
                str(proxy_config.resolve()),
                {"proxy": proxy.pid, **({"stand-in": children[0].pid} if standin_port else {})},
            ).write(data_dir)
        url = processes.local_url(host, port)
        console.print(
            f"starting the LiteLLM proxy on {host}:{port} ..."
            + ("" if proxy_log is None else f" (its output: {proxy_log})"),
            soft_wrap=True,
        )
        try:
            processes.wait_http(f"{url}/health/liveliness", proxy, 300)
        except RuntimeError as exc:
            print_log_tail(proxy_log)
            raise fail(
                f"the proxy did not start on {host}:{port}: {exc}".splitlines()[0] + f" ({where})"
            ) from exc
        console.print(_ready_line(url, loaded.master_key), soft_wrap=True, highlight=False)
        ready = True
        code = _wait_serving(proxy, embedded)
        if code not in (0, -signal.SIGINT, -signal.SIGTERM):
            raise fail(f"the proxy exited with code {code} ({where})")
    except KeyboardInterrupt:
        pass
    finally:
        stopped = _stop_serving(children, embedded, lock, standin=bool(standin_port))
        close_outputs(outputs)
        if ready:  # a serve that refused to start said why in its one line
            console.print(
                _stopped_line(
                    stopped,
                    data_dir if embedded is not None else None,
                    proxy_settings.redis.url,
                ),
                soft_wrap=True,
                highlight=False,
            )


def standin_command(
    port: Annotated[int, typer.Option(min=1, max=MAX_PORT, help="Port.")] = standin.DEFAULT_PORT,
    host: Annotated[str, typer.Option(help="Host.")] = "127.0.0.1",
    mode: Annotated[
        str | None,
        typer.Option(
            help="How extraction calls are answered: default (a simple rule) or oracle (LoCoMo "
            "observation labels from --oracle). Default: oracle with --oracle, else default; "
            "env STANDIN_MODE."
        ),
    ] = None,
    oracle: Annotated[
        Path | None,
        typer.Option(help="A LoCoMo-format JSON file for oracle mode (env STANDIN_ORACLE)."),
    ] = None,
    assistant_name: Annotated[
        str | None,
        typer.Option(
            help="The assistant's speaker name in extraction prompts, besides 'assistant' "
            "(env STANDIN_ASSISTANT_NAME)."
        ),
    ] = None,
) -> None:
    """Run the local stand-in model (OpenAI-compatible, records what it receives)."""
    try:
        standin.run(host=host, port=port, mode=mode, oracle=oracle, assistant_name=assistant_name)
    except (ValueError, MemoryHookError) as exc:
        raise fail(str(exc)) from exc


__all__ = [
    "DEMO_KEY",
    "PROXY_LOG",
    "STANDIN_LOG",
    "child_output",
    "close_outputs",
    "log_tail",
    "print_log_tail",
    "serve",
    "spawn_child",
    "standin_command",
]
