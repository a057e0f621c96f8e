"""The stand-in answers a question from what it was given, through a real LiteLLM proxy with
the memory hook: the README's quick start."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

from tests.support import harness
from tests.support.prompt_view import without_tail
from tests.unit.test_standin_answers import _user


def test_quick_start_second_request_names_the_cat(tmp_path: Path) -> None:
    """The README's quick start through a real proxy: two requests that each send only the new
    message; the second reply names the cat (from the window). A new conversation of the same
    user, once the extraction ran, gets it from the extracted memories."""
    with harness.stack(
        tmp_path, stem="answers", memory={"extraction": {"quiet_s": 0.5}}
    ) as running:
        client = running.openai()
        user = "alice-" + uuid.uuid4().hex[:6]

        def ask(text: str, conversation: str | None = None) -> str:
            extra = {"metadata": {"conversation_id": conversation}} if conversation else None
            reply = client.chat.completions.create(
                model="demo", user=user, messages=[_user(text)], extra_body=extra
            )
            return reply.choices[0].message.content or ""

        assert ask("My cat is called Miso.") == "Noted: My cat is called Miso."
        assert ask("What is my cat called?") == "You told me: My cat is called Miso."
        deadline = time.monotonic() + 60
        memories: list[str] = []
        while time.monotonic() < deadline and not memories:
            listing = running.http.get(
                f"{running.proxy}/memory/v1/memories",
                params={"user": user, "model": "demo"},
                headers={"Authorization": f"Bearer {harness.MASTER_KEY}"},
            )
            assert listing.status_code == 200, listing.text
            memories = [m["text"] for m in listing.json()["memories"]]
            time.sleep(0.3)
        assert memories == ["User: My cat is called Miso."]
        assert ask("Remind me, what is my cat called?", "another") == (
            "You told me: My cat is called Miso."
        )
        body = running.chat_calls()[-1]
        assert "My cat is called Miso." in body["messages"][0]["content"]
        # the new conversation has no window: the head, the tail, the question
        assert [m["role"] for m in without_tail(body["messages"])] == ["system", "user"]
