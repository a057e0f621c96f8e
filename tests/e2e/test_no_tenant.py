"""A caller with no identity has no tenant (issue 27 item 7), through a real LiteLLM proxy with
``tests/support/custom_auth_no_identity.py`` (two anonymous keys and the master key): the
anonymous callers share nothing, with each other or with the master key."""

from __future__ import annotations

import json
import shutil
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.integration.test_no_tenant import ANON_1, ANON_2, RULES, _no_tenant_requests
from tests.support import harness
from tests.support.paths import SUPPORT


@pytest.fixture(scope="module")
def anon_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[harness.Running]:
    """Stand-in + proxy whose custom_auth gives two keys no identity beside the master key."""
    folder = tmp_path_factory.mktemp("no-tenant")
    shutil.copy(SUPPORT / "custom_auth_no_identity.py", folder / "custom_auth_no_identity.py")
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


def _chat(stack: harness.Running, key: str, user: str, text: str) -> dict[str, Any]:
    """One chat request with ``key``; the body the model received."""
    stack.openai(key).chat.completions.create(
        model="demo", user=user, messages=[{"role": "user", "content": text}]
    )
    return stack.chat_calls()[-1]


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
