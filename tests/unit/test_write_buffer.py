"""The outage buffer's limits (issue 9 item 2) as unit tests: a write that is dropped (too old,
the buffer full) takes with it the later writes of its conversation that go on its exchange,
so no tool result is stored without its call (fresh-user report: after a long outage the
question and the call were dropped and the tool result and the answer stored alone)."""

from __future__ import annotations

import asyncio
from collections import Counter

from litellm_memory_hook.core.models import Turn
from litellm_memory_hook.engine.record import TurnRecord
from litellm_memory_hook.engine.write_buffer import PendingWrite, WriteBuffer


def _write(ref: str, first_role: str, name: str) -> PendingWrite:
    record = TurnRecord(
        protocol="chat",
        prefix="mem",
        ref=ref,
        meta={},
        memory_scope="",
        flush=False,
        extract=True,
        write=True,
        held="",
    )
    pending = (Turn(role=first_role, text=name, ts_ms=0),)
    return PendingWrite(record, {"role": "assistant", "content": name}, name, pending=pending)


def _buffer(
    written: list[str],
    counts: Counter[str],
    *,
    gate: asyncio.Event | None = None,
    max_items: int = 100,
    max_age_s: float = 60.0,
) -> WriteBuffer:
    """A buffer whose writes land in ``written`` (after ``gate`` is set, when given: until then
    the oldest write is being sent)."""

    async def write(item: PendingWrite) -> None:
        if gate is not None:
            await gate.wait()
        written.append(item.call_id)

    return WriteBuffer(
        write,
        max_items=max_items,
        max_age_s=max_age_s,
        count=lambda name, n: counts.update({name: n}),
    )


ORDER = [
    ("t:u:a", "user", "a1 question, call"),
    ("t:u:b", "tool", "b1 result of a call Redis holds"),
    ("t:u:a", "tool", "a2 result, second call"),
    ("t:u:a", "tool", "a3 result, answer"),
    ("t:u:a", "user", "a4 next question"),
    ("t:u:a", "tool", "a5 result"),
]


async def test_a_write_too_old_drops_the_tool_results_that_answer_it() -> None:
    written: list[str] = []
    counts: Counter[str] = Counter()
    buffer = _buffer(written, counts, max_age_s=5.0)
    items = [_write(*row) for row in ORDER]
    items[0].queued_at -= 10  # the question and its call waited too long
    for item in items:
        buffer._items.append(item)
    buffer.add(_write("t:u:b", "user", "b2 question"))
    await buffer.drain(timeout_s=5)
    assert written == [
        "b1 result of a call Redis holds",  # another conversation: not touched
        "a4 next question",  # a new exchange stands on its own, and its results with it
        "a5 result",
        "b2 question",
    ]
    assert counts["writes_lost"] == 3 and counts["write_retried_ok"] == 4


async def test_a_full_buffer_drops_the_oldest_exchange_whole() -> None:
    written: list[str] = []
    counts: Counter[str] = Counter()
    buffer = _buffer(written, counts, max_items=len(ORDER))
    for item in (_write(*row) for row in ORDER):
        buffer._items.append(item)  # queued while Redis was down
    buffer.add(_write("t:u:c", "user", "c1"))
    assert [i.call_id for i in buffer._items] == [
        "b1 result of a call Redis holds",
        "a4 next question",
        "a5 result",
        "c1",
    ]
    assert counts["writes_lost"] == 3
    await buffer.drain(timeout_s=5)
    assert len(written) == 4


async def test_the_write_being_sent_is_never_the_one_dropped_for_room() -> None:
    """The buffer is full while its oldest write is being sent: the next oldest is dropped, and
    the write sent is taken off the queue once stored (before, the queue's head was taken off:
    a write never stored)."""
    gate = asyncio.Event()
    written: list[str] = []
    counts: Counter[str] = Counter()
    buffer = _buffer(written, counts, gate=gate, max_items=2)
    buffer.add(_write("t:u:a", "user", "a1"))
    buffer.add(_write("t:u:b", "user", "b1"))
    await asyncio.sleep(0.01)  # a1 is being sent
    buffer.add(_write("t:u:c", "user", "c1"))
    gate.set()
    await buffer.drain(timeout_s=5)
    assert written == ["a1", "c1"] and counts["writes_lost"] == 1


async def test_a_full_buffer_keeps_the_exchange_being_sent_whole() -> None:
    """The oldest write (a question and its call) is being sent when the buffer fills: the next
    write holds that call's results, so the oldest exchange that starts anew is dropped instead
    (fresh-user report: the results were dropped and the call stored without them); with room
    for one write only, the one being sent is kept and the buffer holds one more (review: it
    raised StopIteration and lost the turn)."""
    gate = asyncio.Event()
    written: list[str] = []
    counts: Counter[str] = Counter()
    buffer = _buffer(written, counts, gate=gate, max_items=3)
    buffer.add(_write("t:u:a", "user", "q1 and call"))
    buffer.add(_write("t:u:a", "tool", "results and answer"))
    buffer.add(_write("t:u:a", "user", "q2"))
    await asyncio.sleep(0.01)  # q1 is being sent
    buffer.add(_write("t:u:a", "user", "q3"))
    gate.set()
    await buffer.drain(timeout_s=5)
    assert written == ["q1 and call", "results and answer", "q3"]
    assert counts["writes_lost"] == 1

    gate.clear()
    written.clear()
    one = _buffer(written, Counter(), gate=gate, max_items=1)
    one.add(_write("t:u:b", "user", "b1"))
    await asyncio.sleep(0.01)  # b1 is being sent
    one.add(_write("t:u:b", "user", "b2"))
    gate.set()
    await one.drain(timeout_s=5)
    assert written == ["b1", "b2"]


async def test_a_refused_conversation_is_set_aside_and_the_others_are_written() -> None:
    """Issue 27 item 6: a write Redis refuses (here NOPERM) for one conversation is set aside
    with a counter; the writes of other conversations queued after it are written at once,
    and the refused one's later write waits behind it only. Once allowed, both land, in
    order."""
    from redis.exceptions import NoPermissionError

    allowed = {"t:u:b": True, "t:u:a": False}
    written: list[str] = []
    counts: Counter[str] = Counter()

    async def write(item: PendingWrite) -> None:
        if not allowed[item.conversation[1]]:
            raise NoPermissionError("this user has no permissions to access one of the keys")
        written.append(item.call_id)

    buffer = WriteBuffer(
        write,
        max_items=100,
        max_age_s=60.0,
        count=lambda name, n: counts.update({name: n}),
        refused_retry_s=0.2,
    )
    for ref, name in [("t:u:a", "a1"), ("t:u:b", "b1"), ("t:u:a", "a2"), ("t:u:b", "b2")]:
        buffer.add(_write(ref, "user", name))
    await buffer.drain(timeout_s=5)  # returns once only the set-aside conversation waits
    assert written == ["b1", "b2"]
    assert counts["writes_set_aside_noperm"] == 1 and counts["redis_refused_noperm"] == 1
    assert buffer.holds(("mem", "t:u:a")) and not buffer.holds(("mem", "t:u:b"))
    allowed["t:u:a"] = True
    await asyncio.sleep(0.3)
    await buffer.drain(timeout_s=5)
    assert written == ["b1", "b2", "a1", "a2"] and counts["writes_lost"] == 0


async def test_an_outage_holds_back_its_node_only() -> None:
    """A transient failure (a connection error) backs off the writes of its group (the Redis
    node) only; another node's writes go on."""
    from redis.exceptions import ConnectionError as RedisConnectionError

    down = {"node-a"}
    written: list[str] = []
    counts: Counter[str] = Counter()

    def group(item: PendingWrite) -> str:
        return "node-a" if item.conversation[1].endswith(":a") else "node-b"

    async def write(item: PendingWrite) -> None:
        if group(item) in down:
            raise RedisConnectionError("Connection refused")
        written.append(item.call_id)

    buffer = WriteBuffer(
        write, max_items=100, max_age_s=60.0, count=lambda n, k: counts.update({n: k}), group=group
    )
    for ref, name in [("t:u:a", "a1"), ("t:v:a", "a2"), ("t:u:b", "b1"), ("t:v:b", "b2")]:
        buffer.add(_write(ref, "user", name))
    await asyncio.sleep(0.1)
    assert written == ["b1", "b2"] and counts["writes_set_aside"] == 0
    down.clear()
    await buffer.drain(timeout_s=5)
    assert sorted(written) == ["a1", "a2", "b1", "b2"] and counts["writes_lost"] == 0
