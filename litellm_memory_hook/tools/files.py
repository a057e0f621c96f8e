"""Reading a user's file (config.yaml, an import or an export, an oracle file) as UTF-8 text,
with errors of one line that name the file and, for bytes that are not UTF-8, where they are."""

from __future__ import annotations

import codecs
from pathlib import Path

from litellm_memory_hook.errors import MemoryHookError


def not_utf8_message(
    path: Path | str, data: bytes, exc: UnicodeDecodeError, *, base: int = 0, first_line: int = 1
) -> str:
    """``FILE is not UTF-8 text: byte 0xE9 at offset N (line L)``, for ``exc`` raised decoding
    ``data``, which starts at file offset ``base``, on line ``first_line``."""
    offset = base + exc.start
    line = first_line + data.count(b"\n", 0, exc.start)
    byte = data[exc.start : exc.start + 1].hex().upper() or "?"
    return (
        f"{path} is not UTF-8 text: byte 0x{byte} at offset {offset} (line {line}); "
        "save the file as UTF-8"
    )


def read_utf8(path: Path, error: type[MemoryHookError]) -> str:
    """The text of ``path``, decoded as UTF-8 (a leading byte order mark is dropped).

    Raises:
        MemoryHookError: ``error`` with one line: the file cannot be read (missing, a folder, no
            permission), or it holds bytes that are not UTF-8 (the message gives the first
            one's offset and line).
    """
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise error(f"cannot read {path}: {exc.strerror or exc}") from exc
    skip = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0
    try:
        return data[skip:].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(not_utf8_message(path, data[skip:], exc, base=skip)) from exc
