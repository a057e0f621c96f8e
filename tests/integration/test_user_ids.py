"""User ids to keys is injective: two different ids never share memory (issue 9 item 6).

``normalize_user_id`` keeps an id exactly as sent (no stripping, folding or normalising), and
``key_id`` hashes every id outside the plain set, so ``"victim\\u3000"``, ``" victim"`` and
``"victim\\u2028"`` are users of their own. Empty, invisible-only and placeholder ids still get no
memory; numeric ids still work. Chat, the memory API and the CLI use the same function.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import redis.asyncio as aioredis
from hypothesis import example, given, settings
from hypothesis import strategies as st

from litellm_memory_hook.memory_api import MemoryInputError, resolve_target
from litellm_memory_hook.proxy.hook import MemoryHook
from litellm_memory_hook.proxy.identity import identify
from litellm_memory_hook.settings import MemorySettings, parse_alias_config
from litellm_memory_hook.store.keys import (
    PLACEHOLDER_IDS,
    ConversationKeys,
    UserKeys,
    key_id,
    normalize_user_id,
)
from tests.support.hook_calls import ALIASES, Auth, chat_request, model_response

LOOKALIKES = [
    " victim",
    "victim ",
    "victim\u3000",
    "victim\u2028",
    "victim\u2029",
    "victim\n",
    "\tvictim",
    "victim\u00a0",
    "victim\u200b",
    "\ufeffvictim",
    "vict\u200bim",
    "Victim",
    "VICTIM",
    "ｖｉｃｔｉｍ",  # full-width
    "victim\u0000",
    "h-victim",
]


def _tag(user: object, tenant: str = "master") -> str | None:
    normal = normalize_user_id(user)
    return None if normal is None else UserKeys.for_ids("mem", tenant, normal).hash_tag


@pytest.mark.parametrize("lookalike", LOOKALIKES)
def test_lookalikes_are_users_of_their_own(lookalike: str) -> None:
    """Each look-alike of "victim" is accepted as it is and maps to another hash tag."""
    assert normalize_user_id(lookalike) == lookalike
    assert _tag(lookalike) not in (None, _tag("victim"))


@pytest.mark.parametrize(
    "value",
    [
        None,
        "",
        " ",
        "\u3000",
        "\u2028",
        "\u200b\u200b",
        "\t\n",
        "default_user_id",
        " default_user_id ",
        "DEFAULT_USER_ID",
        "undefined\u200b",
        "\ud800",
        True,
        4.5,
        {},
        [],
    ],
)
def test_ids_without_memory(value: object) -> None:
    """Empty, invisible-only, placeholder (any case, any padding), not-UTF-8 and non-string ids
    get no memory (DESIGN.md section 3)."""
    assert normalize_user_id(value) is None


def test_numeric_ids_are_their_decimal_text() -> None:
    """A numeric id and its decimal text are one user; nothing else is folded."""
    assert normalize_user_id(12345) == "12345" == normalize_user_id("12345")
    assert _tag(12345) == _tag("12345") != _tag(" 12345")


_invisible = st.sampled_from([" ", "\u3000", "\u2028", "\u00a0", "\u200b", "\n", "\t", "\ufeff"])
_near = st.builds(
    lambda base, pre, post: pre + base + post,
    st.sampled_from(["victim", "alice", "12345", "default_user_id", "h-abc"]),
    st.text(_invisible, max_size=2),
    st.text(_invisible, max_size=2),
)
_ids = st.one_of(st.text(max_size=80), _near, st.integers(min_value=0, max_value=10**6))


@settings(max_examples=400)
@given(_ids, _ids)
@example(" victim", "victim")
@example("victim\u3000", "victim")
@example("victim\u2028", "victim")
def test_two_different_accepted_ids_never_share_a_key(a: object, b: object) -> None:
    """Property: ids a, b that both get memory and are different ids (numbers compared as their
    decimal text) have different hash tags, so no key of one is a key of the other."""
    na, nb = normalize_user_id(a), normalize_user_id(b)
    if na is None or nb is None:
        return
    assert (na == nb) == (str(a) == str(b))
    assert (_tag(a) == _tag(b)) == (na == nb)
    keys_a = ConversationKeys.for_ids("mem", "master", na, "demo")
    keys_b = ConversationKeys.for_ids("mem", "master", nb, "demo")
    assert (keys_a.turns == keys_b.turns) == (na == nb)


@given(st.text(min_size=1, max_size=40), st.text(min_size=1, max_size=40))
def test_key_ids_are_injective(a: str, b: str) -> None:
    """key_id: plain ids map to themselves, every other id to h-<sha256>; plain ids never start
    with h-, so the two ranges never meet."""
    if not a.strip() or not b.strip():
        return
    assert (key_id(a) == key_id(b)) == (a == b)
    assert "{" not in key_id(a) and "}" not in key_id(a) and ":" not in key_id(a)


def _lookup(name: str) -> Any:
    return parse_alias_config(ALIASES.get(name))


@pytest.mark.parametrize("lookalike", [" victim", "victim\u3000", "victim\u2028"])
def test_chat_memory_api_and_cli_name_the_same_user(lookalike: str) -> None:
    """A chat request, the memory API (resolve_target) and the CLI (normalize_user_id, as
    tools/cli.py does) map an id to the same keys, and a look-alike to other keys."""
    settings_ = MemorySettings(key_prefix="mem")
    for user in ("victim", lookalike):
        who = identify(
            {"model": "demo", "user": user, "messages": []}, Auth(), prefix="mem", namespace="demo"
        )
        target = resolve_target(settings_, _lookup, tenant="master", user=user, model="demo")
        assert who is not None
        assert (who.keys, who.memory) == (target.conversation, target.memory)
    victim = resolve_target(settings_, _lookup, tenant="master", user="victim", model="demo")
    other = resolve_target(settings_, _lookup, tenant="master", user=lookalike, model="demo")
    assert victim.memory != other.memory and victim.conversation != other.conversation
    with pytest.raises(MemoryInputError):
        resolve_target(settings_, _lookup, tenant="master", user=" \u3000 ", model="demo")


async def _chat(hook: MemoryHook, user: str, text: str, call_id: str) -> dict[str, Any]:
    data = chat_request(text, user=user, call_id=call_id)
    out = await hook.async_pre_call_hook(Auth(), None, data, "acompletion")
    assert out is not None
    await hook.async_post_call_success_hook(out, Auth(), model_response("ok"))
    return out


async def test_lookalike_users_neither_read_nor_write_the_victims_memory(
    hook: MemoryHook, any_redis: aioredis.Redis, prefix: str
) -> None:
    """Through the hook: "victim" stores a secret; " victim", "victim\\u3000" and "victim\\u2028"
    never see it in what reaches the model, and their turns land in keys of their own."""
    await _chat(hook, "victim", "My locker code is 4711.", "v1")
    for index, lookalike in enumerate([" victim", "victim\u3000", "victim\u2028"]):
        out = await _chat(hook, lookalike, "What is my locker code?", f"x{index}")
        assert "4711" not in json.dumps(out["messages"], ensure_ascii=False)
        own = ConversationKeys.for_ids(prefix, "master", lookalike, "demo")
        assert await any_redis.zcard(own.turns) == 2
    victim = ConversationKeys.for_ids(prefix, "master", "victim", "demo")
    assert await any_redis.zcard(victim.turns) == 2
    meta = await any_redis.hgetall(
        ConversationKeys.for_ids(prefix, "master", " victim", "demo").meta
    )
    assert meta[b"user"] == b" victim"


def test_placeholders_are_still_placeholders() -> None:
    """Every listed placeholder, in any case, gets no memory."""
    for placeholder in PLACEHOLDER_IDS:
        assert normalize_user_id(placeholder) is None
        assert normalize_user_id(placeholder.upper()) is None
