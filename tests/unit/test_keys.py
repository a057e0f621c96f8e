"""Key names, hash tags and id validation."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from redis.crc import key_slot

from litellm_memory_hook.errors import InvalidIdError
from litellm_memory_hook.store.keys import (
    ConversationKeys,
    conversation_scope,
    is_usable_user_id,
    key_id,
    user_scope,
)


def _every_key_of_a_user(keys: ConversationKeys) -> list[str]:
    user = keys.user_keys
    return [
        *keys.all(),
        user.index,
        user.forgets,
        *user.memory_set(user_scope("demo")).all(),
        *user.memory_set(conversation_scope(keys.conversation)).all(),
        *user.keys_of(keys.index_member),
        *user.keys_of(user_scope("demo")),
        *user.conversation("other").all(),
    ]


def test_all_keys_of_a_user_map_to_one_cluster_slot() -> None:
    """Every key of a user (conversations, memory sets of both scopes, the index) carries the
    hash tag {tenant:user}, so one slot: the pre-call read is one round trip and every script
    stays in one slot (case C28, issue 7)."""
    keys = ConversationKeys.for_ids("mem", "master", "u-A", "c7")
    slots = {key_slot(k.encode()) for k in _every_key_of_a_user(keys)}
    assert len(slots) == 1
    assert keys.turns == "mem:{master:u-A}:c:c7:turns"
    assert keys.user_keys.memory_set(user_scope("demo")).pinned == "mem:{master:u-A}:ns:demo:pinned"
    assert keys.user_keys.index == "mem:{master:u-A}:index"


def test_user_and_conversation_memory_scopes_never_collide() -> None:
    """A namespace and a conversation with the same name give different memory sets."""
    user = ConversationKeys.for_ids("mem", "t", "u", "x").user_keys
    assert (
        user.memory_set(user_scope("x")).pinned != user.memory_set(conversation_scope("x")).pinned
    )


@given(st.text(min_size=1), st.text(min_size=1), st.text(min_size=1))
def test_any_ids_give_one_slot_and_no_braces_inside_the_tag(t: str, u: str, c: str) -> None:
    """Ids with braces, colons or any script are hashed, never moving the slot (STYLE.md 2)."""
    if not (t.strip() and u.strip() and c.strip()):
        return
    keys = ConversationKeys.for_ids("mem", t, u, c)
    assert "{" not in keys.ref and "}" not in keys.ref and keys.ref.count(":") == 2
    assert len({key_slot(k.encode()) for k in _every_key_of_a_user(keys)}) == 1
    assert ConversationKeys.from_ref("mem", keys.ref) == keys


def test_plain_ids_stay_readable_and_others_are_hashed() -> None:
    """Plain ids are used as they are; braces, spaces and other scripts become h-<sha256>."""
    assert key_id("alice@example.com") == "alice@example.com"
    assert key_id("a{b}").startswith("h-") and len(key_id("a{b}")) == 26
    assert key_id("सीमा") == key_id("सीमा") != key_id("सीम")
    assert key_id("h-spoof").startswith("h-") and key_id("h-spoof") != "h-spoof"
    with pytest.raises(InvalidIdError):
        key_id("  ")


@pytest.mark.parametrize(
    "value", [None, "", "  ", "default_user_id", "None", "undefined", "\u200b", True, 4.5, {}]
)
def test_placeholder_user_ids_never_get_memory(value: object) -> None:
    """Missing, empty, invisible and placeholder user ids are not usable (DESIGN.md section 3)."""
    assert not is_usable_user_id(value)


def test_numeric_and_padded_user_ids() -> None:
    """A numeric id is its decimal text; padding is kept (an id is used exactly as sent, issue 9
    item 6), so "  alice  " is not "alice"; the CLI and the proxy use the same function."""
    from litellm_memory_hook.store.keys import normalize_user_id

    assert normalize_user_id(12345) == "12345"
    assert normalize_user_id("  alice  ") == "  alice  "
    assert key_id("  alice  ") != key_id("alice")


def test_global_keys_carry_no_user_tag_and_users_spread_over_slots() -> None:
    """The global keys (due set, counters, sweep lease) are never in a user's slot by
    construction (no hash tag), and different users land in different slots, so a Cluster
    spreads them (case C28: global keys are never in a transaction with a user's keys)."""
    from litellm_memory_hook.store.keys import due_key, stats_key, sweep_key

    for name in (due_key("mem"), stats_key("mem"), sweep_key("mem")):
        assert "{" not in name and "}" not in name
    slots = {
        key_slot(ConversationKeys.for_ids("mem", "master", f"u{i}", "c").turns.encode())
        for i in range(200)
    }
    assert len(slots) > 150


def test_metrics_keys_share_one_slot_apart_from_users() -> None:
    """The metric snapshots and their index are in one Cluster slot (a scrape reads them with
    one MGET), start with the prefix (the prefix's SCAN sees them) and carry a tag that is no
    user's ``{tenant:user}``."""
    from litellm_memory_hook.store.keys import metrics_index_key, metrics_snapshot_key

    names = [
        metrics_index_key("mem"),
        metrics_snapshot_key("mem", "web-1:12:abcdef"),
        metrics_snapshot_key("mem", "other.host:99999:012345"),
    ]
    assert len({key_slot(k.encode()) for k in names}) == 1
    assert all(k.startswith("mem:{metrics}:") for k in names)
    user = ConversationKeys.for_ids("mem", "mem", "metrics", "c")
    assert user.user_keys.hash_tag != "{metrics}"
    assert metrics_index_key("mem") not in (*user.all(), user.user_keys.index)


def test_bad_tags_are_rejected() -> None:
    """A due-set entry that is not t:u:c cannot be turned into keys."""
    with pytest.raises(InvalidIdError):
        ConversationKeys.from_ref("mem", "a:b")


def test_tenants_from_key_tokens_never_collide_or_leak() -> None:
    """Keys sharing a long prefix, JWT tokens and raw custom-auth keys give distinct tenants
    that do not contain the key text."""
    from litellm_memory_hook.proxy.identity import tenant_from_auth

    class Auth:
        team_id = None
        user_id = None

        def __init__(self, token: str) -> None:
            self.token = token

    a = tenant_from_auth(Auth("acme-prod-service-key-0001"))
    b = tenant_from_auth(Auth("acme-prod-service-key-0002"))
    jwt1 = tenant_from_auth(Auth("hashed-jwt-" + "f04ee" + "0" * 59))
    jwt2 = tenant_from_auth(Auth("hashed-jwt-" + "f04ee" + "1" * 59))
    assert len({a, b, jwt1, jwt2}) == 4
    assert all("acme" not in t and "jwt" not in t for t in (a, b, jwt1, jwt2))
    assert tenant_from_auth(Auth("litellm_proxy_master_key")) == "master"


def test_a_trailing_newline_is_not_a_plain_id() -> None:
    """An id ending in a line break is hashed, never put into a key as it is."""
    assert key_id("team-abc\n").startswith("h-")
