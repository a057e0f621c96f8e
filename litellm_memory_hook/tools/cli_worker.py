"""``litellm-memory worker [--once]``: a standalone extraction worker process (scale-out, or cron
with ``--once``); it calls the model through the proxy's OpenAI-compatible API and shares the
due conversations in Redis safely with the proxy's worker and other workers.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections import Counter
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from litellm_memory_hook.errors import ExtractionError
from litellm_memory_hook.settings import MemorySettings
from litellm_memory_hook.tools.cli_common import (
    DEFAULT_CONFIG,
    DEFAULT_DATA_DIR,
    ConfigOption,
    DataDirOption,
    console,
    counted,
)
from litellm_memory_hook.tools.cli_connect import alias_lookup, command_config, run_on_redis
from litellm_memory_hook.tools.cli_errors import fail
from litellm_memory_hook.tools.proxyconfig import ProxyConfig


def _api_key(config: ProxyConfig) -> str | None:
    """The key the standalone worker sends: ``extraction.api_key``, else the environment's
    ``LITELLM_MASTER_KEY``, else config.yaml's ``general_settings.master_key``."""
    return (
        config.settings.extraction.api_key
        or os.environ.get("LITELLM_MASTER_KEY")
        or config.master_key
    )


def extraction_url(settings: MemorySettings, data_dir: Path) -> str:
    """Where the standalone worker sends its model calls: ``extraction.base_url`` when it is
    set (the file or ``LITELLM_MEMORY_EXTRACTION__BASE_URL``), else the proxy of the ``serve``
    running on ``data_dir`` (its port, whatever ``--port`` it was given; found by a fresh-user
    run: the worker called 4000, where another proxy may listen), else the default
    (``http://127.0.0.1:4000/v1``)."""
    from litellm_memory_hook.tools.processes import running_serve

    if "base_url" in settings.extraction.model_fields_set:
        return settings.extraction.base_url
    record = running_serve(data_dir)
    return record.proxy_url if record is not None else settings.extraction.base_url


class NamedModel:
    """An extraction model whose call errors name the URL called (``... (calling URL)``)."""

    def __init__(self, model: Any, base_url: str) -> None:
        self._model = model
        self.base_url = base_url

    async def complete(
        self, model: str, messages: list[dict[str, str]], *, json_mode: bool, timeout_s: float
    ) -> Any:
        """:meth:`litellm_memory_hook.extraction.client.ExtractionModel.complete`."""
        try:
            return await self._model.complete(
                model, messages, json_mode=json_mode, timeout_s=timeout_s
            )
        except ExtractionError as exc:
            raise ExtractionError(f"{exc} (calling {self.base_url})") from exc

    async def close(self) -> None:
        """Close the model's HTTP client."""
        await self._model.close()


def worker_command(
    once: Annotated[
        bool, typer.Option("--once", help="Run the jobs due now, print them, and exit.")
    ] = False,
    log_level: Annotated[str, typer.Option(help="Log level (debug, info, warning).")] = "info",
    config: ConfigOption = DEFAULT_CONFIG,
    data_dir: DataDirOption = DEFAULT_DATA_DIR,
) -> None:
    """Run an extraction worker outside the proxy until Ctrl-C / SIGTERM.

    It shares the due conversations in Redis safely with the proxy's worker and other workers.

    Model calls go to extraction.base_url; unset, to the proxy of the serve running on
    --data-dir (its --port), else http://127.0.0.1:4000/v1.

    Key: extraction.api_key, else LITELLM_MASTER_KEY, else general_settings.master_key.

    Example: litellm-memory worker --config config.yaml   (cron: litellm-memory worker --once)
    \f
    Raises:
        typer.Exit: code 2 for a bad config, extraction off, no API key, or Redis failing;
            with --once, code 1 when a job failed (its table row says how many).
    """
    from litellm_memory_hook.extraction.client import OpenAIModel
    from litellm_memory_hook.extraction.worker import ExtractionWorker, JobOutcome

    level = logging.getLevelName(log_level.upper())
    if not isinstance(level, int):
        raise fail(f"unknown log level {log_level!r} (debug, info, warning, error)")
    proxy_config = command_config(config, data_dir)
    settings = proxy_config.settings
    if not settings.extraction.enabled:
        raise fail(
            "extraction is off: extraction.enabled is false "
            f"({proxy_config.setting_source('extraction.enabled')})"
        )
    api_key = _api_key(proxy_config)
    if not api_key:
        raise fail(
            "no API key for the model calls: set callback_settings.memory.extraction.api_key, "
            "LITELLM_MASTER_KEY or general_settings.master_key"
        )
    logging.getLogger("litellm_memory_hook").setLevel(level)
    if not logging.getLogger().handlers:
        from rich.logging import RichHandler

        logging.basicConfig(
            level=logging.WARNING, format="%(message)s", handlers=[RichHandler(console=console)]
        )

    base_url = extraction_url(settings, data_dir)

    async def job(redis: Any) -> list[JobOutcome]:
        model = NamedModel(OpenAIModel(base_url, api_key), base_url)
        worker = ExtractionWorker(redis, settings, model, alias_lookup=alias_lookup(proxy_config))
        try:
            if once:
                return await worker.run_due()
            await _serve_until_signal(worker, base_url)
            return []
        finally:
            await model.close()

    outcomes = run_on_redis(proxy_config, data_dir, job)
    if not once:
        console.print("worker stopped")
        return
    if not outcomes:
        console.print("nothing due")
        return
    table = Table(title=counted(len(outcomes), "extraction job"))
    for column in ("status", "jobs", "memories added", "memories deleted", "more to do"):
        table.add_column(column, justify="right")
    by_status = Counter(o.status for o in outcomes)
    for status, count in sorted(by_status.items()):
        mine = [o for o in outcomes if o.status == status]
        table.add_row(
            status,
            str(count),
            str(sum(o.added for o in mine)),
            str(sum(o.deleted for o in mine)),
            str(sum(1 for o in mine if o.more)),
        )
    console.print(table)
    if by_status.get("failed"):
        # cron and scripts see it: the model could not be called, or answered unusably
        raise typer.Exit(1)


async def _serve_until_signal(worker: Any, base_url: str) -> None:
    """Start ``worker`` and stop it (after its current job) on SIGINT or SIGTERM."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        worker.start()
        console.print(f"extraction worker {worker.worker_id} calling {base_url} (Ctrl-C stops)")
        await stop.wait()
        console.print("stopping after the current job")
        await worker.stop()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


__all__ = [
    "NamedModel",
    "extraction_url",
    "worker_command",
]
