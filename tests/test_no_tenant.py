"""A caller with no identity has no tenant (issue 27 item 7): an authentication that carries no
team, no usable user id and no key (a ``custom_auth`` returning a bare ``UserAPIKeyAuth()``) gets
no memory: its chat requests pass through with the alias's rules only, counted as outcome
``no_tenant``, nothing is stored, and the memory API answers it 403. Before, such callers became
the tenant ``master`` and shared memory with each other and with the master key. The master key
stays the tenant ``master``.

Unit checks of :func:`tenant_from_auth`, the hook on fakeredis and the real Redis, and a real
LiteLLM proxy with ``tests/custom_auth_no_identity.py`` (two anonymous keys and the master key)."""

from __future__ import annotations

import json
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis
from fastapi import HTTPException
from litellm.proxy._types import UserAPIKeyAuth
from prometheus_client.parser import text_string_to_metric_families

from litellm_memory_hook.proxy.hook import MemoryHook
from litellm_memory_hook.proxy.identity import identify, tenant_from_auth
from litellm_memory_hook.proxy.metrics import HookMetrics
from litellm_memory_hook.proxy.routes import caller_tenant

from . import harness
from .conftest import Auth, chat_request, model_response

HERE = Path(__file__).resolve().parent
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


@pytest.fixture(scope="module")
def anon_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[harness.Running]:
    """Stand-in + proxy whose custom_auth gives two keys no identity beside the master key."""
    folder = tmp_path_factory.mktemp("no-tenant")
    shutil.copy(HERE / "custom_auth_no_identity.py", folder / "custom_auth_no_identity.py")
    with harness.stack(
        folder,
        stem="ntn",
        general={"custom_auth": "custom_auth_no_identity.user_api_key_auth"},
    ) as running:
        yield running


def _api(stack: harness.Running, method: str, path: str, key: str) -> httpx.Response:
    """A memory API call with ``key``."""
    headers = {"Authorization": f"Bearer {key}"}
    return stack.http.request(method, f"{stack.proxy}/memory/v1{path}", headers=headers)


def _no_tenant_requests(metrics_text: str) -> float:
    """litellm_memory_requests_total{outcome="no_tenant"} summed over the processes."""
    return sum(
        sample.value
        for family in text_string_to_metric_families(metrics_text)
        for sample in family.samples
        if sample.name == "litellm_memory_requests_total"
        and sample.labels.get("outcome") == "no_tenant"
    )


def _chat(stack: harness.Running, key: str, user: str, text: str) -> dict[str, Any]:
    """One chat request with ``key``; the body the model received."""
    stack.openai(key).chat.completions.create(
        model="demo", user=user, messages=[{"role": "user", "content": text}]
    )
    return stack.chat_calls()[-1]


@pytest.mark.e2e
def test_callers_without_identity_share_nothing_through_a_real_proxy(
    anon_stack: harness.Running,
) -> None:
    """Two keys whose custom_auth returns a bare UserAPIKeyAuth() and the master key, all
    sending the same user id: the master's turns are stored and come back to the master; the
    anonymous callers' requests reach the model as sent plus the alias's rules (neither the
    master's memory nor each other's), nothing of theirs is stored, the memory API answers them
    403, and the proxy's metrics count them as no_tenant."""
    stack = anon_stack
    user = "u" + uuid.uuid4().hex[:8]
    _chat(stack, harness.MASTER_KEY, user, "My cat is called Miso.")
    assert [t["text"] for t in stack.turns(user)][:1] == ["My cat is called Miso."]
    keys_after_master = sorted(stack.redis.scan_iter(match=f"{stack.prefix}:*"))

    sent = _chat(stack, ANON_1, user, "My dog is called Rex.")
    assert sent["messages"] == [
        {"role": "system", "content": RULES},
        {"role": "user", "content": "My dog is called Rex."},
    ]
    sent = _chat(stack, ANON_2, user, "What are my pets called?")
    assert sent["messages"] == [
        {"role": "system", "content": RULES},
        {"role": "user", "content": "What are my pets called?"},
    ]
    assert sorted(stack.redis.scan_iter(match=f"{stack.prefix}:*")) == keys_after_master

    sent = _chat(stack, harness.MASTER_KEY, user, "What is my cat called?")
    body = json.dumps(sent["messages"])
    assert "My cat is called Miso." in body and "Rex" not in body

    for key in (ANON_1, ANON_2):
        answer = _api(stack, "GET", f"/memories?user={user}&model=demo", key)
        assert answer.status_code == 403, answer.text
        assert "no team, user or key id" in answer.json()["detail"]
        assert _api(stack, "GET", f"/export?user={user}&model=demo", key).status_code == 403
        assert _api(stack, "DELETE", f"/users/{user}", key).status_code == 403
    export = _api(stack, "GET", f"/export?user={user}&model=demo", harness.MASTER_KEY)
    assert export.status_code == 200 and "My cat is called Miso." in export.text

    metrics = stack.http.get(
        f"{stack.proxy}/memory/metrics",
        headers={"Authorization": f"Bearer {harness.MASTER_KEY}"},
    )
    assert metrics.status_code == 200
    assert _no_tenant_requests(metrics.text) == 2
