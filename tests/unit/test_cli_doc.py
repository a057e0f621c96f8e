"""The command-line page (docs/cli.md) is generated from the CLI's own ``--help``: regenerate
it with ``python -m litellm_memory_hook.tools.cli_doc > docs/cli.md``."""

from __future__ import annotations

from litellm_memory_hook.tools.cli_doc import REPO, commands, render

PAGE = REPO / "docs" / "cli.md"


def test_the_page_is_the_generated_one() -> None:
    assert PAGE.read_text(encoding="utf-8") == render(), (
        "docs/cli.md is stale: python -m litellm_memory_hook.tools.cli_doc > docs/cli.md"
    )


def test_every_command_has_its_section_and_no_path_of_this_checkout() -> None:
    page = render()
    names = commands()
    for name in ("litellm-memory serve", "litellm-memory memories pin", "litellm-memory doctor"):
        assert name in names, name
    for name in names:
        assert f"\n## {name}\n\n```text\nUsage: {name} " in page, name
    assert str(REPO) not in page
