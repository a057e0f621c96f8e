"""The benchmarks run from a clone: `bench recall` without a file uses the repository's own
multilingual dev set (benchmarks/data/multiling), on the tests' real Redis."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from benchmarks.options import MULTILING_DEV
from litellm_memory_hook.tools import cli
from litellm_memory_hook.tools.histories import list_locomo_samples
from tests.support.redis_url import real_redis_url

pytestmark = pytest.mark.redis


def test_bench_recall_defaults_to_the_repository_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert MULTILING_DEV.is_file() and len(list_locomo_samples(MULTILING_DEV)) >= 1
    monkeypatch.chdir(tmp_path)  # not the repository: the default does not depend on the cwd
    out = tmp_path / "recall.json"
    result = CliRunner().invoke(
        cli.app,
        ["bench", "recall", "--no-curve", "--redis-url", real_redis_url(), "--json", str(out)],
    )
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text(encoding="utf-8"))
    assert "49 questions" in result.output, result.output
    assert report
