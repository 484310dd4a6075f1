"""File access confined to the session's directory, walked from its descriptor, never blocking.

Every path a tool names is opened one component at a time from a descriptor
of the working directory (``openat`` with ``O_NOFOLLOW``), never by handing
the whole path to the kernel.  So a directory swapped for a symlink between a
check and the use cannot redirect the access: the swapped component is a
symlink at the moment it is opened, and a no-follow open refuses it.

* Reads and listings follow a symlink only by reading it and walking its
  target from the same descriptors (``..`` never climbs above the working
  directory, an absolute target must lie inside it): the result is the same
  as resolving symlinks and checking containment, without the race.
* A write follows no symlink at any component (``symlink_refused``) and is
  refused for a file with more than one hard link (``hard_link_refused``): a
  hard link inside the workspace may name a file outside it.
* Only regular files are read or written (``not_a_regular_file``): a named
  pipe, socket or device is refused before it is opened, and every open is
  ``O_NONBLOCK`` and checked with ``fstat`` afterwards, so nothing waits for a
  writer or reader that never comes.

These functions block (they do file IO); the tools run them in a worker
thread (``asyncio.to_thread``), so the event loop never waits on a disk.
Every failure is a :class:`FileAccessError` carrying a stable error type.
"""

from __future__ import annotations

import contextlib
import errno
import os
import posixpath
import stat
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

_T = TypeVar("_T")

#: Symlinks expanded while resolving one path before it is called a loop (Linux's limit).
MAX_SYMLINKS = 40
#: Longest path argument accepted (PATH_MAX).
MAX_PATH_LENGTH = 4096

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_ERROR_TYPES = {
    errno.ENOENT: "file_not_found",
    errno.EISDIR: "is_a_directory",
    errno.ENOTDIR: "not_a_directory",
    errno.EACCES: "permission_denied",
    errno.EPERM: "permission_denied",
    errno.ELOOP: "symlink_loop",
    errno.ENAMETOOLONG: "name_too_long",
    errno.ENXIO: "not_a_regular_file",
    errno.EROFS: "file_write_failure",
    errno.ENOSPC: "no_space_left",
}


_MISSING = {
    "file_not_found": "no such file",
    "directory_not_found": "parent directory missing",
}


class FileAccessError(Exception):
    """A typed file-access failure: ``error_type`` is the classified reason."""

    def __init__(self, error_type: str, message: str) -> None:
        super().__init__(message)
        self.error_type = error_type


def _os_error(exc: OSError, raw: str) -> FileAccessError:
    kind = _ERROR_TYPES.get(exc.errno or 0, "file_system_error")
    reason = exc.strerror or type(exc).__name__
    return FileAccessError(kind, f"{raw[:300]}: {reason.lower()}")


def _outside(raw: str) -> FileAccessError:
    return FileAccessError("path_not_in_workspace", f"{raw[:300]} is outside the session directory")


def _relative_parts(root: Path, cwd: Path, raw: str) -> list[str]:
    """``raw`` as components below the working directory (lexically, before any symlink)."""
    if len(raw) > MAX_PATH_LENGTH:
        raise FileAccessError(
            "name_too_long", f"the path is longer than {MAX_PATH_LENGTH} characters"
        )
    path = posixpath.normpath(raw)
    if posixpath.isabs(path):
        for base in {str(root), posixpath.normpath(str(cwd))}:
            if path == base or path.startswith(base.rstrip("/") + "/"):
                path = posixpath.relpath(path, base)
                break
        else:
            raise _outside(raw)
    parts = [part for part in path.split("/") if part not in ("", ".")]
    if parts and parts[0] == "..":
        raise _outside(raw)
    return parts


class _Walk:
    """The open directories from the root down to the current one (closed on exit)."""

    def __init__(self, root: Path) -> None:
        self.stack = [os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)]

    @property
    def top(self) -> int:
        return self.stack[-1]

    def up(self, raw: str) -> None:
        if len(self.stack) == 1:
            raise _outside(raw)
        os.close(self.stack.pop())

    def reset(self) -> None:
        while len(self.stack) > 1:
            os.close(self.stack.pop())

    def close(self) -> None:
        for fd in self.stack:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.stack = []


def _resolve(
    walk: _Walk, root: Path, cwd: Path, raw: str, *, follow: bool, missing: str
) -> tuple[str, os.stat_result | None]:
    """Walk to the directory holding the last component; return its name and ``lstat``.

    The name is ``"."`` when the path names the working directory itself; the
    stat is None when the last component does not exist.
    """
    pending = list(reversed(_relative_parts(root, cwd, raw)))
    expansions = 0
    while pending:
        name = pending.pop()
        if name in ("", "."):
            continue
        if name == "..":
            walk.up(raw)
            continue
        last = not pending
        try:
            info = os.lstat(name, dir_fd=walk.top)
        except FileNotFoundError:
            if last:
                return name, None
            raise FileAccessError(missing, f"{raw[:300]}: {_MISSING[missing]}") from None
        if stat.S_ISLNK(info.st_mode):
            if not follow:
                raise FileAccessError(
                    "symlink_refused", f"{raw[:300]}: a write follows no symlink ({name[:100]})"
                )
            expansions += 1
            if expansions > MAX_SYMLINKS:
                raise FileAccessError("symlink_loop", f"{raw[:300]}: too many levels of symlinks")
            target = os.readlink(name, dir_fd=walk.top)
            if posixpath.isabs(target):
                walk.reset()
                try:
                    inner = _relative_parts(root, cwd, target)
                except FileAccessError:
                    raise _outside(raw) from None
            else:
                inner = [part for part in target.split("/") if part not in ("", ".")]
            pending.extend(reversed(inner))
            continue
        if last:
            return name, info
        if not stat.S_ISDIR(info.st_mode):
            raise FileAccessError(
                "not_a_directory", f"{raw[:300]}: {name[:100]} is not a directory"
            )
        try:
            walk.stack.append(os.open(name, _DIR_FLAGS, dir_fd=walk.top))
        except OSError as exc:
            if exc.errno == errno.ELOOP:  # swapped for a symlink since the lstat
                raise FileAccessError(
                    "symlink_refused", f"{raw[:300]}: {name[:100]} changed into a symlink"
                ) from None
            raise
    return ".", None


def _confined(root: Path, cwd: Path, raw: str, work: Callable[[_Walk], _T]) -> _T:
    try:
        walk = _Walk(root)
    except OSError as exc:
        raise _os_error(exc, str(root)) from None
    try:
        return work(walk)
    except FileAccessError:
        raise
    except OSError as exc:
        raise _os_error(exc, raw) from None
    except (ValueError, UnicodeError):  # a NUL byte or an unencodable name
        raise FileAccessError("invalid_path", f"{raw[:300]!r} is not a valid path") from None
    finally:
        walk.close()


def _regular(fd: int, raw: str) -> os.stat_result:
    info = os.fstat(fd)
    if stat.S_ISDIR(info.st_mode):
        raise FileAccessError("is_a_directory", f"{raw[:300]} is a directory")
    if not stat.S_ISREG(info.st_mode):
        raise FileAccessError("not_a_regular_file", f"{raw[:300]} is not a regular file")
    return info


def _check_kind(info: os.stat_result | None, raw: str) -> None:
    """Refuse a directory or a non-regular file before opening it (a FIFO, a device)."""
    if info is None:
        return
    if stat.S_ISDIR(info.st_mode):
        raise FileAccessError("is_a_directory", f"{raw[:300]} is a directory")
    if not stat.S_ISREG(info.st_mode):
        raise FileAccessError("not_a_regular_file", f"{raw[:300]} is not a regular file")


def read_file(root: Path, cwd: Path, raw: str, limit: int) -> bytes:
    """At most ``limit`` bytes of the regular file ``raw`` (symlinks followed inside)."""

    def work(walk: _Walk) -> bytes:
        name, info = _resolve(walk, root, cwd, raw, follow=True, missing="file_not_found")
        if name == ".":
            raise FileAccessError("is_a_directory", f"{raw[:300]} is a directory")
        if info is None:
            raise FileAccessError("file_not_found", f"{raw[:300]}: no such file")
        _check_kind(info, raw)
        fd = os.open(
            name, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=walk.top
        )
        try:
            _regular(fd, raw)
            chunks: list[bytes] = []
            left = limit
            while left > 0:
                chunk = os.read(fd, min(left, 1 << 16))
                if not chunk:
                    break
                chunks.append(chunk)
                left -= len(chunk)
            return b"".join(chunks)
        finally:
            os.close(fd)

    return _confined(root, cwd, raw, work)


def write_file(root: Path, cwd: Path, raw: str, data: bytes) -> None:
    """Create or overwrite the regular file ``raw``: no symlink followed, one link only."""

    def work(walk: _Walk) -> None:
        name, info = _resolve(walk, root, cwd, raw, follow=False, missing="directory_not_found")
        if name == ".":
            raise FileAccessError("is_a_directory", f"{raw[:300]} is a directory")
        _check_kind(info, raw)
        flags = os.O_WRONLY | os.O_CREAT | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open(name, flags, 0o666, dir_fd=walk.top)
        except OSError as exc:
            if exc.errno == errno.ELOOP:  # became a symlink since the lstat
                raise FileAccessError(
                    "symlink_refused", f"{raw[:300]}: a write follows no symlink"
                ) from None
            raise
        try:
            written = _regular(fd, raw)
            if written.st_nlink > 1:
                raise FileAccessError(
                    "hard_link_refused",
                    f"{raw[:300]} has {written.st_nlink} hard links; a write could reach "
                    "a file outside the session directory",
                )
            os.ftruncate(fd, 0)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)

    _confined(root, cwd, raw, work)


def list_directory(root: Path, cwd: Path, raw: str) -> list[str]:
    """The sorted entry names of directory ``raw`` (directories end with ``/``)."""

    def work(walk: _Walk) -> list[str]:
        name, info = _resolve(walk, root, cwd, raw, follow=True, missing="directory_not_found")
        if name != "." and info is None:
            raise FileAccessError("directory_not_found", f"{raw[:300]}: no such directory")
        if info is not None and not stat.S_ISDIR(info.st_mode):
            raise FileAccessError("not_a_directory", f"{raw[:300]} is not a directory")
        fd = os.open(name, _DIR_FLAGS, dir_fd=walk.top)
        try:
            with os.scandir(fd) as entries:
                return sorted(
                    entry.name + ("/" if entry.is_dir(follow_symlinks=False) else "")
                    for entry in entries
                )
        finally:
            os.close(fd)

    return _confined(root, cwd, raw, work)
