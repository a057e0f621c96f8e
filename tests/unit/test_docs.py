"""The README and docs/: the README stays a short front page that starts with the two commands;
every relative link in the README and in docs/ points to a file (and a heading) that exists; the
examples are valid (Python parses, config blocks pass the settings models); the memory API page
lists every route the proxy serves."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from urllib.parse import unquote

import pytest
import yaml

from litellm_memory_hook.settings import AliasMemoryConfig, load_settings
from tests.support.paths import REPO

README = REPO / "README.md"
DOCS = REPO / "docs"

#: CI and a checker run these two lines from the README: they stay first, exactly so.
TWO_COMMANDS = """```bash
# 1. set up and run the proxy with memory (demo model, embedded Redis when REDIS_URL is unset)
python3 -m venv .venv && .venv/bin/pip install -e '.[dev]' && .venv/bin/litellm-memory serve

# 2. run the tests (starts its own throwaway Redis on a free port)
bash .ci/run
```
"""

MAX_README_LINES = 300
MAX_PARAGRAPH_CHARS = 600

_FENCE = re.compile(r"^(```|~~~)")
_LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_INLINE_CODE = re.compile(r"`[^`]*`")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def pages() -> list[Path]:
    return [README, *sorted(DOCS.rglob("*.md"))]


def prose_lines(text: str) -> list[str]:
    """The lines outside fenced code blocks (fenced lines become blank)."""
    out: list[str] = []
    fenced = False
    for line in text.splitlines():
        if _FENCE.match(line.strip()):
            fenced = not fenced
            out.append("")
        else:
            out.append("" if fenced else line)
    return out


def fenced_blocks(text: str, language: str) -> list[str]:
    """The bodies of the fenced blocks opened with ``language``."""
    return re.findall(rf"^```{language}\n(.*?)^```", text, flags=re.S | re.M)


def slug(title: str, seen: dict[str, int]) -> str:
    """GitHub's anchor of a heading (lower case, punctuation dropped, spaces to hyphens,
    ``-1``, ``-2`` ... for repeats)."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", title)  # a link's text only
    text = re.sub(r"<[^>]+>", "", text).replace("`", "").lower()
    base = re.sub(r"[^\w\- ]", "", text).replace(" ", "-")
    count = seen.get(base, 0)
    seen[base] = count + 1
    return base if count == 0 else f"{base}-{count}"


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    found = set()
    for line in prose_lines(page.read_text(encoding="utf-8")):
        match = _HEADING.match(line)
        if match:
            found.add(slug(match.group(2), seen))
    return found


def links(page: Path) -> list[str]:
    """Every link target in ``page``'s prose (not in code)."""
    out: list[str] = []
    for line in prose_lines(page.read_text(encoding="utf-8")):
        out.extend(_LINK.findall(_INLINE_CODE.sub("", line)))
    return out


def paragraphs(text: str) -> list[str]:
    """Prose paragraphs: blocks between blank lines, a list item or table row each on its own."""
    out: list[str] = []
    current: list[str] = []

    def close() -> None:
        if current:
            out.append(" ".join(s.strip() for s in current))
            current.clear()

    for line in prose_lines(text):
        if not line.strip():
            close()
        elif re.match(r"^\s*([-*+]|\d+\.|\|)\s", line) or line.startswith("#"):
            close()
            current.append(line)
        else:
            current.append(line)
    close()
    return out


def test_the_readme_starts_with_the_two_commands() -> None:
    text = README.read_text(encoding="utf-8")
    first_block = text.index("```")
    assert text[first_block:].startswith(TWO_COMMANDS)
    assert "```" not in text[:first_block]


def test_the_readme_is_short() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines"


def test_no_readme_paragraph_is_a_wall_of_text() -> None:
    long = [
        p[:80] + "..."
        for p in paragraphs(README.read_text(encoding="utf-8"))
        if len(p) > MAX_PARAGRAPH_CHARS
    ]
    assert long == [], f"README paragraphs over {MAX_PARAGRAPH_CHARS} characters: {long}"


def test_the_link_checker_reads_links_and_headings_as_github_does() -> None:
    seen: dict[str, int] = {}
    assert slug("`maxmemory-policy noeviction`", seen) == "maxmemory-policy-noeviction"
    assert slug("A long real conversation, end to end", seen) == (
        "a-long-real-conversation-end-to-end"
    )
    assert slug("Recall", seen) == "recall" and slug("Recall", seen) == "recall-1"
    assert "docs/quickstart.md" in links(README)
    assert "the-memory-inspector" in anchors(DOCS / "operations.md")


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for target in links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto: ...
            continue
        path_part, _, anchor = target.partition("#")
        path = (page.parent / unquote(path_part)).resolve() if path_part else page
        if not path.exists():
            broken.append(f"{target}: no such file")
        elif anchor and path.suffix == ".md" and anchor not in anchors(path):
            broken.append(f"{target}: no heading #{anchor} in {path.relative_to(REPO)}")
    assert broken == []


def test_the_docs_index_lists_every_page() -> None:
    index = (DOCS / "README.md").read_text(encoding="utf-8")
    listed = {(DOCS / t).resolve() for t in links(DOCS / "README.md") if "#" not in t}
    for page in sorted(DOCS.rglob("*.md")):
        if page.name != "README.md":
            assert page.resolve() in listed, f"docs/README.md does not list {page.name}"
    assert "../README.md" in index


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(REPO)))
def test_python_examples_parse(page: Path) -> None:
    for block in fenced_blocks(page.read_text(encoding="utf-8"), "python"):
        ast.parse(block)


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(REPO)))
def test_config_examples_pass_the_settings_models(page: Path) -> None:
    """A ``config.yaml`` shown in the docs is one the hook accepts: every alias's memory block,
    and the global section."""
    for block in fenced_blocks(page.read_text(encoding="utf-8"), "yaml"):
        config = yaml.safe_load(block)
        if not isinstance(config, dict) or "model_list" not in config:
            continue
        if "litellm_settings" in config:
            assert config["litellm_settings"]["callbacks"] == (
                "litellm_memory_hook.proxy_callback.memory_hook"
            )
        for entry in config["model_list"]:
            memory = (entry.get("model_info") or {}).get("memory")
            if isinstance(memory, dict):
                AliasMemoryConfig.model_validate(memory)
        load_settings(config.get("callback_settings"))


def test_the_memory_api_page_lists_every_route() -> None:
    from litellm_memory_hook.proxy import routes, ui

    page = (DOCS / "memory-api.md").read_text(encoding="utf-8")
    missing = []
    for router in (routes.router, ui.router):
        for route in router.routes:
            if not getattr(route, "include_in_schema", False):
                continue
            for method in sorted(getattr(route, "methods", ()) or ()):
                path = re.sub(r"\{(\w+):path\}", r"{\1}", str(getattr(route, "path", "")))
                if f"| {method} | `{path}` |" not in page:
                    missing.append(f"{method} {path}")
    assert missing == []


def test_product_code_cites_the_docs_not_design_md() -> None:
    """The code cites docs/ pages (and their headings), never a DESIGN.md it does not have."""
    cited_design = []
    broken = []
    for source in sorted((REPO / "litellm_memory_hook").rglob("*.py")):
        text = source.read_text(encoding="utf-8")
        name = str(source.relative_to(REPO))
        if "DESIGN.md" in text:
            cited_design.append(name)
        for page, anchor in re.findall(r"\bdocs/([\w/.-]+\.md)(?:#([\w-]+))?", text):
            path = DOCS / page
            if not path.exists():
                broken.append(f"{name}: docs/{page}")
            elif anchor and anchor not in anchors(path):
                broken.append(f"{name}: docs/{page}#{anchor}")
    assert cited_design == []
    assert broken == []


def test_product_code_names_no_field_case_and_no_design_md() -> None:
    """Field-case ids (C12, E06, ...) live in the tests that hold them; a module says what it
    does in its own words, and links docs/, not a DESIGN.md the repository does not have."""
    package = REPO / "litellm_memory_hook"
    case_id = re.compile(r"\bcases? [A-Z]\d{2}\b|\([A-Z]\d{2}[ ,)]|\b[CDEN]\d{2}\)")
    found = [
        f"{path.relative_to(package)}:{number}"
        for path in sorted(package.rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if case_id.search(line) or "DESIGN.md" in line
    ]
    assert found == []


def test_the_module_map_is_the_generated_one() -> None:
    """docs/modules.md lists every module with the first sentence of its docstring; a module
    without a docstring, or one added, renamed or redescribed, makes it stale."""
    from litellm_memory_hook.tools import module_map

    assert module_map.undocumented() == []
    assert (DOCS / "modules.md").read_text(encoding="utf-8") == module_map.render(), (
        "docs/modules.md is stale: python -m litellm_memory_hook.tools.module_map > docs/modules.md"
    )
    assert module_map.first_sentence("Reads (e.g. the log). More here.") == "Reads (e.g. the log)"
    sentence = "One :func:`f` call; then: more"
    assert module_map.first_sentence(sentence + ".") == sentence
    assert module_map.first_sentence("The store: Redis.\n\nMore.") == "The store"


def test_no_module_of_the_package_is_over_600_lines() -> None:
    """One concept per module: none of the package's modules grows past 600 lines."""
    from litellm_memory_hook.tools import module_map

    long = [
        (m.path, m.lines)
        for _, group in module_map.modules()
        for m in group
        if m.path.startswith("litellm_memory_hook/") and m.lines > 600
    ]
    assert long == []
