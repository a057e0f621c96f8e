"""The configuration page (``docs/configuration.md``), generated from the settings models: a
table per model of every setting, its type, default, bounds, environment variable and the
description its class docstring gives. ``tests/test_settings_doc.py`` fails when the page is
stale or a setting has no description.

Run ``python -m litellm_memory_hook.tools.settings_doc > docs/configuration.md``.
"""

from __future__ import annotations

import re
import sys
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from litellm_memory_hook.settings import ENV_PREFIX, AliasMemoryConfig, MemorySettings

_ATTRIBUTE = re.compile(r"^(\s+)([a-z_][a-z0-9_]*(?:\s*/\s*[a-z_][a-z0-9_]*)*):\s?(.*)$")

HEADER = """# Configuration

Generated from `litellm_memory_hook/settings.py` by
`python -m litellm_memory_hook.tools.settings_doc > docs/configuration.md`; a test fails when
this page and the code differ.

Global settings go in the proxy's `config.yaml` under `callback_settings: memory:` or in the
environment (`LITELLM_MEMORY_<NAME>`; `REDIS_URL` too); config.yaml wins. Per-alias settings go
in `model_info: memory:` of a model in `model_list`; an alias's own value wins over the global
one where both exist.

- Unknown keys are rejected, in the file and as `LITELLM_MEMORY_*` environment variables, and so
  are infinite or NaN numbers and times over a day (86,400 s).
- `LITELLM_MEMORY_REDIS_URL` wins over `REDIS_URL`.
- A key set in the file wins over its variable: the environment fills only the keys the file
  leaves out (the shipped `config.yaml` sets `key_prefix`, `recent_chars`, `recent_messages`,
  `retention_days` and `gc_freeze`). `litellm-memory doctor` names a variable so ignored.
- A bad setting is named as you set it, with its value and what it should be
  ([the command line](cli.md)); the proxy then passes requests through without memory.

A whole `config.yaml`: [quickstart](quickstart.md#a-real-model). What a request can set itself
(`metadata`): [clients](clients.md#per-request-metadata).
"""


def attribute_docs(model: type[BaseModel]) -> dict[str, str]:
    """The ``Attributes:`` section of a class docstring as ``{name: description}`` (Google
    style: ``name: text`` lines, continuation lines indented deeper; ``a / b: text`` names
    two)."""
    doc = model.__doc__ or ""
    lines = doc.splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == "Attributes:")
    except StopIteration:
        return {}
    out: dict[str, str] = {}
    names: list[str] = []
    indent = None
    pending = ""  # a list of names that goes on on the next line (``a / b /``)
    for raw in lines[start + 1 :]:
        if not raw.strip():
            continue
        if raw.rstrip().endswith("/") and ":" not in raw:
            pending = f"{pending}{raw.rstrip()} " if pending else f"{raw.rstrip()} "
            continue
        line = f"{pending}{raw.strip()}" if pending else raw
        pending = ""
        match = _ATTRIBUTE.match(line)
        if match and (indent is None or len(match.group(1)) == indent):
            indent = len(match.group(1))
            names = [n.strip() for n in match.group(2).split("/")]
            for name in names:
                out[name] = match.group(3).strip()
        elif indent is not None and len(line) - len(line.lstrip()) > indent:
            for name in names:
                out[name] = f"{out[name]} {line.strip()}".strip()
        else:
            break
    return out


def _type(info: FieldInfo) -> str:
    text = repr(info.annotation) if info.annotation is not None else "any"
    text = re.sub(r"typing\.|<class '([^']+)'>", lambda m: m.group(1) or "", text)
    return text.replace("litellm_memory_hook.core.prompt.", "").replace(
        "litellm_memory_hook.extraction.prompt.", ""
    )


def _default(info: FieldInfo) -> str:
    if info.default_factory is not None:
        return repr(info.default_factory())  # type: ignore[call-arg]
    return repr(info.default)


def _bounds(info: FieldInfo) -> str:
    found = []
    for item in info.metadata:
        for name, sign in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
            value = getattr(item, name, None)
            if value is not None:
                found.append(f"{sign} {value}")
        pattern = getattr(item, "pattern", None)
        if pattern:
            found.append(f"`{pattern}`")
    return ", ".join(found)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def table(model: type[BaseModel], *, env: bool) -> str:
    """The markdown table of ``model``'s fields."""
    docs = attribute_docs(model)
    head = "| setting | type | default | bounds |" + (" environment |" if env else "")
    rule = "|---|---|---|---|" + ("---|" if env else "")
    rows = [head + " description |", rule + "---|"]
    for name, info in model.model_fields.items():
        cells = [f"`{name}`", f"`{_type(info)}`", f"`{_default(info)}`", _bounds(info)]
        if env:
            cells.append(f"`{ENV_PREFIX}{name.upper()}`")
        cells.append(docs.get(name, ""))
        rows.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(rows)


def missing_docs() -> list[str]:
    """Settings whose class docstring does not describe them."""
    out: list[str] = []
    for model in (MemorySettings, AliasMemoryConfig):
        docs = attribute_docs(model)
        out.extend(f"{model.__name__}.{n}" for n in model.model_fields if not docs.get(n))
    return out


def render() -> str:
    """The whole page."""
    parts: list[Any] = [
        HEADER,
        "## Global settings (`callback_settings: memory:`)\n",
        table(MemorySettings, env=True),
        "\n## Per alias (`model_info: memory:`)\n",
        table(AliasMemoryConfig, env=False),
    ]
    return "\n".join(parts) + "\n"


if __name__ == "__main__":
    sys.stdout.write(render())
