"""The configuration page (``docs/configuration.md``), generated from the settings models: a
table per group of settings (:data:`~litellm_memory_hook.settings.GROUPS`) and for the per-alias
block, each setting with its type, default, bounds, environment variable, the flat key it had in
earlier versions (:data:`~litellm_memory_hook.settings.FLAT_KEYS`, still read, deprecated) and the
description its class docstring gives. ``tests/unit/test_settings_doc.py`` fails when the page is
stale or a setting has no description.

Run ``python -m litellm_memory_hook.tools.settings_doc > docs/configuration.md``.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from litellm_memory_hook.settings import (
    ALIAS_FLAT_KEYS,
    FLAT_KEYS,
    GROUPS,
    AliasMemoryConfig,
    MemorySettings,
    env_name,
)

_ATTRIBUTE = re.compile(r"^(\s+)([a-z_][a-z0-9_]*(?:\s*/\s*[a-z_][a-z0-9_]*)*):\s?(.*)$")

HEADER = """# Configuration

Generated from `litellm_memory_hook/settings/` by
`python -m litellm_memory_hook.tools.settings_doc > docs/configuration.md`; a test fails when
this page and the code differ.

Global settings go in the proxy's `config.yaml` under `callback_settings: memory:`, in groups
(`recall: {k: 6}`), or in the environment: `LITELLM_MEMORY_<GROUP>__<KEY>`, the group and the
key joined by two underscores (`LITELLM_MEMORY_RECALL__K=6`; `REDIS_URL` too); config.yaml wins.
Per-alias settings go in `model_info: memory:` of a model in `model_list`; an alias's own value
wins over the global one where both exist.

```yaml
callback_settings:
  memory:
    storage: {key_prefix: mem, retention_days: 30}
    window: {max_chars: 8000, max_messages: 40}
    recall: {max_chars: 2500}
    extraction: {worker_in_proxy: false}
```

- Every size limit starts with `max_`; every unit is a suffix: `_chars` (characters),
  `_messages`, `_items`, `_s` (seconds), `_days`.
- Unknown keys are rejected, in the file and as `LITELLM_MEMORY_*` environment variables, and so
  are infinite or NaN numbers and times over a day (86,400 s).
- `LITELLM_MEMORY_REDIS__URL` wins over `REDIS_URL`.
- A key set in the file wins over its variable: the environment fills only the keys the file
  leaves out, a group key by key (the shipped `config.yaml` sets `storage.key_prefix`,
  `storage.retention_days`, `window.max_chars`, `window.max_messages` and `gc_freeze`).
  `litellm-memory doctor` names a variable so ignored.
- The flat keys of earlier versions (the column *earlier key*: `recall_k` in the file,
  `LITELLM_MEMORY_RECALL_K` in the environment, `recall_k` in an alias's block) still work, each
  read as its new key with a warning that names the new key (logged once by the proxy and the
  command line). Where the new key is set in the same place too, the new key wins and the warning
  says so; a key in the file still wins over a variable, whichever spelling each uses.
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


def _summary(model: type[BaseModel]) -> str:
    """The first paragraph of a class docstring, on one line."""
    doc = (model.__doc__ or "").strip().split("\n\n")[0]
    return " ".join(doc.split())


def table(
    model: type[BaseModel],
    *,
    env: bool,
    group: str = "",
    flat: Mapping[str, str] | None = None,
) -> str:
    """The markdown table of ``model``'s fields (a group's as ``group.key``; groups themselves
    left out); ``env``: with each one's environment variable; ``flat``: with the flat key of
    earlier versions that still sets it."""
    docs = attribute_docs(model)
    earlier = {new: old for old, new in (flat or {}).items()}
    head = "| setting | type | default | bounds |" + (" environment |" if env else "")
    rule = "|---|---|---|---|" + ("---|" if env else "")
    if flat is not None:
        head, rule = head + " earlier key |", rule + "---|"
    rows = [head + " description |", rule + "---|"]
    for name, info in model.model_fields.items():
        if _is_group(info):
            continue
        path = f"{group}.{name}" if group else name
        cells = [f"`{path}`", f"`{_type(info)}`", f"`{_default(info)}`", _bounds(info)]
        if env:
            cells.append(f"`{env_name(path)}`")
        if flat is not None:
            cells.append(f"`{earlier[path]}`" if path in earlier else "")
        cells.append(docs.get(name, ""))
        rows.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(rows)


#: the alias block's groups (their keys override the global group's, key by key).
ALIAS_GROUPS = ("window", "recall")


def _is_group(info: FieldInfo) -> bool:
    return isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel)


def _alias_group(name: str) -> type[BaseModel]:
    model = AliasMemoryConfig.model_fields[name].annotation
    assert isinstance(model, type) and issubclass(model, BaseModel)
    return model


def _models() -> list[type[BaseModel]]:
    alias_groups = [_alias_group(name) for name in ALIAS_GROUPS]
    return [MemorySettings, *GROUPS.values(), AliasMemoryConfig, *alias_groups]


def missing_docs() -> list[str]:
    """Settings (and groups) whose class docstring does not describe them."""
    out: list[str] = []
    for model in _models():
        docs = attribute_docs(model)
        out.extend(f"{model.__name__}.{n}" for n in model.model_fields if not docs.get(n))
    return out


def render() -> str:
    """The whole page."""
    parts: list[Any] = [
        HEADER,
        "## Global settings (`callback_settings: memory:`)\n",
        "Outside the groups:\n",
        table(MemorySettings, env=True),
    ]
    for name, model in GROUPS.items():
        parts += [
            f"\n### `{name}`\n",
            _summary(model) + "\n",
            table(model, env=True, group=name, flat=FLAT_KEYS),
        ]
    parts += [
        "\n## Per alias (`model_info: memory:`)\n",
        table(AliasMemoryConfig, env=False),
    ]
    for name in ALIAS_GROUPS:
        model = _alias_group(name)
        parts += [
            f"\n### Per alias `{name}`\n",
            _summary(model) + "\n",
            table(model, env=False, group=name, flat=ALIAS_FLAT_KEYS),
        ]
    return "\n".join(parts) + "\n"


if __name__ == "__main__":
    sys.stdout.write(render())
