"""The command-line page (``docs/cli.md``), generated from the CLI's own ``--help``: every
command and group of ``litellm-memory``, its help as the command prints it, at a fixed width
(:data:`WIDTH`). ``tests/unit/test_cli_doc.py`` fails when the page is stale.

Run ``python -m litellm_memory_hook.tools.cli_doc > docs/cli.md``.

Only the public ``cli.app`` is read (and ``cli.main``, the console script, run once with
``--help`` so that the commands it adds when it starts are there too), so the page follows the
CLI wherever its commands live.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

#: the width the help is rendered at (the page does not depend on the terminal).
WIDTH = 100

#: the program name as the console script is installed (pyproject.toml).
PROG = "litellm-memory"

REPO = Path(__file__).resolve().parents[2]

HEADER = """# The command line

Generated from `litellm-memory --help` by
`python -m litellm_memory_hook.tools.cli_doc > docs/cli.md`; a test fails when this page and the
code differ. What the commands are for: [quickstart](quickstart.md),
[memory API](memory-api.md) (the data commands), [operations](operations.md) (`doctor`,
`stats`, `worker`), [benchmarks](benchmarks.md) (`bench`, `replay`).

- Errors are one line, `error: ...`, with a non-zero exit code (Redis down, proxy down, a
  missing or bad file, an unknown alias). Add `--debug` anywhere on the command line to see the
  traceback of an unexpected one.
- Usage errors are one such line too, exit code 2, naming the help to read
  (`error: Missing option '--user'; see litellm-memory export --help`). A group given no
  command (`litellm-memory bench`) shows its help.
- Ports are checked as options: `--port` is 1 to 65535, `--standin-port` 0 to 65535 (0: no
  stand-in). `serve` and `doctor` refuse the same port for both, as a usage error.
- A bad setting is named as you set it, with its value and what it should be, one clause per
  problem: `error: invalid setting LITELLM_MEMORY_RECALL__K ('abc'): Input should be a valid
  integer, ...`, or `callback_settings.memory.window.max_chars (5): ...` for a key of the file. A
  Redis URL's value is not repeated. The proxy logs the same line at the first memory request
  and passes requests through without memory.
- A file that is not UTF-8 (config.yaml, an import, an export) is named with the offset and
  line of its first bad byte. `import` and `export` show progress bars on a terminal.
- Which Redis: the configured one (`redis.url`, `LITELLM_MEMORY_REDIS__URL`, `REDIS_URL`), else
  the embedded one of `serve` in `--data-dir` (`.litellm-memory`). Run the commands from the
  folder where you ran `serve`, or pass the same `--data-dir`. They attach to that Redis and
  never stop it; one that finds a running `serve`'s Redis gone starts it again and leaves it to
  that `serve`.
- Which config: `--config`, else `config.yaml` in the working folder, else the config of the
  `serve` on `--data-dir` (the one its `serve.json` names, else its `serve-config.yaml`). So
  `--data-dir` alone works from any folder. `stats` needs no config at all (the environment's
  settings then).
"""


@contextlib.contextmanager
def _argv(args: list[str]) -> Iterator[None]:
    saved = sys.argv
    sys.argv = args
    try:
        yield
    finally:
        sys.argv = saved


def _root() -> Any:
    """The click command of ``litellm-memory``, with every command the console script has."""
    import typer

    from litellm_memory_hook.tools import cli

    main = getattr(cli, "main", None)
    if main is not None:  # the console script may add commands when it starts
        with (
            _argv([PROG, "--help"]),
            contextlib.redirect_stdout(io.StringIO()),
            contextlib.suppress(SystemExit),
        ):
            main()
    return typer.main.get_command(cli.app)


def _portable(command: Any) -> None:
    """Defaults that name a file of this checkout are shown relative to it."""
    for param in getattr(command, "params", []):
        default = param.default
        if isinstance(default, str | os.PathLike):
            text = os.fspath(default)
            if isinstance(text, str) and text.startswith(f"{REPO}{os.sep}"):
                relative = os.path.relpath(text, REPO)
                param.default = Path(relative) if isinstance(default, Path) else relative


def _walk(command: Any, path: list[str], parent: Any) -> Iterator[tuple[list[str], Any, Any]]:
    context = command.context_class(
        command,
        info_name=path[-1],
        parent=parent,
        terminal_width=WIDTH,
        max_content_width=WIDTH,
    )
    yield path, command, context
    if hasattr(command, "list_commands"):
        for name in command.list_commands(context):
            child = command.get_command(context, name)
            if child is not None and not getattr(child, "hidden", False):
                yield from _walk(child, [*path, name], context)


def _slug(title: str) -> str:
    """GitHub's anchor of a heading."""
    return re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")


def commands() -> list[str]:
    """Every command and group, as typed (``litellm-memory bench recall``)."""
    return [" ".join(path) for path, _, _ in _walk(_root(), [PROG], None)]


def render() -> str:
    """The whole page."""
    sections: list[str] = []
    contents: list[str] = []
    for path, command, context in _walk(_root(), [PROG], None):
        command.rich_markup_mode = None  # plain click help: no boxes, no terminal colours
        _portable(command)
        title = " ".join(path)
        text = command.get_help(context).rstrip()
        sections.append(f"## {title}\n\n```text\n{text}\n```\n")
        if len(path) > 1:
            summary = command.get_short_help_str(limit=1000)
            indent = "  " * (len(path) - 2)
            contents.append(f"{indent}- [`{' '.join(path[1:])}`](#{_slug(title)}): {summary}")
    return "\n".join([HEADER, "## Commands\n", *contents, "", *sections])


if __name__ == "__main__":
    sys.stdout.write(render())
