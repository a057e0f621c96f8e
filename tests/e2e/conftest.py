"""End-to-end tests: every test under tests/e2e is marked ``e2e``, so
``-m "not e2e and not package"`` selects the unit and integration tests."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test of this folder ``e2e`` (before ``-m`` deselects)."""
    for item in items:
        if HERE in item.path.parents:
            item.add_marker(pytest.mark.e2e)
