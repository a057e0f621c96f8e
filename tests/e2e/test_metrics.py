"""Prometheus metrics (``GET /memory/metrics``) through a real LiteLLM proxy with its real key
check: chats counted, the in-proxy worker alive, 401 without a key."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator

import httpx
import openai
import pytest

from tests.support import harness
from tests.support.harness import MASTER_KEY
from tests.support.metrics_samples import hook_is_wired, samples, value

# -- through a real proxy -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """A real LiteLLM proxy (the package's config.yaml) with the stand-in model and real Redis;
    yields (base URL, key prefix)."""
    folder = tmp_path_factory.mktemp("e2e-metrics")
    with harness.stack(folder, stem="e2x") as running:
        yield running.proxy, running.prefix
    shutil.rmtree(folder, ignore_errors=True)


def test_scrape_through_a_real_proxy(proxy: tuple[str, str]) -> None:
    """Chat through the proxy, then scrape with the master key: the requests with memory are
    counted, the proxy's own extraction worker is alive; the route answers 401 without a
    key."""
    base, _ = proxy
    client = openai.OpenAI(base_url=f"{base}/v1", api_key=MASTER_KEY, max_retries=0, timeout=60)
    user = "metrics-" + uuid.uuid4().hex[:6]
    for text in ("My cat is called Miso.", "What is my cat called?"):
        client.chat.completions.create(
            model="demo", user=user, messages=[{"role": "user", "content": text}]
        )
    client.chat.completions.create(model="demo", messages=[{"role": "user", "content": "hi"}])
    with httpx.Client(timeout=30) as http:
        assert http.get(f"{base}/memory/metrics").status_code == 401
        answer = http.get(
            f"{base}/memory/metrics", headers={"Authorization": f"Bearer {MASTER_KEY}"}
        )
    assert answer.status_code == 200, answer.text
    found = samples(answer.text)
    assert value(found, "litellm_memory_requests_total", outcome="memory") == 2
    assert value(found, "litellm_memory_requests_total", outcome="no_user") == 1
    assert value(found, "litellm_memory_store_up") == 1
    assert value(found, "litellm_memory_extraction_due_conversations") >= 1
    assert value(found, "litellm_memory_extraction_workers") == 1  # the in-proxy worker beats
    if hook_is_wired():
        assert value(found, "litellm_memory_hook_duration_milliseconds_count") == 2
        assert value(found, "litellm_memory_layer_characters_count", layer="window") == 2
