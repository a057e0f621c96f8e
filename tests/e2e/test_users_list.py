"""Users are listable through a real proxy: the HTTP route, per tenant."""

from __future__ import annotations

import uuid
from pathlib import Path

import httpx
import pytest

from tests.support import harness

pytestmark = pytest.mark.redis


def test_users_route_through_a_real_proxy(tmp_path: Path) -> None:
    """GET /memory/v1/users lists the caller tenant's users (paged, searchable); a request
    without an Authorization header is a 401, not LiteLLM's 500."""
    with harness.stack(tmp_path, stem="users") as running:
        client = running.openai()
        stem = uuid.uuid4().hex[:6]
        for name in ("ann", "ben", "cy"):
            client.chat.completions.create(
                model="demo",
                user=f"{name}-{stem}",
                messages=[{"role": "user", "content": "Hello."}],
            )
        api = f"{running.proxy}/memory/v1"
        auth = {"Authorization": f"Bearer {harness.MASTER_KEY}"}
        listed = httpx.get(f"{api}/users", headers=auth, params={"limit": 2}, timeout=30)
        assert listed.status_code == 200, listed.text
        body = listed.json()
        assert [u["user"] for u in body["users"]] == [f"ann-{stem}", f"ben-{stem}"]
        assert (body["total"], body["next_offset"]) == (3, 2)
        assert body["users"][0]["conversations"] == 1
        found = httpx.get(f"{api}/users", headers=auth, params={"search": "CY-"}, timeout=30)
        assert [u["user"] for u in found.json()["users"]] == [f"cy-{stem}"]
        missing = httpx.get(f"{api}/users", timeout=30)
        assert missing.status_code == 401, missing.text
        assert "missing API key" in missing.json()["detail"]
        for path in ("/memories?user=ann&model=demo", "/export?user=ann&model=demo"):
            assert httpx.get(api + path, timeout=30).status_code == 401
        body = {"user": "ann", "model": "demo", "text": "x"}
        assert httpx.post(f"{api}/pinned", json=body, timeout=30).status_code == 401
        assert httpx.delete(f"{api}/users/ann", timeout=30).status_code == 401
        metrics = httpx.get(f"{running.proxy}/memory/metrics", timeout=30)
        assert metrics.status_code == 401, metrics.text
        page = httpx.get(f"{running.proxy}/memory/ui", timeout=30)
        assert page.status_code == 200 and 'id="user-search"' in page.text
