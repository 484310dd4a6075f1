"""The warm workers of a state folder: which run, which code they serve, and ending them.

Each worker (:mod:`tool_failure_guard.hooks.worker`) holds an exclusive
``flock`` on its lock file, ``worker-KEY.lock`` in the state folder, for its
whole life, and writes there one JSON line: its pid, the package version and
install key it serves, and the digest of its modules' stamps
(:func:`~tool_failure_guard.hooks.channel.code_stamps`).  So a folder tells:

- :func:`list_workers`: every worker lock file, whether a worker holds it
  (``running``) and whether it serves the code a fresh hook would load now
  (``current``), for ``hook status``;
- :func:`retire_workers`: end them (uninstall, upgrade): the socket removed,
  ``SIGTERM``, then ``SIGKILL`` past a bound, each pid checked first;
- :func:`end_unresponsive`: the hook's client ends a worker that did not answer
  within its bound (stopped, or stuck holding a session's lock), so a new one
  replaces it.

A pid is signalled only while its lock is held (a dead worker's pid may be
reused, but then nobody holds its lock) and, where ``/proc`` tells, only when
that process's command line is a worker's for this very folder.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import signal
import time

import attrs

from tool_failure_guard.hooks import channel
from tool_failure_guard.hooks.state_folder import WORKER_FILE

# no `typing` at run time: the hook's start-up is its cost (TYPE_CHECKING as mypy reads it)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Final

#: What every worker's command line holds (``python -I -c ...hooks.worker...`` or ``-m``).
_MARK: Final = "tool_failure_guard.hooks.worker"
#: The most bytes of a lock file's record read.
_MAX_RECORD_BYTES: Final = 4096
#: How long :func:`retire_workers` waits for a worker to end after ``SIGTERM``.
RETIRE_WAIT_S: Final = 5.0


@attrs.frozen
class WorkerInfo:
    """One worker lock file of a state folder, as :func:`list_workers` read it."""

    pid: int  #: the pid its worker recorded (0: none recorded)
    version: str  #: the package version it serves ("" when not recorded)
    key: str  #: its install key (the socket's and lock's name)
    running: bool  #: a worker holds the lock now
    current: bool  #: it serves the code and version a fresh hook process would load now


def record(pid: int, version: str, key: str, code: str) -> bytes:
    """The line a worker writes into its lock file."""
    line = json.dumps({"pid": pid, "version": version, "key": key, "code": code})
    return (line + "\n").encode()


def _read_record(fd: int) -> dict[str, Any]:
    text = os.pread(fd, _MAX_RECORD_BYTES, 0).decode("utf-8", "replace").strip()
    if text.isdigit():  # an earlier version's: the pid alone
        return {"pid": int(text)}
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _open(path: str) -> int | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    info = os.fstat(fd)
    if (info.st_mode & 0o170000) != 0o100000 or info.st_uid != os.geteuid():
        os.close(fd)
        return None
    return fd


def _held(fd: int) -> bool:
    """Whether another process holds the lock (taken shared for a moment when not)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    fcntl.flock(fd, fcntl.LOCK_UN)
    return False


def is_worker_of(pid: int, directory: str) -> bool:
    """Whether ``pid`` runs a worker of ``directory`` (where ``/proc`` cannot tell: True)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as stream:
            words = stream.read().split(b"\0")
    except FileNotFoundError:
        return not os.path.isdir("/proc/self")
    except OSError:
        return False
    wanted = os.fsencode(directory)
    return any(_MARK.encode() in word for word in words) and wanted in words


def _current_code() -> tuple[str, str]:
    from tool_failure_guard._version import installed_version

    stamps = channel.code_stamps(channel.metadata_files())
    return installed_version(), channel.code_digest(stamps)


def list_workers(directory: str) -> list[WorkerInfo]:
    """The folder's worker lock files, each with its worker's pid, version, key and state."""
    directory = os.path.abspath(directory)
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return []
    version, code = _current_code()
    key = channel.install_key()
    found = []
    for name in names:
        if not (re.fullmatch(WORKER_FILE, name) and name.endswith(".lock")):
            continue
        fd = _open(os.path.join(directory, name))
        if fd is None:
            continue
        try:
            running, told = _held(fd), _read_record(fd)
        finally:
            os.close(fd)
        pid = told.get("pid")
        pid = pid if isinstance(pid, int) and pid > 0 else 0
        served = str(told.get("version", ""))
        its_key = name[len("worker-") : -len(".lock")]
        current = its_key == key and told.get("code") == code and served == version
        found.append(WorkerInfo(pid, served, its_key, running, current))
    return found


def _signal(directory: str, key: str, number: int) -> int | None:
    """Signal the worker holding ``key``'s lock (its pid checked); the pid, or None."""
    fd = _open(os.path.join(directory, channel.lock_name(key)))
    if fd is None:
        return None
    try:
        if not _held(fd):
            return None
        pid = _read_record(fd).get("pid")
        if not isinstance(pid, int) or pid <= 0 or not is_worker_of(pid, directory):
            return None
        with contextlib.suppress(FileNotFoundError):  # no new client connects to it
            os.unlink(os.path.join(directory, channel.socket_name(key)))
        try:
            os.kill(pid, number)
        except ProcessLookupError:
            return None
        return pid
    finally:
        os.close(fd)


def _lock_free(directory: str, key: str, bound_s: float) -> bool:
    deadline = time.monotonic() + bound_s
    while True:
        fd = _open(os.path.join(directory, channel.lock_name(key)))
        if fd is None:
            return True
        try:
            if not _held(fd):
                return True
        finally:
            os.close(fd)
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)


def end_unresponsive(directory: str, key: str, wait_s: float = 1.0) -> bool:
    """End the worker of ``key`` that did not answer (``SIGKILL``); whether its lock is free."""
    if _signal(directory, key, signal.SIGKILL) is None:
        return False
    return _lock_free(directory, key, wait_s)


def retire_workers(directory: str, wait_s: float = RETIRE_WAIT_S) -> int:
    """End every worker of the folder (``SIGTERM``, ``SIGKILL`` past ``wait_s``); how many.

    Lock files nobody holds are removed too, under their lock.
    """
    directory = os.path.abspath(directory)
    ended = 0
    for worker in list_workers(directory):
        if worker.running and _signal(directory, worker.key, signal.SIGTERM) is not None:
            if not _lock_free(directory, worker.key, wait_s):
                _signal(directory, worker.key, signal.SIGKILL)
                _lock_free(directory, worker.key, wait_s)
            ended += 1
        _remove_unheld(os.path.join(directory, channel.lock_name(worker.key)))
    return ended


def _remove_unheld(path: str) -> None:
    fd = _open(path)
    if fd is None:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.unlink(path)
    except OSError:
        pass
    finally:
        os.close(fd)
