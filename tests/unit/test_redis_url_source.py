"""The tests find their Redis in one place (issue 29 item 1): ``real_redis_url()`` in
tests/support/redis_url.py, REDIS_URL as it was when the session started; no test file falls
back to a fixed address, and CI's script runs the suite's Redis on a port of its own, never 6379."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.support.harness import REPO
from tests.support.paths import SUPPORT, TESTS
from tests.support.redis_url import DEFAULT_REDIS_URL, real_redis_url


def test_the_session_url_survives_a_test_that_changes_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A test that deletes REDIS_URL (as test_doctor.py's autouse fixture does) or points it
    elsewhere does not move the tests' Redis: it is the value read at session start."""
    before = real_redis_url()
    assert before == (os.environ.get("REDIS_URL") or DEFAULT_REDIS_URL)
    monkeypatch.delenv("REDIS_URL", raising=False)
    assert real_redis_url() == before
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:1/0")
    assert real_redis_url() == before


def test_no_test_file_reads_redis_url_with_its_own_default() -> None:
    """Only tests/support/redis_url.py names the default address: every other file asks
    real_redis_url() (a fixed-address fallback made the suite fail where nothing listens on
    6379)."""
    fallback = re.compile(r"""(?:environ\.get\(|environ\[|getenv\()\s*["']REDIS_URL["']""")
    offenders = [
        str(path.relative_to(TESTS))
        for path in sorted(TESTS.rglob("*.py"))
        if path not in (SUPPORT / "redis_url.py", Path(__file__).resolve())
        and fallback.search(path.read_text(encoding="utf-8"))
    ]
    assert offenders == []
    source = (SUPPORT / "redis_url.py").read_text(encoding="utf-8")
    assert len(fallback.findall(source)) == 1


def test_ci_runs_the_suites_redis_on_a_port_of_its_own() -> None:
    """.ci/run starts its own redis-server on a free port and exports that URL; it never
    reuses a server on 6379."""
    script = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert "6379" not in script
    assert "s.bind(('127.0.0.1',0))" in script
    assert '--port "$port"' in script
    assert 'REDIS_URL="redis://127.0.0.1:$port/0"' in script
    assert "export REDIS_URL" in script
