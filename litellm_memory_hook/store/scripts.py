"""The store's Lua scripts: one ``.lua`` file each in ``store/lua/``, read once and registered
with a client here.

Each script file opens with a comment that names its KEYS and ARGV and what it returns. A line
``-- @include <name>`` stands for ``store/lua/includes/<name>.lua`` (its own includes first):
the functions several scripts share (the packed postings, the time index, the forget tokens, the
restore of an evicted meta hash) are written once, and every script that needs them gets them in
its text, at most once each, since Redis runs a script on its own.

Every key a script names is in one user's slot (docs/design.md#redis-layout), so each runs on a
Redis Cluster too: redis-py routes a registered script by its first key. A server that does not
know a script (restarted, or a new Cluster node) answers NOSCRIPT; a registered script then loads
itself and runs again, and :func:`run_pipeline` does the same for the scripts it sends.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from importlib import resources
from importlib.resources.abc import Traversable
from typing import Any, Protocol, overload

import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster
from redis.commands.core import AsyncScript
from redis.exceptions import NoScriptError

#: a line that stands for an include file (``lua/includes/<name>.lua``)
_INCLUDE = re.compile(r"^-- @include (\w+)[ \t]*\n", re.MULTILINE)

#: a script call in a pipeline: the registered script, its keys (one slot), its arguments
ScriptCall = tuple[AsyncScript, Sequence[str], Sequence[Any]]


def _folder() -> Traversable:
    return resources.files(__package__ or "litellm_memory_hook.store") / "lua"


def script_names() -> list[str]:
    """The name of every script (``lua/<name>.lua``; the includes are not scripts)."""
    return sorted(
        item.name.removesuffix(".lua")
        for item in _folder().iterdir()
        if item.is_file() and item.name.endswith(".lua")
    )


def _read(path: Traversable, name: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ValueError(f"no Lua file {name}") from None


def _expand(text: str, done: set[str], path: tuple[str, ...]) -> str:
    """``text`` with each include line replaced by that include's text (expanded in turn), or by
    nothing when ``done`` has it already; ``path`` is the chain of includes, to refuse a loop."""

    def include(match: re.Match[str]) -> str:
        name = match.group(1)
        if name in path:
            raise ValueError(f"Lua include loop: {' -> '.join((*path, name))}")
        if name in done:
            return ""
        done.add(name)
        own = _read(_folder() / "includes" / f"{name}.lua", f"includes/{name}.lua")
        return _expand(own, done, (*path, name))

    return _INCLUDE.sub(include, text)


@functools.cache
def source(name: str) -> str:
    """The text of the script ``lua/<name>.lua`` as Redis runs it: includes in place.

    Raises:
        ValueError: no such script or include, or includes that include each other.
    """
    return _expand(_read(_folder() / f"{name}.lua", f"{name}.lua"), set(), (name,))


def register(redis: aioredis.Redis, name: str) -> AsyncScript:
    """The script ``name`` registered with a client: called with ``keys=`` and ``args=``, it
    runs by EVALSHA and loads itself where the server answers NOSCRIPT."""
    return redis.register_script(source(name))


class _HasClient(Protocol):
    redis: aioredis.Redis


class Registered:
    """A class attribute that is the script ``name`` registered with the instance's client
    (``self.redis``), on first use; an assignment to the instance's attribute replaces it."""

    def __init__(self, name: str):
        self.name = name
        self.attribute = ""

    def __set_name__(self, owner: type, attribute: str) -> None:
        self.attribute = attribute

    @overload
    def __get__(self, instance: None, owner: type) -> Registered: ...

    @overload
    def __get__(self, instance: _HasClient, owner: type) -> AsyncScript: ...

    def __get__(self, instance: _HasClient | None, owner: type) -> Registered | AsyncScript:
        if instance is None:
            return self
        script = register(instance.redis, self.name)
        vars(instance)[self.attribute] = script
        return script


async def run_pipeline(
    redis: aioredis.Redis,
    build: Callable[[Any], None],
    calls: Sequence[ScriptCall] = (),
) -> tuple[list[Any], list[Any]]:
    """A non-transactional pipeline of plain commands (``build`` queues them), plus calls of
    registered read scripts (``(script, keys, args)``, the keys in one slot) in the same round
    trip.

    The scripts go into the pipeline by EVALSHA (redis-py's script objects would check that
    their scripts exist before every pipeline, one more round trip); a script the server does
    not know (a restarted or new server) fails alone with NOSCRIPT: the scripts are loaded and
    the pipeline runs again. A Redis Cluster client refuses scripts in pipelines: there they run
    after it, each by its own call (routed by its keys).

    Returns:
        The replies of the plain commands, then those of the calls.

    Raises:
        RedisError: any reply error, or a failure of the connection.
    """
    cluster = isinstance(redis, RedisCluster)
    for attempt in range(2):
        async with redis.pipeline(transaction=False) as pipe:
            build(pipe)
            if not cluster:
                for script, names, args in calls:
                    pipe.evalsha(script.sha, len(names), *names, *args)
            replies: list[Any] = await pipe.execute(raise_on_error=False)
        errors = [r for r in replies if isinstance(r, Exception)]
        if errors and attempt == 0 and all(isinstance(e, NoScriptError) for e in errors):
            for script in {id(c[0]): c[0] for c in calls}.values():
                await redis.script_load(script.script)
            continue
        if errors:
            raise errors[0]
        if cluster:
            return replies, [await s(keys=list(names), args=args) for s, names, args in calls]
        cut = len(replies) - len(calls)
        return replies[:cut], replies[cut:]
    raise AssertionError("unreachable")  # pragma: no cover


def no_commands(pipe: Any) -> None:
    """No plain commands: a :func:`run_pipeline` of script calls only."""
