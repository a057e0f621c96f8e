"""End-to-end packaging (issue 29 item 5): the package built as a wheel installs into a clean
venv beside the oldest supported LiteLLM and the newest tested one, is named in a config.yaml's
``callbacks:``, and gives memory through LiteLLM's own ``litellm`` command: a fact of request one
reaches the upstream model in request two.

The venv tests need the package index and take minutes each (a LiteLLM install), so they run when
``MEMORY_TEST_PACKAGE`` says so (``.ci/run`` sets it to ``1``): ``1`` runs the oldest supported
version (pyproject.toml's lower bound) and :data:`~tests.support.package_venv.NEWEST_TESTED`; a
comma-separated list of versions runs those. Unset or ``0``: skipped.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from litellm_memory_hook.tools import cli_doctor
from tests.support import package_venv
from tests.support.package_venv import (
    NEWEST_TESTED,
    build_wheel,
    chat_twice,
    installed,
    locked_litellm,
    make_venv,
    packaged_data_files,
    supported_range,
    wheel_names,
)
from tests.support.redis_url import real_redis_url

pytestmark = pytest.mark.package

SETTING = os.environ.get("MEMORY_TEST_PACKAGE", "0").strip()
ENABLED = SETTING not in ("", "0")
SKIP_REASON = "packaging e2e: set MEMORY_TEST_PACKAGE=1 (.ci/run does; needs the package index)"


def versions() -> list[str]:
    """The LiteLLM versions the venv tests install (see the module's note)."""
    if SETTING in ("", "0", "1"):
        return [supported_range()[0], NEWEST_TESTED]
    return [v.strip() for v in SETTING.split(",") if v.strip()]


# -- what the repository declares (always run) -----------------------------------------------------


def test_the_supported_range_is_declared_once_and_agrees_everywhere() -> None:
    """pyproject.toml's range, the doctor's, the version CI's main run locks (inside the range,
    also the Docker image's), and the newest tested version (inside it too)."""
    oldest, below = supported_range()
    assert (oldest, below) == (cli_doctor.LITELLM_OLDEST, cli_doctor.LITELLM_BELOW)
    assert locked_litellm() == cli_doctor.LITELLM_VERSION
    dockerfile = (package_venv.REPO / "Dockerfile").read_text(encoding="utf-8")
    assert f"ARG LITELLM_VERSION={cli_doctor.LITELLM_VERSION}\n" in dockerfile
    for version in (locked_litellm(), NEWEST_TESTED):
        assert cli_doctor.litellm_supported(version), version
    assert not cli_doctor.litellm_supported("1.93.2") and not cli_doctor.litellm_supported("2.0.0")
    assert cli_doctor.litellm_supported(oldest) and cli_doctor.litellm_supported("1.99.0.post1")


def test_the_changelog_and_the_version_policy_name_the_range() -> None:
    oldest, below = supported_range()
    changelog = (package_venv.REPO / "CHANGELOG.md").read_text(encoding="utf-8")
    assert changelog.startswith("# Changelog\n")
    assert "## [Unreleased]" in changelog and "## [0.1.0]" in changelog
    assert f"litellm[proxy]>={oldest},<{below}" in changelog
    readme = (package_venv.REPO / "docs" / "operations.md").read_text(encoding="utf-8")
    policy = readme[readme.index("## Versions") :]
    assert f">={oldest},<{below}" in policy and "CHANGELOG.md" in policy
    assert re.search(r"[Ss]emantic [Vv]ersioning", policy)


# -- the wheel in clean venvs (MEMORY_TEST_PACKAGE) ----------------------------------------------


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not ENABLED:
        pytest.skip(SKIP_REASON)
    return build_wheel(tmp_path_factory.mktemp("wheel"))


@pytest.mark.timeout(300)
def test_the_wheel_holds_what_serve_and_the_hook_read(wheel: Path) -> None:
    """Every file of the package that is not Python (the inspector's page, script and style, the
    word lists, the store's Lua scripts) is in the wheel, with the stand-in, the callback module
    and the console script."""
    names = wheel_names(wheel)
    data = packaged_data_files()
    assert any(name.endswith("inspector.html") for name in data)
    assert any("/stopwords/" in name for name in data)
    assert "litellm_memory_hook/store/lua/append_turns.lua" in data
    assert "litellm_memory_hook/store/lua/includes/postings.lua" in data
    assert [name for name in data if name not in names] == []
    for module in ("proxy_callback.py", "tools/standin.py", "tools/standin_answer.py"):
        assert f"litellm_memory_hook/{module}" in names
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert entry_points.startswith("litellm_memory_hook-")


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("litellm", versions())
def test_the_wheel_gives_memory_through_litellm(wheel: Path, litellm: str, tmp_path: Path) -> None:
    """pip install the wheel and litellm[proxy]==VERSION into a clean venv; `litellm --config`
    with the callback named by its import path; two requests of one user that each send only the
    new message: the second reaches the upstream with the first and its reply, the stand-in
    quotes the fact back, and the package's routes and inspector files answer."""
    venv = make_venv(tmp_path, wheel, litellm)
    found = installed(venv)
    assert found["litellm"] == litellm
    assert found["hook"].startswith(str(venv.path)), found  # the wheel, not the checkout
    result = chat_twice(venv, tmp_path, real_redis_url())
    assert result.replies == [
        "Noted: My cat is called Miso.",
        "You told me: My cat is called Miso.",
    ]
    assert len(result.upstream) == 2
    second = [(m["role"], m["content"]) for m in result.upstream[1]["messages"]]
    assert ("user", "My cat is called Miso.") in second
    assert ("assistant", "Noted: My cat is called Miso.") in second
    assert second[-1] == ("user", "What is my cat called?")
    assert result.users["total"] == 1 and result.users["users"][0]["conversations"] == 1
    assert result.inspector[0] == 200 and "<html" in result.inspector[1]
    assert result.inspector_js == 200
    assert '"window"' in result.debug_layers  # async_post_call_response_headers_hook ran
