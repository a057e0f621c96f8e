"""Bulk import: idempotent batches, re-imports of dated and undated lines, timestamps of undated
jsonl lines."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml
from typer.testing import CliRunner

from litellm_memory_hook.core.indexing import indexed_chain, stored_terms
from litellm_memory_hook.core.models import Turn
from litellm_memory_hook.engine.identity import Identity
from litellm_memory_hook.store.keys import ConversationKeys, user_scope
from litellm_memory_hook.store.redis_store import MemoryStore
from litellm_memory_hook.tools.histories import HistoryLine, load_jsonl
from litellm_memory_hook.tools.importer import ImportResult, delete_conversation, import_lines
from tests.support.harness import REPO
from tests.support.redis_url import real_redis_url


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


def _write_jsonl(path: Path, records: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")


def _append_jsonl(path: Path, records: list[dict[str, Any]]) -> None:
    with path.open("a", encoding="utf-8") as handle:
        handle.writelines(json.dumps(r) + "\n" for r in records)


async def _import_file(store: MemoryStore, prefix: str, path: Path, at_ms: int) -> ImportResult:
    """Import a jsonl file as a run at ``at_ms`` would (undated lines end then)."""
    history = load_jsonl(path, start_ms=at_ms - 1000 * (len(path.read_text().splitlines()) + 1))
    return await import_lines(store, _who(prefix), history.lines)


async def _stored(store: MemoryStore, prefix: str) -> list[tuple[str, str]]:
    return [(t.role, t.text) for t in await store.all_turns(_who(prefix).keys)]


T0 = 1_750_000_000_000
HOUR = 3_600_000


def _msg(role: str, content: str, ts: Any = None) -> dict[str, Any]:
    return {"role": role, "content": content} | ({} if ts is None else {"ts": ts})


async def test_reimporting_an_undated_jsonl_adds_nothing(
    store: MemoryStore, prefix: str, tmp_path: Path
) -> None:
    """Lines without ts get new times on every read: a second and third import of the same file
    still write nothing (they wrote 2 more turns each, matched on the made-up time)."""
    path = tmp_path / "chat.jsonl"
    _write_jsonl(path, [_msg("user", "hi"), _msg("assistant", "hello"), _msg("user", "bye")])
    first = await _import_file(store, prefix, path, T0)
    assert (first.turns, first.first_seq, first.last_seq) == (3, 1, 3)
    for run in (1, 2):
        again = await _import_file(store, prefix, path, T0 + run * HOUR)
        assert (again.turns, again.first_seq, again.last_seq) == (0, 0, 0)
    assert await _stored(store, prefix) == [("user", "hi"), ("assistant", "hello"), ("user", "bye")]


async def test_a_line_repeated_in_the_file_is_kept_and_not_added_again(
    store: MemoryStore, prefix: str, tmp_path: Path
) -> None:
    """ "ok" twice in the file: both are written the first time (a line is not a duplicate of
    another line of the same file), and neither is written again."""
    path = tmp_path / "chat.jsonl"
    records = [
        _msg("user", "Can you book it?"),
        _msg("assistant", "ok"),
        _msg("user", "And the hotel too?"),
        _msg("assistant", "ok"),
    ]
    _write_jsonl(path, records)
    first = await _import_file(store, prefix, path, T0)
    assert first.turns == 4
    again = await _import_file(store, prefix, path, T0 + HOUR)
    assert again.turns == 0
    expected = [(r["role"], r["content"]) for r in records]
    assert await _stored(store, prefix) == expected


async def test_lines_appended_to_the_file_are_added_in_order(
    store: MemoryStore, prefix: str, tmp_path: Path
) -> None:
    """A growing chat log exported again: only the two appended lines are written, after the
    stored ones and later in time, even the one repeating a stored line ("ok")."""
    path = tmp_path / "chat.jsonl"
    records = [_msg("user", "hi"), _msg("assistant", "ok"), _msg("user", "thanks")]
    _write_jsonl(path, records)
    assert (await _import_file(store, prefix, path, T0)).turns == 3
    more = [_msg("assistant", "ok"), _msg("user", "bye")]
    _append_jsonl(path, more)
    result = await _import_file(store, prefix, path, T0 + HOUR)
    assert (result.turns, result.first_seq, result.last_seq) == (2, 4, 5)
    assert await _stored(store, prefix) == [(r["role"], r["content"]) for r in records + more]
    stamps = [t.ts_ms for t in await store.all_turns(_who(prefix).keys)]
    assert stamps == sorted(stamps)
    assert (await _import_file(store, prefix, path, T0 + 2 * HOUR)).turns == 0


async def test_dated_and_undated_lines_reimport_and_append(
    store: MemoryStore, prefix: str, tmp_path: Path
) -> None:
    """A file mixing lines with and without ts (the same text under both): dated lines match on
    their time, undated ones on role and text; a re-import writes nothing, appended lines of
    both kinds are written."""
    path = tmp_path / "chat.jsonl"
    records = [
        _msg("user", "hi"),
        _msg("assistant", "ok", 1_700_000_000),
        _msg("user", "ok"),
        _msg("assistant", "ok"),
        _msg("user", "see you", "2023-11-14T22:15:00Z"),
        _msg("assistant", "ok"),
    ]
    _write_jsonl(path, records)
    assert (await _import_file(store, prefix, path, T0)).turns == 6
    assert (await _import_file(store, prefix, path, T0 + HOUR)).turns == 0
    more = [
        _msg("assistant", "ok", 1_700_000_500),
        _msg("assistant", "ok"),
        _msg("user", "hi"),
    ]
    _append_jsonl(path, more)
    result = await _import_file(store, prefix, path, T0 + 2 * HOUR)
    assert (result.turns, result.first_seq, result.last_seq) == (3, 7, 9)
    assert await _stored(store, prefix) == [(r["role"], r["content"]) for r in records + more]
    assert (await _import_file(store, prefix, path, T0 + 3 * HOUR)).turns == 0


async def test_an_undated_line_does_not_take_the_stored_turn_of_a_dated_one(
    store: MemoryStore, prefix: str
) -> None:
    """Each stored turn counts for one line, dated lines first: an undated "ok" put before the
    stored dated "ok" is new, whatever the order of the lines."""
    dated = HistoryLine("assistant", "ok", T0)
    assert (await import_lines(store, _who(prefix), [dated])).turns == 1
    undated = HistoryLine("assistant", "ok", T0 + HOUR, dated=False)
    result = await import_lines(store, _who(prefix), [undated, dated])
    assert result.turns == 1
    assert [t.ts_ms for t in await store.all_turns(_who(prefix).keys)] == [T0, T0 + HOUR]
    assert (await import_lines(store, _who(prefix), [undated, dated])).turns == 0


def test_undated_jsonl_lines_are_marked_undated(tmp_path: Path) -> None:
    """load_jsonl marks the lines whose ts it made up (dated=False); LoCoMo-style given times
    and jsonl ts stay dated."""
    path = tmp_path / "chat.jsonl"
    _write_jsonl(
        path, [_msg("user", "hi"), _msg("assistant", "yo", 1_700_000_000), _msg("user", "x")]
    )
    assert [line.dated for line in load_jsonl(path).lines] == [False, True, False]


@pytest.fixture
def cli_config(tmp_path: Path, key_prefix: str) -> Path:
    """The checkout's config.yaml without its own key prefix and Redis (the test's are used)."""
    raw = yaml.safe_load((REPO / "config.yaml").read_text(encoding="utf-8"))
    raw["callback_settings"]["memory"].get("storage", {}).pop("key_prefix", None)
    raw["callback_settings"]["memory"].pop("redis", None)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    return path


@pytest.mark.redis
def test_cli_import_of_an_undated_jsonl_twice_adds_nothing(
    cli_config: Path, key_prefix: str, tmp_path: Path
) -> None:
    """The report: `import chat.jsonl --user dan` three times wrote seq 1-3, then 4-5, then 6-7
    (only the dated line was skipped). Now the second and third runs write nothing."""
    from litellm_memory_hook.tools import cli

    path = tmp_path / "chat.jsonl"
    _write_jsonl(
        path,
        [_msg("user", "hi"), _msg("assistant", "hello"), _msg("user", "bye", 1_700_000_000)],
    )
    args = ["import", str(path), "--user", "dan", "--config", str(cli_config)]
    result = CliRunner().invoke(cli.app, args)
    assert result.exit_code == 0 and "imported 3 turns (seq 1-3)" in result.output, result.output
    for _ in range(2):
        result = CliRunner().invoke(cli.app, args)
        assert result.exit_code == 0 and "nothing new" in result.output, result.output
    client = redis.Redis.from_url(real_redis_url())
    try:
        turns = list(client.scan_iter(match=f"{key_prefix}:*:turns", count=1000))
        assert len(turns) == 1 and client.zcard(turns[0]) == 3
    finally:
        client.close()


def test_jsonl_lines_that_cannot_be_turns_refuse_the_file(tmp_path: Path) -> None:
    """A misspelt or missing role, content that is not text, a line that is not a message, a bad
    ts: the reader dropped such lines without a word (the ts stopped the read, without its line
    number). Now the file is refused, naming the first three and how many more."""
    from litellm_memory_hook.errors import DatasetError

    path = tmp_path / "chat.jsonl"
    _write_jsonl(
        path,
        [
            {"role": "User", "content": "capital U"},
            {"role": "user", "content": {"text": "an object"}},
            [1, 2],  # type: ignore[list-item]
            {"role": "user", "content": "fine"},
            {"role": "user", "content": "bad time", "ts": "yesterday"},
        ],
    )
    with pytest.raises(DatasetError) as info:
        load_jsonl(path)
    assert str(info.value) == (
        f'{path}: 4 lines cannot be imported: line 1: unknown role "User" (user or assistant); '
        'line 2: content is an object ({"text": "an object"}), not text or a list of parts; '
        "line 3: a list ([1, 2]) is not a message object; and 1 more; fix or remove them "
        "(nothing was imported)"
    )


def test_jsonl_lines_left_out_on_purpose_are_listed(tmp_path: Path) -> None:
    """System, developer, tool and function messages and messages without text are not turns:
    left out, and listed with their line and reason for the importer to report."""
    path = tmp_path / "chat.jsonl"
    _write_jsonl(
        path,
        [
            {"role": "system", "content": "rules"},
            _msg("user", "hi"),
            {"role": "assistant", "content": None, "tool_calls": [{"id": "c"}]},
            {"role": "tool", "content": "42"},
            {"role": "assistant", "content": "\u200b "},
            {"role": "user"},
            _msg("assistant", "hello"),
        ],
    )
    history = load_jsonl(path)
    assert [(line.role, line.text, line.line_id) for line in history.lines] == [
        ("user", "hi", "L2"),
        ("assistant", "hello", "L7"),
    ]
    assert [(s.where, s.reason) for s in history.skipped] == [
        ("line 1", "system message"),
        ("line 3", "tool calls, no text"),
        ("line 4", "tool message"),
        ("line 5", "no text"),
        ("line 6", "no text"),
    ]


def test_a_jsonl_file_that_is_not_utf8_names_the_line_and_offset(tmp_path: Path) -> None:
    """Bytes that are not UTF-8 raised UnicodeDecodeError (the CLI's unexpected-error path):
    a DatasetError naming the file, the byte, its offset and line. A leading BOM is fine."""
    from litellm_memory_hook.errors import DatasetError

    path = tmp_path / "chat.jsonl"
    good = '\ufeff{"role": "user", "content": "hi"}\n\n'.encode()
    path.write_bytes(good + b'{"role": "assistant", "content": "ol\xe1"}\n')
    with pytest.raises(DatasetError) as info:
        load_jsonl(path)
    offset = len(good) + len(b'{"role": "assistant", "content": "ol')
    assert str(info.value) == (
        f"{path} is not UTF-8 text: byte 0xE1 at offset {offset} (line 3); save the file as UTF-8"
    )
    path.write_bytes(good)
    assert [line.text for line in load_jsonl(path).lines] == ["hi"]


@pytest.mark.parametrize(
    ("ts", "ts_ms"),
    [
        (0, 0),  # 1970-01-01: the first time taken
        (1_700_000_000, 1_700_000_000_000),  # seconds
        (1_700_000_000.5, 1_700_000_000_500),
        (9_999_999_999, 9_999_999_999_000),  # the last number read as seconds (2286)
        (10_000_000_000, 10_000_000_000),  # the first read as milliseconds (April 1970)
        (1_700_000_000_000, 1_700_000_000_000),
        (32_503_680_000_000, 32_503_680_000_000),  # 3000-01-01T00:00Z: the last time taken
        ("2023-05-08T13:56:00Z", 1_683_554_160_000),
        ("2999-12-31T23:59:59", 32_503_679_999_000),
    ],
)
def test_jsonl_times_within_1970_to_3000_are_read(tmp_path: Path, ts: object, ts_ms: int) -> None:
    """Numbers below 10^10 are epoch seconds, from 10^10 up milliseconds; ISO 8601 is UTC unless
    it names an offset; the bounds themselves are taken."""
    path = tmp_path / "chat.jsonl"
    _write_jsonl(path, [{"role": "user", "content": "hi", "ts": ts}])
    assert load_jsonl(path).lines[0].ts_ms == ts_ms


@pytest.mark.parametrize(
    ("raw_ts", "reason"),
    [
        ("NaN", "timestamp NaN is not a number"),
        ("Infinity", "timestamp Infinity is not a number"),
        ("-5", "timestamp -5 is before 1970 (1970-01-01 to 3000-01-01 UTC)"),
        ("1e30", "timestamp 1e+30 is outside 1970-01-01 to 3000-01-01 UTC"),
        ("32503680000001", "timestamp 32503680000001 is outside 1970-01-01 to 3000-01-01 UTC"),
        ('"1969-12-31T23:59:59Z"', "timestamp '1969-12-31T23:59:59Z' is outside 1970-01-01"),
        ('"3000-01-01T00:00:01+00:00"', "timestamp '3000-01-01T00:00:01+00:00' is outside"),
    ],
)
def test_jsonl_times_outside_1970_to_3000_refuse_the_file(
    tmp_path: Path, raw_ts: str, reason: str
) -> None:
    """NaN stopped the import with "ValueError: cannot convert float NaN to integer"; 1e30 was
    stored as a 31-digit time and -5 as -5000 ms: a unit mix-up or a typo refuses the file."""
    from litellm_memory_hook.errors import DatasetError

    path = tmp_path / "chat.jsonl"
    path.write_text(f'{{"role": "user", "content": "hi", "ts": {raw_ts}}}\n', encoding="utf-8")
    with pytest.raises(DatasetError) as info:
        load_jsonl(path)
    assert f"1 line cannot be imported: line 1: {reason}" in str(info.value)


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ('{"role":"user","content":"a\\ud800b"}', "content holds a lone surrogate \\ud800"),
        (
            '{"role":"user","content":[{"type":"text","text":"\\udfff"}]}',
            "content[0].text holds a lone surrogate \\udfff",
        ),
        ('{"role":"user","content":"ok","name":"B\\udc00"}', "name holds a lone surrogate"),
        ('{"role":"us\\ud800er","content":"ok"}', "role holds a lone surrogate \\ud800"),
        ('"\\ud800"', "holds a lone surrogate \\ud800 (a JSON escape"),
    ],
)
def test_jsonl_text_with_a_lone_surrogate_refuses_the_file(
    tmp_path: Path, line: str, reason: str
) -> None:
    """A JSON-escaped lone surrogate decodes to a string no UTF-8 can hold: the Redis write
    failed with an unexpected UnicodeEncodeError. The line is refused, its place named, and the
    message holds only the escape (it is printable). A pair (an emoji) is fine."""
    from litellm_memory_hook.errors import DatasetError

    path = tmp_path / "chat.jsonl"
    path.write_text(line + '\n{"role":"user","content":"\\ud83d\\ude00"}\n', encoding="utf-8")
    with pytest.raises(DatasetError) as info:
        load_jsonl(path)
    message = str(info.value)
    assert f"1 line cannot be imported: line 1: {reason}" in message
    message.encode("utf-8")  # no surrogate left in the message itself
    path.write_text('{"role":"user","content":"\\ud83d\\ude00"}\n', encoding="utf-8")
    assert load_jsonl(path).lines[0].text == "\U0001f600"


@pytest.mark.redis
def test_cli_import_keeps_max_stored_messages(
    cli_config: Path, key_prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """README: past max_stored_messages the oldest turns are deleted. Importing 120 lines with
    max_stored_messages 50 stored all 120 (only the proxy's post-call write trims), so an
    imported conversation stays over the bound until its next chat request."""
    from litellm_memory_hook.tools import cli

    monkeypatch.setenv("LITELLM_MEMORY_STORAGE__MAX_MESSAGES", "50")
    path = tmp_path / "long.jsonl"
    _write_jsonl(
        path, [_msg("user" if i % 2 == 0 else "assistant", f"line {i}") for i in range(120)]
    )
    args = ["import", str(path), "--user", "dan", "--config", str(cli_config)]
    result = CliRunner().invoke(cli.app, args)
    assert result.exit_code == 0, result.output
    client = redis.Redis.from_url(real_redis_url())
    try:
        turns = list(client.scan_iter(match=f"{key_prefix}:*:turns", count=1000))
        assert len(turns) == 1 and client.zcard(turns[0]) <= 51
    finally:
        client.close()


async def test_a_write_read_before_a_fresh_import_leaves_the_imported_turns(
    store: MemoryStore, prefix: str
) -> None:
    """``import --fresh`` deletes the conversation's keys (the seq counter restarts) without
    a new forget token, so a request that read the conversation before it still writes after
    it: a regenerate replacing its old reply at seq 2 deletes the imported turn that now has
    seq 2 (and takes the old reply's terms out of the index, leaving the imported turn's terms
    pointing at a deleted seq). A forget refuses such a stale write; a fresh import does not."""
    who = _who(prefix)
    question = Turn(role="user", text="Tell me about zebras?", ts_ms=1)
    old = indexed_chain([question, Turn(role="assistant", text="Zebras have stripes.", ts_ms=2)])
    await store.append(who.keys, old, call_id="r0", memory=who.memory)
    state, _ = await store.load(who.keys, who.memory, tail=10)  # a regenerate's pre-call read
    await delete_conversation(store, who)  # import --fresh (tools/cli.py)
    lines = [
        HistoryLine("user", "My cat is called Miso.", 1000),
        HistoryLine("assistant", "Cute name!", 1001),
        HistoryLine("user", "She is three years old.", 1002),
    ]
    await import_lines(store, who, lines)
    reply = Turn(role="assistant", text="Zebras are striped horses.", ts_ms=3)
    await store.append(
        who.keys,
        indexed_chain([reply], question.text),
        call_id="r1",
        replace=[stored_terms(state.tail[1])],
        memory=who.memory,
        forget_token=state.forget_token,
    )
    texts = [t.text for t in await store.all_turns(who.keys)]
    assert texts[:3] == [line.text for line in lines], texts


async def test_importing_a_file_longer_than_max_stored_messages_again_writes_nothing(
    store: MemoryStore, prefix: str
) -> None:
    """With ``max_messages``, only the file's newest lines are imported. Before, all were
    written and the oldest then trimmed: importing the same file again (documented: "writes
    only its new lines") took the trimmed lines for new ones, wrote them after the newest, and
    the trim deleted the newest lines the first import kept."""
    who = _who(prefix)
    lines = [
        HistoryLine(role="user" if i % 2 == 0 else "assistant", text=f"line {i}", ts_ms=1000 + i)
        for i in range(60)
    ]
    first = await import_lines(store, who, lines, max_messages=50)
    kept = [t.text for t in await store.all_turns(who.keys)]
    assert first.turns == 50 and kept == [f"line {i}" for i in range(10, 60)]
    again = await import_lines(store, who, lines, max_messages=50)
    assert [t.text for t in await store.all_turns(who.keys)] == kept
    assert again.turns == 0


def test_undated_lines_before_the_first_dated_one_come_before_it(tmp_path: Path) -> None:
    """An undated line before dated ones ends a second before the first dated line (fresh-user
    run: it took the reading time, years after the dated lines, and the stored times were out
    of order)."""
    path = tmp_path / "mix.jsonl"
    dated = 1_704_412_800_000  # 2024-01-05
    _write_jsonl(
        path,
        [_msg("user", "hello"), _msg("assistant", "hi"), _msg("user", "on the 5th", ts=dated)],
    )
    lines = load_jsonl(path).lines
    assert [line.ts_ms for line in lines] == [dated - 2000, dated - 1000, dated]
    assert [line.dated for line in lines] == [False, False, True]


async def test_a_file_whose_times_go_back_is_stored_in_time_order(
    store: MemoryStore, prefix: str
) -> None:
    """A merged or re-sorted log is written in time order (a stable sort): seq order is time
    order within the import (and a conversation stored before the time index existed still
    finds dates by a binary search over the stored times)."""
    who = _who(prefix)
    lines = [HistoryLine("user", f"line {i}", 1000 * t) for i, t in enumerate([5, 2, 9, 2, 7])]
    await import_lines(store, who, lines)
    stored = await store.all_turns(who.keys)
    assert [t.ts_ms for t in stored] == [2000, 2000, 5000, 7000, 9000]
    assert [t.text for t in stored] == ["line 1", "line 3", "line 0", "line 4", "line 2"]


async def test_undated_replies_keep_their_place_between_lines_of_one_minute(
    store: MemoryStore, prefix: str, tmp_path: Path
) -> None:
    """README: lines are sorted only where "a file whose times go back" (lines of one time stay
    as written). A log dated to the minute, its replies undated, never goes back; but an
    undated reply takes its previous line's time plus a second, so the sort puts the next
    question of the same minute before it: the stored conversation no longer reads in order
    (it did before the sort)."""
    path = tmp_path / "minutes.jsonl"
    _write_jsonl(
        path,
        [
            _msg("user", "hi", ts="2024-01-05T10:00"),
            _msg("assistant", "hello, how are you?"),
            _msg("user", "fine, and you?", ts="2024-01-05T10:00"),
            _msg("assistant", "great"),
        ],
    )
    await import_lines(store, _who(prefix), load_jsonl(path).lines)
    stored = await store.all_turns(_who(prefix).keys)
    assert [t.text for t in stored] == ["hi", "hello, how are you?", "fine, and you?", "great"]


async def test_reimporting_a_bounded_file_after_newer_turns_writes_nothing(
    store: MemoryStore, prefix: str
) -> None:
    """An import with ``max_messages`` matches only the file's newest lines, so that importing
    the same file again writes nothing. Once newer turns came after the import (a chat, a
    second file) and the bound trimmed the file's oldest lines, importing the file again takes
    those trimmed lines for new ones: they are written after the newest turns and the trim then
    deletes the file's lines that were still stored (and, the next time, the newer turns)."""
    who = _who(prefix)
    lines = [HistoryLine("user", f"line {i}", 1000 * (i + 1)) for i in range(5)]
    await import_lines(store, who, lines, max_messages=5)
    newer = [HistoryLine("user", f"newer {i}", 100_000 + 1000 * i) for i in range(2)]
    await import_lines(store, who, newer, max_messages=5)
    kept = [t.text for t in await store.all_turns(who.keys)]
    assert kept == ["line 2", "line 3", "line 4", "newer 0", "newer 1"]
    again = await import_lines(store, who, lines, max_messages=5)
    assert [t.text for t in await store.all_turns(who.keys)] == kept
    assert again.turns == 0


def test_undated_lines_before_a_first_line_dated_1970_stay_in_range(tmp_path: Path) -> None:
    """README: a line's time "must lie between 1970-01-01 and 3000-01-01 UTC" (``"ts": -5``
    refuses the file). An undated line before a first dated line at the epoch (``"ts": 0``,
    accepted) is moved a second before it, to a time no ``ts`` may hold."""
    path = tmp_path / "epoch.jsonl"
    _write_jsonl(path, [_msg("user", "hello"), _msg("user", "at the epoch", ts=0)])
    lines = load_jsonl(path).lines
    assert all(line.ts_ms >= 0 for line in lines), [line.ts_ms for line in lines]


async def test_older_lines_imported_after_newer_chat_take_no_context_from_it(
    store: MemoryStore, prefix: str
) -> None:
    """A turn is keyed by the text of the turn said before it (context keys, ``ctx``). Lines
    imported after newer chat were said before that chat: the first of them takes no context
    from the newest stored turn (a fresh-user run saw a 2023 line keyed by "What is my cat
    called?", said years later). An import that goes on from the stored turns in time does."""
    who = _who(prefix)
    day = 86_400_000
    await store.append(who.keys, indexed_chain([Turn("user", "What is my cat called?", 40 * day)]))
    await import_lines(store, who, [HistoryLine("user", "I adopted a parrot named Kiwi", day)])
    await import_lines(store, who, [HistoryLine("user", "Does Kiwi sing?", 41 * day)])
    await import_lines(store, who, [HistoryLine("assistant", "Every morning, loudly", 42 * day)])
    ctx = {t.text: t.ctx for t in await store.all_turns(who.keys)}
    assert ctx["I adopted a parrot named Kiwi"] == ()  # was ("^called", "^cat")
    assert ctx["Every morning, loudly"] == ("^kiwi", "^sing")
