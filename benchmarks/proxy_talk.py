"""What the clients of ``bench proxy`` send: the two aliases (memory on, memory off) and a
deterministic companion chat per user (:func:`conversation_lines`), the same text on both sides."""

from __future__ import annotations

import random

MEMORY_ALIAS = "bench-memory"
PLAIN_ALIAS = "bench-plain"
SYSTEM_PROMPT = "You are Mira, a warm and concise companion."

_NAMES = ("Seema", "Arjun", "Lena", "Tom", "Mei", "Carlos", "Aisha", "Jonas", "Priya", "Sam")
_PLACES = ("Lisbon", "Pune", "the lake", "my aunt's farm", "Osaka", "the old library", "Berlin")
_THINGS = (
    "pottery",
    "the guitar",
    "running",
    "baking bread",
    "my thesis",
    "the garden",
    "chess",
    "a new job",
    "the dog",
    "painting",
)
_FEELINGS = ("tired", "excited", "a bit nervous", "happy", "stressed", "calm", "proud")
_TEMPLATES = (
    "I went to {place} with {name} yesterday and we talked about {thing} for hours.",
    "Honestly I feel {feeling} today. Work was long and {name} kept calling me about {thing}.",
    "Do you remember what I told you about {thing}? I finally tried it again this weekend.",
    "My sister {name} is moving to {place} next month, so I'm helping her pack.",
    "I started {thing} again after a long break. It helps me relax after work.",
    "What should I cook tonight? {name} is coming over and I want something simple.",
    "We had a long talk about {thing} and I realised I still love it, even when it is hard.",
    "The trip to {place} is booked! I'm {feeling} about it, we leave on Friday morning.",
    "Can you remind me why I stopped {thing}? I think it was around the time I moved.",
    "{name} gave me a book about {thing}. I read the first chapter on the train.",
    "Today was {feeling}. I spent the afternoon at {place} and forgot my phone at home.",
    "I keep thinking about what {name} said about {thing}. Maybe they are right.",
    "Quick question: is it normal to feel {feeling} before a big change like this?",
    "Guess what, I finished the first part of {thing}! It took me three weeks.",
    "We are planning a small party at {place} for {name}'s birthday in two weeks.",
    "I'm not sure about {thing} anymore. It takes so much time and I'm always {feeling}.",
)


def conversation_lines(seed: int, count: int) -> list[str]:
    """``count`` user messages of a companion chat (1-3 sentences, ~60-300 characters),
    deterministic for ``seed``; consecutive messages share names and topics, so recall has
    something to find."""
    rng = random.Random(seed)
    lines: list[str] = []
    name, place, thing = rng.choice(_NAMES), rng.choice(_PLACES), rng.choice(_THINGS)
    for _ in range(count):
        if rng.random() < 0.3:
            name, place, thing = rng.choice(_NAMES), rng.choice(_PLACES), rng.choice(_THINGS)
        sentences = [
            rng.choice(_TEMPLATES).format(
                name=name, place=place, thing=thing, feeling=rng.choice(_FEELINGS)
            )
            for _ in range(rng.choice((1, 1, 2, 2, 3)))
        ]
        lines.append(" ".join(sentences))
    return lines


class Conversations:
    """Each user's next line, counted separately per alias so both sides send the same text."""

    def __init__(self, users: int, seed: int) -> None:
        self._lines = [conversation_lines(seed * 1000 + i, 500) for i in range(users)]
        self._next: dict[tuple[str, int], int] = {}

    def next_line(self, alias: str, user: int) -> str:
        at = self._next.get((alias, user), 0)
        self._next[(alias, user)] = at + 1
        lines = self._lines[user]
        return f"{lines[at % len(lines)]} ({at})"

    def history(self, user: int, messages: int) -> list[dict[str, str]]:
        """A whole earlier conversation of ``messages`` messages (user and assistant lines)."""
        rng = random.Random(user)
        out: list[dict[str, str]] = []
        for i in range(messages):
            text = conversation_lines(user * 7919 + i, 1)[0]
            if i % 2:
                out.append(
                    {"role": "assistant", "content": f"That sounds {rng.choice(_FEELINGS)}. {text}"}
                )
            else:
                out.append({"role": "user", "content": text})
        return out


__all__ = ["MEMORY_ALIAS", "PLAIN_ALIAS", "SYSTEM_PROMPT", "Conversations", "conversation_lines"]
