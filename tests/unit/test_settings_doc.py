"""The configuration page (docs/configuration.md) is generated from the settings models and
describes every setting: regenerate it with
``python -m litellm_memory_hook.tools.settings_doc > docs/configuration.md``."""

from __future__ import annotations

from pydantic import BaseModel

from litellm_memory_hook.settings import FLAT_KEYS, GROUPS, AliasMemoryConfig, MemorySettings
from litellm_memory_hook.tools.settings_doc import attribute_docs, missing_docs, render
from tests.support.paths import REPO

PAGE = REPO / "docs" / "configuration.md"


def test_every_setting_has_a_description() -> None:
    assert missing_docs() == []


def test_the_page_is_the_generated_one() -> None:
    assert PAGE.read_text(encoding="utf-8") == render(), (
        "docs/configuration.md is stale: python -m litellm_memory_hook.tools.settings_doc "
        "> docs/configuration.md"
    )
    page = render()
    for name in MemorySettings.model_fields:
        group = GROUPS.get(name)
        for key in group.model_fields if group else ("",):
            assert f"| `{name}.{key}` |" in page if key else f"| `{name}` |" in page
    for old, new in FLAT_KEYS.items():
        assert f"| `{new}` |" in page and f"| `{old}` |" in page, old
    for name, info in AliasMemoryConfig.model_fields.items():
        group = info.annotation if name in ("window", "recall") else None
        assert isinstance(group, type) or f"| `{name}` |" in page
        for key in getattr(group, "model_fields", ()):
            assert f"| `{name}.{key}` |" in page


def test_the_parser_reads_continued_and_shared_descriptions() -> None:
    class Example(BaseModel):
        """An example.

        Attributes:
            one: the first
                setting, on two lines.
            two / three /
                four: share one.
        """

        one: int = 1

    assert attribute_docs(Example) == {
        "one": "the first setting, on two lines.",
        "two": "share one.",
        "three": "share one.",
        "four": "share one.",
    }
