"""Putting the memory API, the inspector page and the metrics on the running LiteLLM proxy.

:func:`mount` is called by the module config.yaml names (``proxy_callback.py``): it adds the
routers of :mod:`.routes` (``/memory/v1``) and :mod:`.ui` (``/memory/ui``, the preview and
``/memory/metrics``) to ``litellm.proxy.proxy_server.app`` once, and wraps the proxy's shutdown so
the hook's in-proxy worker stops cleanly; puts :mod:`.count_tokens`'s route in front of
LiteLLM's ``/v1/messages/count_tokens``. Kept apart from both routers so that neither imports
the other.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI

from litellm_memory_hook.proxy import count_tokens, routes, ui
from litellm_memory_hook.proxy.hook import MemoryHook

logger = logging.getLogger("litellm_memory_hook")

#: at most this long (seconds) for the hook's shutdown when the proxy stops.
SHUTDOWN_TIMEOUT_S = 20.0
#: the in-proxy worker starts once the proxy's router exists, or after this long (seconds).
WORKER_START_WAIT_S = 60.0
_start_tasks: set[asyncio.Task[None]] = set()
_PROXY_MODULE = "litellm.proxy.proxy_server"
_WRAPPED_MARK = "_litellm_memory_shutdown"


def mount(hook: MemoryHook) -> bool:
    """Add the memory routes to the running LiteLLM proxy's FastAPI app, once.

    Call it from the callback module LiteLLM loads (``proxy_callback.py``). It does not import
    the proxy: outside a proxy process (``litellm.proxy.proxy_server`` not loaded) it does
    nothing. A second call (or a second copy of the callback module) adds nothing. It also
    registers :func:`install_shutdown` so the hook's in-proxy worker stops cleanly.

    Returns:
        True when the routes are on the proxy's app (now or from an earlier call), False when
        not running inside a proxy.
    """
    proxy_server = sys.modules.get(_PROXY_MODULE)
    app = getattr(proxy_server, "app", None)
    if not isinstance(app, FastAPI):
        return False
    if not routes._mounted:
        routes._mounted.append(hook)
    if not routes._has_routes(app):
        app.include_router(routes.router)
        app.openapi_schema = None  # rebuilt on the next /openapi.json, with our routes
        logger.info("memory API: routes mounted under %s", routes.PREFIX)
    if ui.include_once(app, ui.router):
        logger.info("memory API: inspector %s, preview and metrics mounted", ui.UI_PATH)
    try:
        count_tokens.mount(app, hook)
    except Exception:  # LiteLLM's own count route then counts the body as sent
        logger.warning("memory API: count_tokens with memory not mounted", exc_info=True)
    install_shutdown(proxy_server, hook)
    start_worker_soon(proxy_server, hook)
    return True


def start_worker_soon(proxy_server: object, hook: MemoryHook) -> bool:
    """Start the hook's in-proxy extraction worker and its metrics publisher when the proxy
    has started, not at its first chat request: due jobs (a flush from the CLI, an import,
    conversations whose quiet time ran out while the proxies restarted) run without waiting for
    chat traffic, and every process's metrics reach Redis (a scrape renders them all).

    LiteLLM loads callbacks inside its startup, on the event loop that serves requests, before
    it builds the router that extraction calls go through (and before the settings are final):
    a task waits for the router (at most :data:`WORKER_START_WAIT_S` seconds) and then starts
    the worker and the publisher. Without a running loop (not inside a proxy's startup) nothing
    is started; the first chat request still starts the worker, and a scrape renders this
    process's figures plus those of processes that publish.

    Returns:
        True when the task was created.
    """
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return False

    async def start() -> None:
        deadline = loop.time() + WORKER_START_WAIT_S
        while getattr(proxy_server, "llm_router", None) is None and loop.time() < deadline:
            await asyncio.sleep(0.2)
        try:
            hook.ensure_worker()
        except Exception:  # a bad setting: the first chat request logs and counts it
            logger.warning("memory hook: the extraction worker did not start", exc_info=True)
        try:
            hook.ensure_metrics_publisher()
        except Exception:  # a bad setting: scrapes render this process's figures only
            logger.warning("memory hook: the metrics publisher did not start", exc_info=True)

    task = loop.create_task(start())
    _start_tasks.add(task)
    task.add_done_callback(_start_tasks.discard)
    return True


def install_shutdown(proxy_server: object, hook: MemoryHook) -> bool:
    """Run ``hook.shutdown()`` (stop the in-proxy worker, wait for background writes, publish
    the process's metrics a last time; at most :data:`SHUTDOWN_TIMEOUT_S` seconds) when the
    proxy shuts down.

    LiteLLM 1.108.x sets a FastAPI ``lifespan``, so ``app.router.on_shutdown`` handlers never
    run, and it loads callbacks inside that lifespan, too late to wrap it. Its lifespan ends by
    calling the module global ``proxy_shutdown_event`` after in-flight requests drained; this
    wraps that global (once), running our shutdown first while the router still exists. Not a
    public LiteLLM API: when the name is missing nothing is wrapped (the worker task is then
    cancelled with the event loop; a job cut short is retried after its lease).

    Returns:
        True when our shutdown is (now or already) registered.
    """
    original = getattr(proxy_server, "proxy_shutdown_event", None)
    if original is None or not callable(original):
        logger.warning("memory API: no proxy_shutdown_event to hook; worker stops with the loop")
        return False
    if getattr(original, _WRAPPED_MARK, False):
        return True
    call: Callable[..., Awaitable[Any]] = original

    async def proxy_shutdown_event(*args: Any, **kwargs: Any) -> Any:
        try:
            async with asyncio.timeout(SHUTDOWN_TIMEOUT_S):
                await hook.shutdown()
            logger.info("memory hook: stopped (worker and background writes)")
        except Exception:
            logger.exception("memory hook: shutdown failed")
        return await call(*args, **kwargs)

    setattr(proxy_shutdown_event, _WRAPPED_MARK, True)
    setattr(proxy_server, "proxy_shutdown_event", proxy_shutdown_event)  # noqa: B010
    return True
