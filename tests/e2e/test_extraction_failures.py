"""Extraction failures by kind (issue 27 item 4, field case E10) through a real proxy and the
stand-in: a model answering 400 stops being called; a context error skips what cannot fit."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest

from tests.integration.test_extraction_failures import CONTEXT_MESSAGE
from tests.support import harness

# --- end to end ---------------------------------------------------------------------------


class FailStack(harness.Running):
    """The stand-in and proxy of these tests."""

    def extraction_calls(self) -> int:
        return len(self.standin.get("/_standin/extraction_requests").json())

    def chat(self, user: str, text: str) -> None:
        self.openai().chat.completions.create(
            model="demo", user=user, messages=[{"role": "user", "content": text}]
        )

    def wait_calls(self, count: int, timeout_s: float = 20.0) -> int:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if (seen := self.extraction_calls()) >= count:
                return seen
            time.sleep(0.1)
        pytest.fail(f"{count} extraction calls expected; log:\n{self.log.read_text()[-3000:]}")


@pytest.fixture(scope="module")
def fstack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FailStack]:
    """Stand-in + proxy; tries 0.4 s apart (doubling), 3 tries, due after 2 messages."""
    folder = tmp_path_factory.mktemp("e2e-extraction-failures")
    with harness.stack(
        folder,
        stem="e2f",
        kind=FailStack,
        memory={
            "extraction": {
                "quiet_s": 0.3,
                "poll_s": 0.1,
                "every_messages": 2,
                "backoff_s": 0.4,
                "max_attempts": 3,
            }
        },
    ) as running:
        yield running


def _calls_after(stack: FailStack, seconds: float) -> int:
    time.sleep(seconds)
    return stack.extraction_calls()


def test_e10_an_extraction_model_answering_400_stops_being_called(fstack: FailStack) -> None:
    """E10 through a real proxy: the extraction model answers 400 to every call; while the
    user goes on chatting, it is called in rounds of 3 (the bounded tries, 0.4 s and 0.8 s
    apart), not once or twice per message, and then no more; a later message starts one new
    round of 3."""
    fstack.standin.delete("/_standin/requests").raise_for_status()
    fstack.standin.post(
        "/_standin/extraction_error", json={"status": 400, "message": "Invalid request"}
    ).raise_for_status()
    user = "u" + uuid.uuid4().hex[:8]
    for i in range(8):  # 16 messages, every one of them a trigger
        fstack.chat(user, f"message {i}: my cat is called Miso")
        time.sleep(0.15)
    fstack.wait_calls(3)
    # whole rounds of 3 tries, each given up; on a loaded machine the chat can outlast the
    # first round (1.2 s), and a message after a give-up starts one more round: at most two
    # rounds for these 16 messages, where the old code made about two calls per message
    calls = _calls_after(fstack, 3.0)
    assert calls == _calls_after(fstack, 2.0)  # and then no more
    assert calls in (3, 6), calls
    stats = fstack.redis.hgetall(f"{fstack.prefix}:stats")
    assert int(stats["jobs_given_up"]) == calls // 3
    assert "given up after 3 tries" in fstack.log.read_text()
    fstack.chat(user, "one more message")
    fstack.wait_calls(calls + 3)  # the new round: 3 tries again, then given up again
    assert _calls_after(fstack, 3.0) == calls + 3
    fstack.standin.post("/_standin/extraction_error", json={"status": 0}).raise_for_status()


def test_e10_a_context_error_through_the_proxy_skips_what_cannot_fit(fstack: FailStack) -> None:
    """E10 through a real proxy: every extraction call answers 400 "maximum context length":
    the batch is split down to one line, each line is skipped, the cursor reaches the last
    message and the model is not called again."""
    fstack.standin.delete("/_standin/requests").raise_for_status()
    fstack.standin.post(
        "/_standin/extraction_error",
        json={"status": 400, "message": CONTEXT_MESSAGE, "code": "context_length_exceeded"},
    ).raise_for_status()
    user = "u" + uuid.uuid4().hex[:8]
    for i in range(2):  # 4 messages
        fstack.chat(user, f"message {i}: my cat is called Miso")
    meta_key = f"{fstack.prefix}:{{master:{user}}}:c:demo:meta"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and fstack.redis.hget(meta_key, "cursor") != "4":
        time.sleep(0.1)
    assert fstack.redis.hget(meta_key, "cursor") == "4"
    calls = fstack.extraction_calls()
    assert calls <= 3 + 3  # 4, 2, 1 lines; then one call per remaining line
    assert _calls_after(fstack, 2.0) == calls
    fstack.standin.post("/_standin/extraction_error", json={"status": 0}).raise_for_status()
