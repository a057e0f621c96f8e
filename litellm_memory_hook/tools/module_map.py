"""The module map (``docs/modules.md``), generated from the code: every module of the package
and of ``benchmarks/``, one line each, the first sentence of its docstring (what it does),
grouped by package in layer order. ``tests/unit/test_docs.py`` fails when the
page is stale or a module has no docstring.

Run ``python -m litellm_memory_hook.tools.module_map > docs/modules.md``.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
"""The repository (the package's parent folder)."""

#: the packages in layer order, each with what it is (docs/design.md#layers-of-the-code)
PACKAGES = (
    ("litellm_memory_hook", "top level: errors, slices of work"),
    ("litellm_memory_hook/settings", "settings: the configuration and where it is read from"),
    ("litellm_memory_hook/core", "core: pure functions on text and messages"),
    ("litellm_memory_hook/store", "store: Redis"),
    ("litellm_memory_hook/engine", "engine: the memory engine"),
    ("litellm_memory_hook/extraction", "extraction: the memory job and its worker"),
    ("litellm_memory_hook/protocols", "protocols: one adapter per client API"),
    ("litellm_memory_hook/memory_api", "memory API: over the store"),
    ("litellm_memory_hook/proxy", "proxy: what LiteLLM calls"),
    ("litellm_memory_hook/tools", "tools: the CLI, the stand-in model, generated docs"),
    ("benchmarks", "benchmarks (from a clone, not installed)"),
)

_SENTENCE_END = re.compile(r"(?<=[a-z0-9)`'\"])[.:;](?=\s+[A-Z(`*]|\s*$)")

HEADER = """# Module map

Generated from the module docstrings by
`python -m litellm_memory_hook.tools.module_map > docs/modules.md`; a test fails when this page
and the code differ. Each line: the module and the first sentence of its docstring. How the
layers fit together: [design](design.md#layers-of-the-code).
"""


@dataclass(frozen=True)
class Module:
    """One module: its path from the repository root, its first docstring sentence (``""``
    without a docstring) and its length in lines."""

    path: str
    job: str
    lines: int


def first_sentence(docstring: str) -> str:
    """The first sentence of a docstring's first paragraph, on one line: up to the first full
    stop, colon or semicolon after a word and before a capital, a quote or the end (``e.g.``
    and ``:func:`` do not end it)."""
    paragraph = " ".join(docstring.strip().split("\n\n", 1)[0].split())
    match = _SENTENCE_END.search(paragraph)
    return paragraph[: match.start()] if match else paragraph.rstrip(".")


def modules(root: Path = ROOT) -> Iterator[tuple[str, list[Module]]]:
    """Each package's title and its modules, sorted by name (``__init__`` first)."""
    for folder, title in PACKAGES:
        found: list[Module] = []
        for path in sorted((root / folder).glob("*.py"), key=lambda p: (p.stem != "__init__", p)):
            text = path.read_text(encoding="utf-8")
            doc = ast.get_docstring(ast.parse(text)) or ""
            if not doc and not text.strip():
                continue  # an empty __init__.py: nothing to say
            relative = path.relative_to(root).as_posix()
            found.append(Module(relative, first_sentence(doc), text.count("\n")))
        yield title, found


def undocumented(root: Path = ROOT) -> list[str]:
    """Modules without a docstring."""
    return [m.path for _, group in modules(root) for m in group if not m.job]


def render(root: Path = ROOT) -> str:
    """The page."""
    out = [HEADER]
    for title, group in modules(root):
        out.append(f"\n## {title}\n\n| module | what it does |\n|---|---|\n")
        for module in group:
            job = module.job.replace("|", "\\|")
            out.append(f"| `{module.path}` | {job} |\n")
    return "".join(out)


def main() -> None:
    """Print the page to stdout."""
    sys.stdout.write(render())


if __name__ == "__main__":
    main()
