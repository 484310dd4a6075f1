"""Reading a settings file that a project (or a user) controls: regular, bounded, off the loop.

The env files and ``settings.json`` maps (:mod:`~tool_failure_guard.session.config.envconfig`)
sit in the session's ``cwd``, which any cloned repository controls.  A file there
may be a named pipe (opening it for reading waits for a writer, forever), a
symlink to ``/dev/zero`` (reading it never ends), a device, a directory or a
huge file.  :func:`read_settings_file` therefore

* looks at what the path names (following a symlink) before opening it, and
  opens only a regular file, never blocking (``O_NONBLOCK``), then checks the
  opened descriptor is that same regular file (a swap between the look and the
  open is refused too);
* reads at most :data:`MAX_SETTINGS_FILE_BYTES` (one byte more tells it is too
  large);
* refuses everything else with :class:`SettingsFileRefused`, whose ``reason``
  is a fixed type (``not_a_regular_file``, ``too_large``, ``unreadable``,
  ``timed_out``) and whose message names the file.

:func:`read_settings_files` reads several at once in worker threads, each
bounded by :data:`READ_TIMEOUT_S`, so the event loop never waits on one.
"""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import Sequence
from pathlib import Path

from tool_failure_guard.line_input import file_kind
from tool_failure_guard.worker_threads import WorkerThreads

#: Bytes of one env or settings file read at most (a real one is a few KiB).
MAX_SETTINGS_FILE_BYTES = 1024 * 1024
#: Seconds one file may take to read (only a stuck file system takes longer).
READ_TIMEOUT_S = 5.0

NOT_A_REGULAR_FILE = "not_a_regular_file"
TOO_LARGE = "too_large"
UNREADABLE = "unreadable"
TIMED_OUT = "timed_out"

#: The reads run here, never on the event loop (a stuck read keeps one thread, no more).
_READS = WorkerThreads(4, "settings-read")


class SettingsFileRefused(Exception):
    """A settings file that was not read; ``reason`` is one of the fixed types above."""

    def __init__(self, path: Path, reason: str, detail: str) -> None:
        super().__init__(f"{path}: not read ({reason}): {detail}")
        self.path = path
        self.reason = reason


def read_settings_file(path: Path, limit: int = MAX_SETTINGS_FILE_BYTES) -> bytes | None:
    """The bytes of ``path``, None when it does not exist; else :class:`SettingsFileRefused`.

    Blocking (it stats and reads a file): call it from a worker thread, as
    :func:`read_settings_files` does.
    """
    try:
        before = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise SettingsFileRefused(path, UNREADABLE, exc.strerror or str(exc)) from None
    if not stat.S_ISREG(before.st_mode):
        raise SettingsFileRefused(
            path, NOT_A_REGULAR_FILE, f"it is {file_kind(before.st_mode)}, not a regular file"
        )
    if before.st_size > limit:
        raise SettingsFileRefused(
            path, TOO_LARGE, f"{before.st_size} bytes, more than the {limit} read at most"
        )
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise SettingsFileRefused(path, UNREADABLE, exc.strerror or str(exc)) from None
    try:
        opened = os.fstat(fd)
        if not stat.S_ISREG(opened.st_mode) or (opened.st_dev, opened.st_ino) != (
            before.st_dev,
            before.st_ino,
        ):
            raise SettingsFileRefused(
                path, NOT_A_REGULAR_FILE, "it was replaced by something else while opened"
            )
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            chunk = os.read(fd, min(64 * 1024, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise SettingsFileRefused(path, TOO_LARGE, f"more than the {limit} bytes read at most")
        return b"".join(chunks)
    except OSError as exc:
        raise SettingsFileRefused(path, UNREADABLE, exc.strerror or str(exc)) from None
    finally:
        os.close(fd)


async def read_settings_files(
    paths: Sequence[Path], *, timeout: float = READ_TIMEOUT_S
) -> list[bytes | SettingsFileRefused | None]:
    """Each file's bytes, None (absent) or its refusal; read concurrently off the loop."""
    loop = asyncio.get_running_loop()

    async def one(path: Path) -> bytes | SettingsFileRefused | None:
        future = loop.run_in_executor(_READS.executor, read_settings_file, path)
        try:
            return await asyncio.wait_for(future, timeout)
        except TimeoutError:
            return SettingsFileRefused(path, TIMED_OUT, f"reading took longer than {timeout:g}s")
        except SettingsFileRefused as exc:
            return exc

    return list(await asyncio.gather(*(one(path) for path in paths)))
