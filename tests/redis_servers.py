"""Redis servers that tests start themselves: a private server (durability, script timings) and a
3-master Redis Cluster (issue 9 items 3, 7, 8). Every server runs in its own temporary folder
and is stopped by the test that started it.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import redis


def redis_binaries() -> tuple[str, str] | None:
    """``(redis-server, redis-cli)`` on PATH, or ``None``."""
    server, cli = shutil.which("redis-server"), shutil.which("redis-cli")
    return (server, cli) if server and cli else None


def free_ports(count: int) -> list[int]:
    """``count`` distinct TCP ports that were free a moment ago on 127.0.0.1."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [int(s.getsockname()[1]) for s in sockets]
    finally:
        for sock in sockets:
            sock.close()


def wait_until(check: object, timeout_s: float, what: str) -> None:
    """Poll ``check()`` (a callable returning truthy) until it holds, else raise."""
    assert callable(check)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except (redis.RedisError, OSError):
            pass
        time.sleep(0.05)
    raise TimeoutError(f"timed out after {timeout_s} s waiting for {what}")


@dataclass
class RedisServer:
    """A ``redis-server`` process on 127.0.0.1:``port`` with its data in ``folder``."""

    folder: Path
    port: int
    args: Sequence[str] = ()
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        """Start (or restart, on the same folder) and wait until it answers PING."""
        binaries = redis_binaries()
        assert binaries is not None, "redis-server is not installed"
        self.folder.mkdir(parents=True, exist_ok=True)
        log = (self.folder / "redis.log").open("ab")
        self.process = subprocess.Popen(
            [
                binaries[0],
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--dir",
                str(self.folder),
                "--save",
                "",
                *self.args,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        client = redis.Redis(port=self.port, socket_timeout=1)
        try:
            wait_until(lambda: client.ping() and _loaded(client), 30, f"redis on {self.port}")
        finally:
            client.close()
        return self

    def kill(self) -> None:
        """``kill -9``: no shutdown, no final write."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def stop(self) -> None:
        """Terminate and wait (SIGTERM; Redis writes nothing more with ``--save ''``)."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def _cluster_ok(client: redis.Redis, nodes: int) -> bool:
    raw = client.execute_command("CLUSTER INFO")
    if isinstance(raw, dict):
        info = {str(k): str(v) for k, v in raw.items()}
    else:
        text = raw.decode() if isinstance(raw, bytes) else str(raw)
        info = dict(line.split(":", 1) for line in text.split() if ":" in line)
    return info.get("cluster_state") == "ok" and int(info.get("cluster_known_nodes", 0)) == nodes


def _loaded(client: redis.Redis) -> bool:
    return int(client.info("persistence").get("loading", 0)) == 0


@dataclass
class RedisCluster:
    """A Redis Cluster of ``masters`` primaries and no replicas, each in its own folder."""

    folder: Path
    masters: int = 3
    servers: list[RedisServer] = field(default_factory=list)

    @property
    def url(self) -> str:
        """The URL of one node (the client discovers the others)."""
        return self.servers[0].url

    @property
    def ports(self) -> list[int]:
        return [s.port for s in self.servers]

    def start(self) -> RedisCluster:
        """Start the nodes, create the cluster, wait until every node reports it ok."""
        binaries = redis_binaries()
        assert binaries is not None, "redis-server / redis-cli are not installed"
        ports = free_ports(self.masters * 2)  # a client port and a cluster-bus port per node
        for index in range(self.masters):
            port, bus = ports[2 * index], ports[2 * index + 1]
            server = RedisServer(
                self.folder / f"node-{port}",
                port,
                (
                    "--cluster-enabled",
                    "yes",
                    "--cluster-port",
                    str(bus),
                    "--cluster-config-file",
                    "nodes.conf",
                    "--cluster-node-timeout",
                    "5000",
                    "--appendonly",
                    "no",
                ),
            )
            self.servers.append(server)
            server.start()
        subprocess.run(
            [
                binaries[1],
                "--cluster",
                "create",
                *(f"127.0.0.1:{p}" for p in self.ports),
                "--cluster-replicas",
                "0",
                "--cluster-yes",
            ],
            check=True,
            capture_output=True,
            timeout=60,
        )
        for port in self.ports:
            client = redis.Redis(port=port, socket_timeout=1, decode_responses=True)
            try:
                wait_until(
                    lambda c=client: _cluster_ok(c, self.masters),  # type: ignore[misc]
                    30,
                    f"cluster_state:ok on {port}",
                )
            finally:
                client.close()
        return self

    def stop(self) -> None:
        for server in self.servers:
            server.stop()


def add_acl_user(server: RedisServer, name: str, password: str, *rules: str) -> str:
    """Create (or reset) the ACL user ``name`` on ``server`` with ``rules`` (``+@all``,
    ``-@scripting``, ``~*`` ...; the user is enabled with ``password``); returns a URL that
    logs in as it."""
    admin = redis.Redis(port=server.port, socket_timeout=5)
    try:
        admin.execute_command("ACL", "SETUSER", name, "reset", "on", f">{password}", *rules)
    finally:
        admin.close()
    return f"redis://{name}:{password}@127.0.0.1:{server.port}/0"


def set_acl_rules(server: RedisServer, name: str, *rules: str) -> None:
    """Add ``rules`` to the ACL user ``name`` (``+@scripting`` grants what was missing)."""
    admin = redis.Redis(port=server.port, socket_timeout=5)
    try:
        admin.execute_command("ACL", "SETUSER", name, *rules)
    finally:
        admin.close()
