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
    #: more redis-server arguments for every node (e.g. ``--cluster-require-full-coverage no``)
    extra: tuple[str, ...] = ()

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
                    *self.extra,
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


def sentinel_mode_works() -> str | None:
    """``None`` when ``redis-server --sentinel`` starts and answers PING here, else why not
    (for a skip)."""
    binaries = redis_binaries()
    if binaries is None:
        return "redis-server / redis-cli are not installed"
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        [port] = free_ports(1)
        conf = Path(folder) / "sentinel.conf"
        conf.write_text(f"port {port}\nbind 127.0.0.1\ndir {folder}\n")
        process = subprocess.Popen(
            [binaries[0], str(conf), "--sentinel"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        client = redis.Redis(port=port, socket_timeout=1)
        try:
            wait_until(lambda: process.poll() is not None or client.ping(), 10, "a Sentinel")
            if process.poll() is not None:
                assert process.stderr is not None
                return f"redis-server --sentinel does not run: {process.stderr.read()[:200]!r}"
            return None
        except TimeoutError:
            return "redis-server --sentinel did not answer PING within 10 s"
        finally:
            client.close()
            if process.poll() is None:
                process.terminate()
            process.wait()


@dataclass
class SentinelProcess:
    """A ``redis-server --sentinel`` on 127.0.0.1:``port`` watching one master."""

    folder: Path
    port: int
    process: subprocess.Popen[bytes] | None = None

    def start(self, service: str, master_port: int, down_after_ms: int, failover_ms: int) -> None:
        binaries = redis_binaries()
        assert binaries is not None, "redis-server is not installed"
        self.folder.mkdir(parents=True, exist_ok=True)
        conf = self.folder / "sentinel.conf"  # Sentinel rewrites its file: one of its own
        conf.write_text(
            f"port {self.port}\nbind 127.0.0.1\ndir {self.folder}\n"
            f"sentinel monitor {service} 127.0.0.1 {master_port} 2\n"
            f"sentinel down-after-milliseconds {service} {down_after_ms}\n"
            f"sentinel failover-timeout {service} {failover_ms}\n"
            f"sentinel parallel-syncs {service} 1\n"
        )
        log = (self.folder / "sentinel.log").open("ab")
        self.process = subprocess.Popen(
            [binaries[0], str(conf), "--sentinel"], stdout=log, stderr=subprocess.STDOUT
        )
        log.close()

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port, socket_timeout=1, decode_responses=True)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@dataclass
class SentinelSetup:
    """A master, ``replicas`` replicas (``replicaof``) and ``sentinels`` Sentinels (quorum 2)
    on free loopback ports, with short failure detection (``down_after_ms``) and
    ``failover_ms``: what a Sentinel failover test needs."""

    folder: Path
    service: str = "mymaster"
    replicas: int = 1
    sentinels: int = 3
    down_after_ms: int = 1000
    failover_ms: int = 3000
    servers: list[RedisServer] = field(default_factory=list)
    watchers: list[SentinelProcess] = field(default_factory=list)

    @property
    def nodes(self) -> list[str]:
        """``host:port`` of every Sentinel."""
        return [f"127.0.0.1:{w.port}" for w in self.watchers]

    def start(self) -> SentinelSetup:
        """Start the master, the replicas (synced), the Sentinels, and wait until every
        Sentinel sees the replicas and the other Sentinels (so a failover can happen)."""
        ports = free_ports(1 + self.replicas + self.sentinels)
        master = RedisServer(self.folder / f"redis-{ports[0]}", ports[0]).start()
        self.servers.append(master)
        for port in ports[1 : 1 + self.replicas]:
            replica = RedisServer(
                self.folder / f"redis-{port}", port, ("--replicaof", "127.0.0.1", str(ports[0]))
            )
            self.servers.append(replica.start())
            client = redis.Redis(port=port, socket_timeout=1, decode_responses=True)
            try:
                wait_until(
                    lambda c=client: c.info("replication").get("master_link_status") == "up",  # type: ignore[misc]
                    30,
                    f"replica {port} in sync",
                )
            finally:
                client.close()
        for port in ports[1 + self.replicas :]:
            watcher = SentinelProcess(self.folder / f"sentinel-{port}", port)
            self.watchers.append(watcher)
            watcher.start(self.service, ports[0], self.down_after_ms, self.failover_ms)
        for watcher in self.watchers:
            client = watcher.client()
            try:
                wait_until(lambda c=client: self._ready(c), 30, f"sentinel {watcher.port} ready")  # type: ignore[misc]
            finally:
                client.close()
        return self

    def _ready(self, client: redis.Redis) -> bool:
        state = client.execute_command("SENTINEL", "MASTER", self.service)
        if isinstance(state, list):
            state = dict(zip(state[::2], state[1::2], strict=True))
        return (
            int(state.get("num-slaves", 0)) == self.replicas
            and int(state.get("num-other-sentinels", 0)) == self.sentinels - 1
        )

    def master_port(self) -> int | None:
        """The master's port as the first Sentinel that answers names it."""
        for watcher in self.watchers:
            client = watcher.client()
            try:
                addr = client.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.service)
                return int(addr[1])
            except (redis.RedisError, OSError):
                continue
            finally:
                client.close()
        return None

    def server(self, port: int) -> RedisServer:
        return next(s for s in self.servers if s.port == port)

    def stop(self) -> None:
        for watcher in self.watchers:
            watcher.stop()
        for server in self.servers:
            server.stop()
