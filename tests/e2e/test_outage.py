"""An agent through a real LiteLLM proxy keeps working while its private redis-server is down
(issue 9 items 1-2, D09): its tool steps wait in the outage buffer and are stored, in order,
once Redis is back."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from tests.integration.test_outage import AGENT_STEPS
from tests.support.redis_servers import RedisServer, free_ports, redis_binaries, wait_until

pytestmark = pytest.mark.skipif(redis_binaries() is None, reason="redis-server not installed")


TOOL = {
    "type": "function",
    "function": {"name": "weather", "parameters": {"type": "object", "properties": {}}},
}


def test_an_agent_through_the_proxy_keeps_working_during_an_outage(tmp_path: Path) -> None:
    """The same agent through a real LiteLLM proxy and the real openai client, on OpenAI's and
    Anthropic's wire formats, with the proxy's Redis stopped after the first turn: every tool
    result sent alone reaches the model after its call and the question (Anthropic's format
    puts a user message first), and once Redis is back the store holds every step in order."""
    from tests.support import harness

    [port] = free_ports(1)
    server = RedisServer(tmp_path / "redis", port, ("--appendonly", "yes")).start()
    (tmp_path / "stack").mkdir()
    claude = {
        "model_name": "claude",
        "litellm_params": {"model": "anthropic/claude-standin", "api_base": "BASE", "api_key": "x"},
        "model_info": {"memory": {"enabled": True}},
    }
    try:
        with harness.stack(
            tmp_path / "stack",
            stem="outage",
            extra_models=[claude],
            redis_env={"LITELLM_MEMORY_REDIS__URL": server.url},
            keys=redis.Redis.from_url(server.url, decode_responses=True),
        ) as running:
            client = running.openai()
            users = {"demo": f"agent-{port}-o", "claude": f"agent-{port}-a"}
            for model, user in users.items():
                running.script("Hello Ana.")
                client.chat.completions.create(
                    model=model, user=user, messages=[{"role": "user", "content": "I am Ana."}]
                )
            server.stop()
            for model, user in users.items():
                calls = [
                    {"id": f"call_{i}", "type": "function", "function": {"name": "weather"}}
                    for i in (1, 2)
                ]
                for call in calls:
                    call["function"]["arguments"] = "{}"
                running.script(
                    {"content": None, "tool_calls": [calls[0]]},
                    {"content": None, "tool_calls": [calls[1]]},
                    "Pune 31C, Goa 28C.",
                )
                question = {"role": "user", "content": "Weather in Pune and Goa?"}
                client.chat.completions.create(
                    model=model, user=user, tools=[TOOL], messages=[question]
                )
                for i, result in ((1, "31C"), (2, "28C")):
                    stream = i == 2
                    answer = client.chat.completions.create(
                        model=model,
                        user=user,
                        tools=[TOOL],
                        stream=stream,
                        messages=[{"role": "tool", "tool_call_id": f"call_{i}", "content": result}],
                    )
                    if stream:
                        text = "".join(
                            c.choices[0].delta.content or "" for c in answer if c.choices
                        )
                        assert text == "Pune 31C, Goa 28C."
                    body = running.chat_calls()[-1]
                    roles = [m["role"] for m in body["messages"] if m["role"] != "system"]
                    if model == "demo":
                        assert roles == ["user", *["assistant", "tool"] * i]
                        assert body["messages"][-2]["tool_calls"][0]["id"] == f"call_{i}"
                    else:  # tool_use blocks in the assistant's, tool_result in the user's
                        assert roles == ["user", *["assistant", "user"] * i]
                        uses = [b["id"] for b in body["messages"][-2]["content"]]
                        assert uses == [f"call_{i}"]
            server.start()
            expected = [("user", "I am Ana."), ("assistant", "Hello Ana."), *AGENT_STEPS]

            def stored() -> dict[str, list[tuple[str, str]]]:
                return {
                    model: [(t["role"], t["text"]) for t in running.turns(user, model)]
                    for model, user in users.items()
                }

            wait_until(lambda: stored() == dict.fromkeys(users, expected), 10, "the turns")
    finally:
        server.stop()
