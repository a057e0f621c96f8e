"""Where things are: the checkout, the tests' folders and the data beside the checkout."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TESTS = REPO / "tests"
SUPPORT = TESTS / "support"
DATA = TESTS / "data"
SHARED = REPO.parent / "shared"
LOCOMO = SHARED / "data" / "locomo" / "locomo-dev.json"
MULTILING = SHARED / "data" / "multiling" / "multiling-dev.json"
