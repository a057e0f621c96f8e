"""A caller with no identity has no tenant (issue 27 item 7): an authentication that carries no
team, no usable user id and no key (a ``custom_auth`` returning a bare ``UserAPIKeyAuth()``) gets
no memory: its chat requests pass through with the alias's rules only, counted as outcome
``no_tenant``, nothing is stored, and the memory API answers it 403. Before, such callers became
the tenant ``master`` and shared memory with each other and with the master key. The master key
stays the tenant ``master``.

Unit checks of :func:`tenant_from_auth` and the hook on fakeredis and the real Redis. Through a
real LiteLLM proxy: tests/e2e/test_no_tenant.py."""

from __future__ import annotations

import json

import pytest
import redis.asyncio as aioredis
from fastapi import HTTPException
from litellm.proxy._types import UserAPIKeyAuth
from prometheus_client.parser import text_string_to_metric_families

from litellm_memory_hook.proxy.hook import MemoryHook
from litellm_memory_hook.proxy.identity import identify, tenant_from_auth
from litellm_memory_hook.proxy.metrics import HookMetrics
from litellm_memory_hook.proxy.routes import caller_tenant
from tests.support.hook_calls import Auth, chat_request, model_response

ANON_1, ANON_2 = "sk-anon-1", "sk-anon-2"
RULES = "You are Mira, a warm and concise companion."  # the demo alias's system_prompt


# -- who has a tenant ---------------------------------------------------------------------------


def test_a_bare_authentication_has_no_tenant() -> None:
    """No team, no user id and no key: no tenant. A placeholder user id is no identity either;
    an empty or blank token is no key."""
    assert tenant_from_auth(UserAPIKeyAuth()) is None
    assert tenant_from_auth(UserAPIKeyAuth(user_id="default_user_id")) is None
    assert tenant_from_auth(Auth(token="", user_id=None)) is None
    assert tenant_from_auth(Auth(token="   ", user_id="anonymous")) is None
    assert tenant_from_auth(object()) is None


def test_the_master_key_and_real_identities_keep_their_tenants() -> None:
    """The master key (LiteLLM's alias for it, with the admin's placeholder user id) is
    ``master``; a team, a user and a key each give their own tenant, as before."""
    master = UserAPIKeyAuth(api_key="litellm_proxy_master_key", user_id="default_user_id")
    assert tenant_from_auth(master) == "master"
    assert tenant_from_auth(Auth()) == "master"
    assert tenant_from_auth(UserAPIKeyAuth(team_id="acme")) == "team-acme"
    assert tenant_from_auth(UserAPIKeyAuth(user_id="ann")) == "user-ann"
    key = tenant_from_auth(UserAPIKeyAuth(api_key="sk-some-virtual-key"))
    assert key is not None and key.startswith("key-") and len(key) == 28


def test_identify_gives_no_identity_without_a_tenant() -> None:
    """identify() never builds keys for a caller without a tenant, whatever the user id."""
    data = chat_request(user="alice")
    assert identify(data, UserAPIKeyAuth(), prefix="p", namespace="demo") is None
    who = identify(data, Auth(), prefix="p", namespace="demo")
    assert who is not None and who.tenant == "master" and who.user == "alice"


def test_the_memory_api_refuses_a_caller_without_identity() -> None:
    """The memory API's tenant of a bare authentication is a 403 naming why; the master key's
    is ``master``."""
    with pytest.raises(HTTPException) as info:
        caller_tenant(UserAPIKeyAuth())
    assert info.value.status_code == 403
    assert "no team, user or key id" in str(info.value.detail)
    assert caller_tenant(Auth()) == "master"


# -- the hook -----------------------------------------------------------------------------------


async def test_the_hook_gives_no_memory_to_a_caller_without_identity(
    hook: MemoryHook, any_redis: aioredis.Redis, prefix: str
) -> None:
    """The master key's turn is stored and recalled; the same user id sent by a caller without
    identity gets the alias's rules only (nothing of the master's), its turn is never stored,
    and the request counts as outcome no_tenant."""
    first = chat_request("My cat is called Miso.", user="alice", call_id="m-1")
    await hook.async_pre_call_hook(Auth(), None, first, "acompletion")
    await hook.async_post_call_success_hook(first, Auth(), model_response("Noted."))
    await hook.drain()
    keys_before = sorted([k async for k in any_redis.scan_iter(match=f"{prefix}:*")])
    assert keys_before  # the master's turn is stored

    anon = chat_request("What is my cat called?", user="alice", call_id="a-1")
    out = await hook.async_pre_call_hook(UserAPIKeyAuth(), None, anon, "acompletion")
    assert out is not None and out["messages"] == [
        {"role": "system", "content": "You are Mira."},
        {"role": "user", "content": "What is my cat called?"},
    ]
    await hook.async_post_call_success_hook(anon, UserAPIKeyAuth(), model_response("No idea."))
    await hook.drain()
    assert sorted([k async for k in any_redis.scan_iter(match=f"{prefix}:*")]) == keys_before
    assert hook.counters["no_tenant_passthrough"] == 1
    assert not hook.counters["no_user_passthrough"] and not hook.counters["precall_errors"]

    again = chat_request("What is my cat called?", user="alice", call_id="m-2")
    await hook.async_pre_call_hook(Auth(), None, again, "acompletion")
    assert "Miso" in json.dumps(again["messages"])  # the master still has its memory


def test_no_tenant_is_an_outcome_of_the_requests_metric() -> None:
    """The counter maps to litellm_memory_requests_total{outcome="no_tenant"}."""
    from collections import Counter

    text = HookMetrics(Counter(no_tenant_passthrough=3)).render().decode()
    assert _no_tenant_requests(text) == 3


# -- through a real proxy -----------------------------------------------------------------------


def _no_tenant_requests(metrics_text: str) -> float:
    """litellm_memory_requests_total{outcome="no_tenant"} summed over the processes."""
    return sum(
        sample.value
        for family in text_string_to_metric_families(metrics_text)
        for sample in family.samples
        if sample.name == "litellm_memory_requests_total"
        and sample.labels.get("outcome") == "no_tenant"
    )
