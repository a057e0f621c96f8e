"""How every command of the CLI reports errors, and the top-level command group that makes it so.

A command that fails prints one line, ``error: ...``, on stderr and exits with a
non-zero code (2 for a problem the command recognised, 1 for anything else); ``--debug``
(anywhere on the command line) shows the full traceback instead. A usage error (a missing
option, an unknown command or option, a bad option value) is one such line too, naming the
``--help`` to read, exit code 2; a command group given no command shows its help.
"""

from __future__ import annotations

import inspect
import json
import os
import sys
from collections.abc import Iterator
from contextlib import suppress
from typing import Any

import typer
from redis.exceptions import RedisError
from rich.text import Text

# typer 0.29+ carries its own copy of click (pyproject requires it); the usage-error handling
# below needs its exception classes, NoArgsIsHelpError included
from typer._click import core as click_core
from typer._click import exceptions as click_exceptions
from typer._click.globals import get_current_context
from typer.core import TyperGroup

from litellm_memory_hook.errors import MemoryHookError
from litellm_memory_hook.tools.cli_common import err_console

DEBUG_KEY = "litellm_memory_debug"


DEBUG_NOTE = "Errors are one line; add --debug anywhere on the command line for the traceback."


def fail(message: str, code: int = 2) -> typer.Exit:
    """Print ``error: MESSAGE`` as one line on stderr (line breaks in ``MESSAGE``, e.g. from a
    library's exception text, become spaces; a lone surrogate, which no terminal can be sent,
    is shown as its ``\\udXXX`` escape); returns the exit to raise."""
    line = " ".join(part.strip() for part in message.splitlines() if part.strip())
    line = line.encode("utf-8", "backslashreplace").decode("utf-8")
    err_console.print(Text.assemble(("error: ", "red"), line), soft_wrap=True, highlight=False)
    return typer.Exit(code=code)


def describe(exc: BaseException) -> str:
    """One line that says what went wrong, for errors no command turned into a message."""
    import httpx

    try:
        import openai

        if isinstance(exc, openai.APIConnectionError):
            return f"cannot reach the proxy ({exc}); is it running? (litellm-memory serve)"
        if isinstance(exc, openai.APIStatusError):
            return f"the proxy answered {exc.status_code}: {str(exc.message)[:300]}"
    except ImportError:  # pragma: no cover - a dependency
        pass
    if isinstance(exc, httpx.HTTPStatusError):
        return f"{exc.request.url} answered {exc.response.status_code}: {exc.response.text[:300]}"
    if isinstance(exc, httpx.TransportError):
        where = ""
        with suppress(RuntimeError):  # no request attached
            where = f" {exc.request.url}"
        return f"cannot reach{where}: {exc or type(exc).__name__}; is it running?"
    if isinstance(exc, RedisError):
        return f"Redis: {exc}"
    if isinstance(exc, FileNotFoundError):
        return f"file not found: {exc.filename or exc}"
    if isinstance(exc, PermissionError):
        return f"permission denied: {exc.filename or exc}"
    if isinstance(exc, json.JSONDecodeError):
        return f"not valid JSON: {exc}"
    if isinstance(exc, MemoryHookError):
        return str(exc)
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"{type(exc).__name__}: {text[:400]} (run with --debug for the traceback)"


def debug_enabled() -> bool:
    """Whether ``--debug`` was given to the running command."""
    ctx = get_current_context(silent=True)
    return bool(ctx is not None and ctx.find_root().meta.get(DEBUG_KEY))


def _all_commands(group: Any) -> Iterator[Any]:
    for command in getattr(group, "commands", {}).values():
        yield command
        yield from _all_commands(command)


def _plain_usage(param: Any) -> None:
    """Show an argument in usage lines as ``FILE`` (its metavar, else its name in capitals),
    not typer's ``{file}``."""
    if getattr(param, "param_type_name", "") != "argument" or getattr(param, "_plain", False):
        return
    if param.metavar is None and param.name:
        param.metavar = str(param.name).upper()
    original = param.get_usage_pieces

    def pieces(ctx: Any) -> list[str]:
        return [p[1:-1] if p.startswith("{") and p.endswith("}") else p for p in original(ctx)]

    object.__setattr__(param, "get_usage_pieces", pieces)
    object.__setattr__(param, "_plain", True)


def _errors_name_the_command(command: Any) -> None:
    """Make the usage errors ``command`` raises while parsing its arguments carry its context
    (click's parser raises some without one, e.g. ``Option '--user' requires an argument``), so
    that :func:`usage_failure` can name the ``--help`` to read."""
    if getattr(command, "_names_itself", False):
        return
    original = command.parse_args

    def parse_args(ctx: Any, args: list[str]) -> Any:
        try:
            return original(ctx, args)
        except click_exceptions.UsageError as exc:
            if exc.ctx is None:
                exc.ctx = ctx
            raise

    object.__setattr__(command, "parse_args", parse_args)
    object.__setattr__(command, "_names_itself", True)


def reflow(text: str) -> str:
    """A docstring's paragraphs as one line each (the terminal wraps them at its width): typer
    prints a help text's line breaks as they are, so a paragraph wrapped at 100 columns in the
    source broke mid-sentence at 80. A paragraph with a line that starts with white space,
    ``- `` or ``* `` (a list, an example) keeps its lines."""
    paragraphs = inspect.cleandoc(text).split("\n\n")
    out = []
    for paragraph in paragraphs:
        lines = paragraph.split("\n")
        listed = any(line[:1] in (" ", "\b") or line[:2] in ("- ", "* ") for line in lines)
        out.append(paragraph if listed else " ".join(line.strip() for line in lines))
    return "\n\n".join(out)


def adopt_command(group: Any) -> None:
    """Give every command under ``group`` the CLI's usage lines (:func:`_plain_usage`) and
    usage errors that name its ``--help`` (:func:`_errors_name_the_command`): the top-level
    group's at its start, a group loaded later (``bench``) when it is loaded."""
    for command in _all_commands(group):
        _errors_name_the_command(command)
        if isinstance(getattr(command, "help", None), str):
            command.help = reflow(command.help)
        for param in getattr(command, "params", ()):
            _plain_usage(param)


def usage_error(message: str) -> click_exceptions.UsageError:
    """A usage error of the running command (one line naming its ``--help``, exit code 2, once
    :class:`CommandGroup` catches it), for option values that are wrong together."""
    return click_exceptions.UsageError(message, get_current_context(silent=True))


def usage_failure(exc: click_exceptions.ClickException) -> typer.Exit:
    """Print a usage error (or another click error) as one ``error: ...`` line naming the
    ``--help`` of the command it concerns; returns the exit to raise (click's code: 2 for a
    usage error)."""
    message = " ".join(exc.format_message().split()).rstrip(".")
    ctx = getattr(exc, "ctx", None)
    if isinstance(exc, click_exceptions.UsageError) and ctx is not None:
        message += f"; see {ctx.command_path} --help"
    return fail(message, code=exc.exit_code)


class CommandGroup(TyperGroup):
    """The top-level command group: ``--debug`` is accepted anywhere on the command line, and
    every error is printed as one line: usage errors (:func:`usage_failure`, exit code 2) and
    errors that no command turned into a message (exit code 1) instead of typer's usage box or
    a traceback (with ``--debug``: the traceback of an unexpected error)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        adopt_command(self)
        note = DEBUG_NOTE
        if note not in (self.epilog or ""):
            self.epilog = f"{self.epilog}\n\n{note}" if self.epilog else note

    def parse_args(self, ctx: click_core.Context, args: list[str]) -> list[str]:
        """Take ``--debug`` out of the arguments wherever it is (before a ``--``)."""
        end = args.index("--") if "--" in args else len(args)
        if "--debug" in args[:end]:
            ctx.meta[DEBUG_KEY] = True
            args = [a for i, a in enumerate(args) if i >= end or a != "--debug"]
        try:
            return super().parse_args(ctx, args)
        except click_exceptions.NoArgsIsHelpError:
            raise
        except click_exceptions.ClickException as exc:
            if isinstance(exc, click_exceptions.UsageError) and exc.ctx is None:
                exc.ctx = ctx
            raise usage_failure(exc) from None

    def invoke(self, ctx: click_core.Context) -> Any:
        """Run the command; turn a usage error, and an unexpected exception unless debugging,
        into one line."""
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort, click_exceptions.NoArgsIsHelpError):
            raise
        except click_exceptions.ClickException as exc:
            raise usage_failure(exc) from None
        except BrokenPipeError:  # `... | head`: the reader is gone; stop quietly
            with suppress(OSError, ValueError):
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise typer.Exit(code=1) from None
        except Exception as exc:
            if ctx.meta.get(DEBUG_KEY):
                raise
            raise fail(describe(exc), code=1) from None


__all__ = [
    "DEBUG_NOTE",
    "CommandGroup",
    "adopt_command",
    "debug_enabled",
    "describe",
    "fail",
    "usage_error",
    "usage_failure",
]
