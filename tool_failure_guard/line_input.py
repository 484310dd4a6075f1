"""Bounded input: lines (`replay`, the transcript importers) and whole small files.

Lines come from a plain file, a `.gz` file or stdin.

Every source is read the same way: one line at a time, each at most
:data:`MAX_LINE_CHARS` characters, so memory stays bounded whatever the input
holds.  A ``.jsonl.gz`` (any name ending ``.gz``) is decompressed as it is
read, never as a whole: a gzip bomb is read in bounded pieces like any other
long input, and one that inflates to a line past the limit stops with
:class:`InputLineError`, exit status 2, like such a line in a plain file.  A
corrupt or truncated gzip stream is :class:`CorruptInput` (exit status 2)
after the decisions of every line read before it.

A file read whole (a scenario, a system prompt) is read with :func:`read_small_text`:
at most its bound plus one byte, so ``/dev/zero`` or a runaway file is
:class:`InputTooLarge` naming the file and the bound, never memory without end.
"""

from __future__ import annotations

import gzip
import io
import stat
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Final

#: The longest line read (characters); a batch receipt is far smaller.
MAX_LINE_CHARS: Final = 16 * 1024 * 1024


class InputLineError(ValueError):
    """A line longer than :data:`MAX_LINE_CHARS` (the message names the line)."""


class InputTooLarge(ValueError):
    """A file read whole is past its bound (the message names the file and the bound)."""


class CorruptInput(ValueError):
    """A ``.gz`` input that is not a complete gzip stream (the message says what)."""


def bounded_lines(stream: IO[str], limit: int = MAX_LINE_CHARS) -> Iterator[str]:
    """The lines of ``stream``, each read with at most ``limit`` characters held."""
    number = 0
    while True:
        text = stream.readline(limit + 1)
        if not text:
            return
        number += 1
        if len(text) > limit:
            raise InputLineError(f"line {number}: longer than {limit} characters")
        yield text


@contextmanager
def open_lines(path: str, limit: int = MAX_LINE_CHARS) -> Iterator[Iterator[str]]:
    """The bounded lines of ``path`` (``.gz``: decompressed on the fly).

    Raises :class:`OSError` when the file cannot be opened, :class:`CorruptInput`
    when a ``.gz`` file's stream is damaged (on opening or mid-way), and
    :class:`UnicodeDecodeError` for text that is not UTF-8.
    """
    if not path.endswith(".gz"):
        with open(path, encoding="utf-8") as handle:
            yield bounded_lines(handle, limit)
        return
    with open(path, "rb") as raw:
        text = io.TextIOWrapper(gzip.GzipFile(fileobj=raw, mode="rb"), encoding="utf-8")
        yield _gunzipped(bounded_lines(text, limit), path)


def _gunzipped(lines: Iterator[str], path: str) -> Iterator[str]:
    try:
        yield from lines
    except (gzip.BadGzipFile, EOFError, zlib.error) as error:
        detail = str(error) or type(error).__name__
        if isinstance(error, EOFError):
            detail = "the gzip stream ends early (truncated)"
        raise CorruptInput(f"{path} is not a readable gzip file: {detail}") from None


def read_small_text(path: str, limit: int, what: str) -> str:
    """The UTF-8 text of ``path``, read whole but never more than ``limit`` bytes.

    Raises :class:`OSError` when it cannot be read, :class:`InputTooLarge` past
    ``limit`` bytes (``what`` names the input in the message, e.g. "scenario file")
    and :class:`UnicodeDecodeError` for text that is not UTF-8.
    """
    with open(path, "rb") as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise InputTooLarge(f"{path}: the {what} is over {limit:,} bytes (the bound)")
    return data.decode("utf-8")


def file_kind(mode: int) -> str:
    """What a file that is not a regular file is, for an error naming it (``os.stat`` mode)."""
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a directory"
    return "not a regular file"
