"""Bulk import: idempotent batches, timestamps of undated jsonl lines."""

from __future__ import annotations

import json
import time
from pathlib import Path

from litellm_memory_hook.proxy.identity import Identity
from litellm_memory_hook.store.keys import ConversationKeys, user_scope
from litellm_memory_hook.store.redis_store import MemoryStore
from litellm_memory_hook.tools.datasets import HistoryLine, load_jsonl
from litellm_memory_hook.tools.importer import import_lines


def _who(prefix: str) -> Identity:
    keys = ConversationKeys.for_ids(prefix, "master", "ana", "demo")
    memory = keys.user_keys.memory_set(user_scope("demo"))
    return Identity("master", "ana", "demo", "demo", keys, memory, "demo")


async def test_importing_the_same_lines_twice_writes_them_once(
    store: MemoryStore, prefix: str
) -> None:
    """A second import of the same history (no --fresh) adds nothing; new lines still go in."""
    lines = [
        HistoryLine(role="user" if i % 2 == 0 else "assistant", text=f"line {i}", ts_ms=i * 1000)
        for i in range(600)
    ]
    first = await import_lines(store, _who(prefix), lines)
    again = await import_lines(store, _who(prefix), lines)
    assert (first.turns, first.first_seq, first.last_seq) == (600, 1, 600)
    assert again.turns == 0
    more = await import_lines(store, _who(prefix), [*lines, HistoryLine("user", "new one", 10**7)])
    assert (more.turns, more.first_seq, more.last_seq) == (1, 601, 601)
    assert await store.count_turns(_who(prefix).keys) == 601


def test_undated_jsonl_lines_end_now(tmp_path: Path) -> None:
    """jsonl lines without ts are one second apart and end about now (not in 1970)."""
    path = tmp_path / "chat.jsonl"
    path.write_text(
        "\n".join(
            json.dumps({"role": r, "content": c})
            for r, c in [("user", "hi"), ("assistant", "hello"), ("user", "bye")]
        )
    )
    history = load_jsonl(path)
    stamps = [line.ts_ms for line in history.lines]
    assert stamps == sorted(stamps) and stamps[1] - stamps[0] == 1000
    assert abs(stamps[-1] - time.time() * 1000) < 10_000
