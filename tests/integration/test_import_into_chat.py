"""Lines imported into a conversation that already holds chat (`litellm-memory import` into the
conversation a client is chatting in): the chatting client never sent them.

Found by a fresh-user run and then by hand: a whole-history client's next request took the
imported lines, stored after its turns, for messages it had deleted and replaced them with its
new turn (the import was lost), and a new-message-only client's recent window showed lines said
years before the chat as the newest messages. Each test drives the real hook (fake Redis, real
Redis and the Cluster) through the client's requests and holds the exact stored turns, the
messages the model gets, or the recalled lines.
"""

from __future__ import annotations

import json
from typing import Any

import redis.asyncio as aioredis
from litellm.types.utils import ModelResponse

from litellm_memory_hook.core.models import Turn, stored_text
from litellm_memory_hook.engine.identity import Identity
from litellm_memory_hook.proxy.hook import MemoryHook
from litellm_memory_hook.store.keys import ConversationKeys, user_scope
from litellm_memory_hook.tools.histories import HistoryLine
from litellm_memory_hook.tools.importer import import_lines
from tests.support.hook_calls import Auth, Clock, make_hook
from tests.support.prompt_view import memory_text, without_tail

USER = "ana"
DAY_MS = 86_400_000


class Client:
    """One user's requests through the hook on ``redis``; the reply is stored after each."""

    def __init__(self, redis: aioredis.Redis, prefix: str, clock: Clock) -> None:
        self.clock = clock
        self.hook: MemoryHook = make_hook(redis, prefix)
        self.keys = ConversationKeys.for_ids(prefix, "master", USER, "demo")
        memory = self.keys.user_keys.memory_set(user_scope("demo"))
        self.who = Identity("master", USER, "demo", "demo", self.keys, memory, "demo")
        self.requests = 0

    async def send(self, messages: list[dict[str, Any]], reply: str) -> list[dict[str, Any]]:
        """One request; returns the messages the model got."""
        self.requests += 1
        data = {
            "model": "demo",
            "user": USER,
            "messages": messages,
            "litellm_call_id": f"req-{self.requests}",
        }
        self.clock.ms += 60_000  # a minute apart: no request is another's parallel one
        out = await self.hook.async_pre_call_hook(Auth(), None, data, "acompletion")
        sent = list(out["messages"])
        response = ModelResponse(
            id="r",
            choices=[
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": reply},
                    "finish_reason": "stop",
                }
            ],
        )
        await self.hook.async_post_call_success_hook(out, Auth(), response)
        await self.hook.drain()
        return sent

    async def import_(self, *lines: tuple[str, str, int]) -> None:
        await import_lines(self.hook.store, self.who, [HistoryLine(r, t, ts) for r, t, ts in lines])

    async def turns(self) -> list[tuple[str, str]]:
        return [(t.role, t.text) for t in await self.stored()]

    async def stored(self) -> list[Turn]:
        return await self.hook.store.all_turns(self.keys)


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def reply(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def texts(messages: list[dict[str, Any]]) -> list[str]:
    """The texts of the messages after the system message."""
    return [str(m["content"]) for m in without_tail(messages)[1:]]


CAT_Q, CAT_A = "What is my cat called?", "Your cat is Tom."
OLD = (("user", "I adopted a parrot named Kiwi", DAY_MS), ("assistant", "Lovely", DAY_MS + 1000))


async def test_a_whole_history_client_keeps_lines_imported_after_its_chat(
    any_redis: aioredis.Redis, prefix: str, clock: Clock
) -> None:
    """The client's history matches the stored chat; the imported lines after it are not
    messages it deleted. Before the fix, its next request replaced them with its new turn, and
    a regenerate after that would have too."""
    client = Client(any_redis, prefix, clock)
    await client.send([user(CAT_Q)], CAT_A)
    await client.import_(*OLD)
    history = [user(CAT_Q), reply(CAT_A), user("And my dog?")]
    sent = await client.send(history, "Your dog is Rex.")
    assert texts(sent) == [CAT_Q, CAT_A, "And my dog?"]  # the client's messages as sent
    expected = [
        ("user", CAT_Q),
        ("assistant", CAT_A),
        ("user", "I adopted a parrot named Kiwi"),
        ("assistant", "Lovely"),
        ("user", "And my dog?"),
        ("assistant", "Your dog is Rex."),
    ]
    assert await client.turns() == expected
    # the same question again: a regenerate replaces the reply, and only the reply
    await client.send(history, "Rex, your dog.")
    assert await client.turns() == [*expected[:-1], ("assistant", "Rex, your dog.")]
    # an edit of the last question replaces that exchange, and only it
    await client.send([user(CAT_Q), reply(CAT_A), user("And my fish?")], "Nemo.")
    assert await client.turns() == [*expected[:4], ("user", "And my fish?"), ("assistant", "Nemo.")]


async def test_lines_imported_during_a_chat_are_kept_whatever_their_time(
    any_redis: aioredis.Redis, prefix: str, clock: Clock
) -> None:
    """Lines dated after the chat so far (another app's log of the same days) are not the
    whole-history client's either."""
    client = Client(any_redis, prefix, clock)
    await client.send([user(CAT_Q)], CAT_A)
    now = (await client.stored())[-1].ts_ms
    await client.import_(("user", "Kiwi learned a new word", now + 1000))
    await client.send([user(CAT_Q), reply(CAT_A), user("And my fish?")], "Nemo.")
    assert await client.turns() == [
        ("user", CAT_Q),
        ("assistant", CAT_A),
        ("user", "Kiwi learned a new word"),
        ("user", "And my fish?"),
        ("assistant", "Nemo."),
    ]


async def test_the_recent_window_shows_the_chat_and_recall_finds_the_imported_lines(
    any_redis: aioredis.Redis, prefix: str, clock: Clock
) -> None:
    """A new-message-only client: the window held the imported lines as the newest messages;
    it now holds the chat, and a question about them recalls them (with their date)."""
    client = Client(any_redis, prefix, clock)
    await client.send([user(CAT_Q)], CAT_A)
    await client.import_(*OLD)
    sent = await client.send([user("What colour is a parrot like Kiwi?")], "Green.")
    assert texts(sent) == [CAT_Q, CAT_A, "What colour is a parrot like Kiwi?"]
    system = memory_text(sent)
    assert "I adopted a parrot named Kiwi" in system  # recalled, as an earlier line
    assert await client.turns() == [
        ("user", CAT_Q),
        ("assistant", CAT_A),
        ("user", "I adopted a parrot named Kiwi"),
        ("assistant", "Lovely"),
        ("user", "What colour is a parrot like Kiwi?"),
        ("assistant", "Green."),
    ]


async def test_a_long_import_after_chat_is_marked_and_never_fills_the_window(
    any_redis: aioredis.Redis, prefix: str, clock: Clock
) -> None:
    """More imported lines than the tail read: the newest stored turns are all imported, so the
    tail alone cannot tell; the importer marks each line `joined`, and the window shows only
    the chat."""
    client = Client(any_redis, prefix, clock)
    await client.send([user(CAT_Q)], CAT_A)
    await client.import_(
        *(
            (("user", "assistant")[i % 2], f"old line {i} about parrots", DAY_MS + i)
            for i in range(80)
        )
    )
    stored = await client.stored()
    assert [t.joined for t in stored] == [False, False] + [True] * 80
    assert json.loads((await any_redis.zrange(client.keys.turns, -1, -1))[0])["joined"] is True
    sent = await client.send([user("And my dog?")], "Rex.")
    assert texts(sent) == ["And my dog?"]  # the chat in the tail read: none, the question
    sent = await client.send([user("And my fish?")], "Nemo.")
    assert texts(sent) == ["And my dog?", "Rex.", "And my fish?"]


async def test_a_history_imported_first_is_the_conversation_a_client_goes_on_from(
    any_redis: aioredis.Redis, prefix: str, clock: Clock
) -> None:
    """Unchanged: lines imported into a new conversation are its history, shown in the window
    (not marked), and a whole-history client that sends them too matches them."""
    client = Client(any_redis, prefix, clock)
    await client.import_(*OLD)
    assert [t.joined for t in await client.stored()] == [False, False]
    sent = await client.send([user("Does Kiwi talk?")], "A little.")
    assert texts(sent) == ["I adopted a parrot named Kiwi", "Lovely", "Does Kiwi talk?"]
    history = [user(OLD[0][1]), reply(OLD[1][1]), user("Does Kiwi talk?"), reply("A little.")]
    await client.send([*history, user("What does she say?")], "Hello.")
    assert [text for _, text in await client.turns()] == [
        "I adopted a parrot named Kiwi",
        "Lovely",
        "Does Kiwi talk?",
        "A little.",
        "What does she say?",
        "Hello.",
    ]


def test_stored_text_of_a_joined_turn_round_trips() -> None:
    """The mark is stored in the member and parsed back; a turn without it is not joined."""
    turn = Turn("user", "hello there", 5, seq=3, joined=True)
    member = '{"seq":3,' + turn.body_json()
    assert Turn.from_member(member).joined is True
    assert stored_text(json.loads(member)) == "hello there"
    assert Turn.from_member('{"seq":4,' + Turn("user", "hi", 6, seq=4).body_json()).joined is False
