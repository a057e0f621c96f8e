"""Key names, hash tags and id validation."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from redis.crc import key_slot

from litellm_memory_hook.errors import InvalidIdError
from litellm_memory_hook.store.keys import ConversationKeys, is_usable_user_id, key_id


def test_all_keys_of_a_conversation_map_to_one_cluster_slot() -> None:
    """Every per-conversation key carries the same hash tag, so one slot (case C28)."""
    keys = ConversationKeys.for_ids("mem", "master", "u-A", "c7")
    slots = {key_slot(k.encode()) for k in keys.all()}
    assert len(slots) == 1
    assert keys.turns == "mem:{master:u-A:c7}:turns"


@given(st.text(min_size=1), st.text(min_size=1), st.text(min_size=1))
def test_any_ids_give_one_slot_and_no_braces_inside_the_tag(t: str, u: str, c: str) -> None:
    """Ids with braces, colons or any script are hashed, never moving the slot (STYLE.md 2)."""
    if not (t.strip() and u.strip() and c.strip()):
        return
    keys = ConversationKeys.for_ids("mem", t, u, c)
    assert "{" not in keys.tag and "}" not in keys.tag and keys.tag.count(":") == 2
    assert len({key_slot(k.encode()) for k in keys.all()}) == 1
    assert ConversationKeys.from_tag("mem", keys.tag) == keys


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
    """A numeric id is its decimal text; padding is stripped, so the CLI and the proxy agree."""
    from litellm_memory_hook.store.keys import normalize_user_id

    assert normalize_user_id(12345) == "12345"
    assert normalize_user_id("  alice  ") == "alice"


def test_bad_tags_are_rejected() -> None:
    """A due-set entry that is not t:u:c cannot be turned into keys."""
    with pytest.raises(InvalidIdError):
        ConversationKeys.from_tag("mem", "a:b")


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
