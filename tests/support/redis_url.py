"""The tests' real Redis: ``REDIS_URL`` as it was when the test session started (this
module is first imported by tests/conftest.py, before any test or fixture changes the
environment), else the local default server. The one place a test finds its Redis."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest
import redis

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
# Read once, when tests/conftest.py first imports this module (before any test or fixture changes
# the environment): a test that deletes or sets REDIS_URL with monkeypatch never moves the tests'
# Redis.
_SESSION_REDIS_URL = os.environ.get("REDIS_URL") or DEFAULT_REDIS_URL


def real_redis_url() -> str:
    """The real Redis the tests use: ``REDIS_URL`` as it was when the test session started, else
    the local default server. The one place a test finds its Redis; nothing else falls back to a
    fixed address."""
    return _SESSION_REDIS_URL


def cli_key_prefix(monkeypatch: pytest.MonkeyPatch, stem: str) -> Iterator[str]:
    """For a fixture: a key prefix of one test, given to CLI commands by
    LITELLM_MEMORY_STORAGE__KEY_PREFIX (and the test Redis by REDIS_URL); its keys are deleted
    after the test (SCAN). The ``key_prefix`` fixture of tests/conftest.py is ``yield from
    cli_key_prefix(monkeypatch, "tk")``."""
    prefix = stem + uuid.uuid4().hex[:10]
    monkeypatch.setenv("LITELLM_MEMORY_STORAGE__KEY_PREFIX", prefix)
    monkeypatch.setenv("REDIS_URL", real_redis_url())
    for name in ("LITELLM_MEMORY_REDIS__URL", "LITELLM_MEMORY_REDIS_URL"):
        monkeypatch.delenv(name, raising=False)
    yield prefix
    client = redis.Redis.from_url(real_redis_url())
    for key in client.scan_iter(match=f"{prefix}:*", count=1000):
        client.delete(key)
    client.close()
