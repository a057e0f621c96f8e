"""The store's Lua scripts as files (store/lua/*.lua, store/scripts.py): each resolves with its
includes once each, says its KEYS, ARGV and return, agrees with the Python constants written
into it, compiles on a real Redis, and loads itself again after the server lost it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from litellm_memory_hook.core.models import IndexedTurn, Turn
from litellm_memory_hook.store import scripts
from litellm_memory_hook.store.keys import CURSOR_COPY_FIELD, ConversationKeys
from litellm_memory_hook.store.reads import LOAD_TERMS_PER_CALL
from litellm_memory_hook.store.redis_store import MemoryStore

#: the scripts the package runs (a new file must be named here, a gone one taken out)
SCRIPTS = [
    "append_turns",
    "begin_write",
    "delete_turns",
    "fetch_turns",
    "last_question",
    "load_state",
    "mark_forgotten",
    "memory_commit",
    "memory_delete",
    "memory_edit",
    "memory_pin",
    "memory_restore",
    "prune_chats",
    "read_conversation_meta",
    "read_memory_set",
    "release_lease",
    "remove_if_score",
    "seq_spans",
    "set_if_present",
    "write_turns",
]


def test_every_script_is_a_file_with_its_includes_in_place() -> None:
    assert scripts.script_names() == SCRIPTS
    for name in SCRIPTS:
        text = scripts.source(name)
        assert "@include" not in text, name
        functions = re.findall(r"^local function (\w+)", text, re.MULTILINE)
        assert len(functions) == len(set(functions)), f"{name}: an include given twice"


def test_every_script_says_its_keys_argv_and_return() -> None:
    """The comment a script file opens with names the KEYS it touches, the ARGV it reads (if
    any) and what it returns."""
    for name in SCRIPTS:
        text = scripts.source(name)
        lines = text.splitlines()
        opening = lines[: next(i for i, line in enumerate(lines) if not line.startswith("--"))]
        said = "\n".join(opening)
        assert opening and "KEYS[1]" in said and "Returns" in said, name
        assert "ARGV" in said or "ARGV" not in text, name


def test_the_numbers_written_into_scripts_agree_with_python() -> None:
    assert f"local CURSOR_COPY = '{CURSOR_COPY_FIELD}'\n" in scripts.source("append_turns")
    load_state = scripts.source("load_state")
    assert f"for first = 5, #ARGV, {LOAD_TERMS_PER_CALL} do\n" in load_state
    assert f"math.min(first + {LOAD_TERMS_PER_CALL - 1}, #ARGV)" in load_state


def test_the_scripts_that_store_turns_share_the_index_functions() -> None:
    """The recall and time index functions are written once, in the includes, and each write
    script gets them all, in the same order."""
    writers = ("append_turns", "begin_write", "delete_turns", "write_turns")
    expected = ["enc", "dec", "find", "add_postings", "remove_postings", "densify", "times_mode"]
    expected.append("body_ts")
    for name in writers:
        functions = re.findall(r"^local function (\w+)", scripts.source(name), re.MULTILINE)
        assert functions[: len(expected)] == expected, name
        assert {"forgotten", "own_tokens", "remove_turns", "index_turns"} <= set(functions)


def test_an_include_loop_or_a_missing_file_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "includes").mkdir()
    (tmp_path / "includes" / "a.lua").write_text("-- @include b\nlocal x = 1\n")
    (tmp_path / "includes" / "b.lua").write_text("-- @include a\nlocal y = 2\n")
    (tmp_path / "loop.lua").write_text("-- KEYS[1]\n-- @include a\nreturn 1\n")
    (tmp_path / "missing.lua").write_text("-- @include nowhere\nreturn 1\n")
    monkeypatch.setattr(scripts, "_folder", lambda: tmp_path)
    scripts.source.cache_clear()
    try:
        with pytest.raises(ValueError, match="loop"):
            scripts.source("loop")
        with pytest.raises(ValueError, match=r"includes/nowhere\.lua"):
            scripts.source("missing")
        with pytest.raises(ValueError, match=r"no Lua file absent\.lua"):
            scripts.source("absent")
    finally:
        scripts.source.cache_clear()


async def test_every_script_compiles_on_redis(real_redis: aioredis.Redis) -> None:
    """SCRIPT LOAD compiles: a syntax error in any file fails here, not on a request."""
    for name in SCRIPTS:
        script = scripts.register(real_redis, name)
        assert await real_redis.script_load(script.script) == script.sha, name


async def test_a_store_goes_on_after_the_server_lost_its_scripts(
    real_redis: aioredis.Redis, prefix: str
) -> None:
    """SCRIPT FLUSH (a restart, a failover to a fresh node): each registered script answers
    NOSCRIPT once, loads itself and runs."""
    store = MemoryStore(real_redis, ttl_s=3600)
    keys = ConversationKeys.for_ids(prefix, "master", "u-A", "c1")
    memory = keys.user_keys.memory_set("ns:demo")
    turn = IndexedTurn(Turn(role="user", text="rare words here", ts_ms=1000), ("rare", "words"))
    await store.append(keys, [turn], call_id="a")
    await real_redis.script_flush()
    result = await store.append(keys, [turn], call_id="b")
    assert (result.written, result.first_seq) == (True, 2)
    await real_redis.script_flush()
    state, postings = await store.load(keys, memory, tail=5, query_terms=["rare"])
    assert [t.seq for t in state.tail] == [1, 2] and postings.df == {"rare": 2}
    await real_redis.script_flush()
    stored = [IndexedTurn(t, ("rare", "words")) for t in state.tail]
    assert await store.delete_turns(keys, stored) == 2
