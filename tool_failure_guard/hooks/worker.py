"""The warm worker: the hook's batch events handled by a process that has the core loaded.

A coding CLI starts one hook process per event, and an event that reduces a
batch loads attrs, the guard and the core first: most of its cost.  The worker
is one long-lived process per state folder and install
(:func:`~tool_failure_guard.hooks.channel.install_key`) that imported them once;
the hook's client (:mod:`tool_failure_guard.hooks.client`) hands it the event
over a Unix socket in the private state folder, and the worker runs the very
function the in-process hook runs (:func:`~tool_failure_guard.hooks.run.run_hook`,
the state file under its lock) and sends back what it wrote on stdout and stderr.

It serves one request at a time, only its own state folder, only its own user
(``SO_PEERCRED`` where the system has it), each request bounded like a hook's
stdin; it reads nothing from a project (it runs in ``/``, started with
``python -I``: no ``PYTHON*`` variable, no current folder on the import path).
It exits after :data:`IDLE_EXIT_S` without a request, or as soon as its socket
is gone or replaced, and removes its socket.

It serves only the code a fresh hook process would load now: it keeps the
stamps of every module of its package and of the distribution's metadata from
its start (:func:`~tool_failure_guard.hooks.channel.code_stamps`), compares
them before every request and while idle, and on a change retires: its socket
removed and its lock released first, the request refused (the client answers
it in process, with the new code, and starts a new worker).  The options come
with each request (every ``HookOptions`` field, from the installed command
line through the client), so they are always the hook's own.  Its waits for a
session's lock are bounded (:data:`WORKER_LOCK_WAIT_S`) below its client's
wait for an answer.  ``python -m tool_failure_guard.hooks.worker --state-dir
DIR [--idle-s S] [--lock-fd N]``; the client starts it detached, handing over
the lock it took.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import json
import os
import socket
import struct
import sys
import time
from pathlib import Path

from tool_failure_guard.hooks import channel
from tool_failure_guard.hooks.clis import HOOK_CLIS
from tool_failure_guard.hooks.payload import MAX_PAYLOAD_BYTES
from tool_failure_guard.hooks.run import HookOptions, cli_module, run_hook
from tool_failure_guard.hooks.state import StateStore
from tool_failure_guard.hooks.workers import record

# no `typing` at run time: the hook's start-up is its cost (TYPE_CHECKING as mypy reads it)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Final

#: A worker with no request for this long (10 minutes) removes its socket and exits.
IDLE_EXIT_S: Final = 600.0
#: How often an idle worker checks that its socket is still its own (seconds).
_CHECK_S: Final = 5.0
#: The most seconds one connection may take to send its request.
_READ_TIMEOUT_S: Final = 5.0
#: The most seconds the worker waits for a session's lock (below the client's 2 s wait).
WORKER_LOCK_WAIT_S: Final = 1.0


def warm_up() -> None:
    """Import every CLI module and what a batch loads (the point of the worker)."""
    import tool_failure_guard.agent_outcomes.claude_code
    import tool_failure_guard.agent_outcomes.codex
    import tool_failure_guard.agent_outcomes.gemini_cli
    import tool_failure_guard.agent_outcomes.qwen_code
    import tool_failure_guard.core
    import tool_failure_guard.hooks.replay  # noqa: F401

    for cli in HOOK_CLIS:
        cli_module(cli)


def _peer_is_us(conn: socket.socket) -> bool:
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:  # the folder's 0700 already keeps other users out
        return True
    size = struct.calcsize("3i")
    _pid, uid, _gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, option, size))
    return bool(uid == os.geteuid())


def _read_request(conn: socket.socket) -> bytes:
    """The whole request (to the client's end of sending), or a ValueError past the bound.

    The whole of it within :data:`_READ_TIMEOUT_S` (a TimeoutError else), however it trickles.
    """
    bound = channel.MAX_HEADER_BYTES + MAX_PAYLOAD_BYTES + 2
    deadline = time.monotonic() + _READ_TIMEOUT_S
    chunks: list[bytes] = []
    size = 0
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"request not sent within {_READ_TIMEOUT_S:g} s")
        conn.settimeout(left)
        chunk = conn.recv(65536)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > bound:
            raise ValueError(f"request larger than {bound} bytes")
        chunks.append(chunk)


def handle_request(data: bytes, directory: str) -> dict[str, Any]:
    """One request's reply: what :func:`run_hook` wrote, or a refusal (the client falls back)."""
    head, newline, payload = data.partition(b"\n")
    if not newline or len(head) > channel.MAX_HEADER_BYTES:
        return {"refused": "no header line within its bound"}
    header = json.loads(head)
    if not isinstance(header, dict):
        return {"refused": "the header is not an object"}
    request = header.pop("request", None)
    if not isinstance(request, str):
        return {"refused": "no request id"}
    try:
        options = HookOptions.from_header(header)
    except (TypeError, ValueError) as error:
        return {"refused": f"not hook options ({str(error)[:200]})"}
    if options.cli not in HOOK_CLIS or options.telemetry is not None:
        return {"refused": "unknown cli, or telemetry (reported in process only)"}
    if str(options.state_dir) != directory:
        return {"refused": "another state folder"}
    stdout, stderr = io.StringIO(), io.StringIO()
    run_hook(options, io.BytesIO(payload), stdout, stderr, request=request)
    return {"stdout": stdout.getvalue(), "stderr": stderr.getvalue()}


def _serve_one(conn: socket.socket, directory: str, refusal: str | None = None) -> None:
    """Read one request and answer it (or refuse it with ``refusal``)."""
    conn.settimeout(_READ_TIMEOUT_S)
    if not _peer_is_us(conn):
        return
    try:
        data = _read_request(conn)
        reply = {"refused": refusal} if refusal else handle_request(data, directory)
    except (OSError, ValueError, RecursionError) as error:  # bad framing: the client falls back
        reply = {"refused": f"{type(error).__name__}"}
    data = json.dumps(reply, ensure_ascii=False).encode("utf-8", "surrogatepass")
    if len(data) <= channel.MAX_REPLY_BYTES:
        conn.sendall(data)


def _changed(watched: list[str], stamps: list[tuple[str, int, int, int]]) -> bool:
    """Whether the installed code differs from the code this worker started with."""
    try:
        return channel.code_stamps(watched) != stamps
    except OSError:  # the package folder is gone (uninstalled): not the code it serves
        return True


def _same_file(path: str, identity: tuple[int, int]) -> bool:
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return (info.st_dev, info.st_ino) == identity


def serve(directory: str, *, idle_s: float = IDLE_EXIT_S, lock_fd: int | None = None) -> int:
    """Listen in ``directory`` until idle for ``idle_s``; 0 when it ends, 1 when it cannot start.

    ``lock_fd``: the worker lock the starting client took (else taken here; a held
    lock means a worker already serves: exit 0).
    """
    key = channel.install_key()
    watched = channel.metadata_files()
    stamps = channel.code_stamps(watched)  # before warming up: a change meanwhile is seen
    StateStore(Path(directory)).ensure_directory()
    StateStore.lock_wait_s = WORKER_LOCK_WAIT_S  # this process serves clients that wait 2 s
    if lock_fd is None:
        path = os.path.join(directory, channel.lock_name(key))
        lock_fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return 0
    from tool_failure_guard._version import installed_version

    os.ftruncate(lock_fd, 0)
    os.pwrite(
        lock_fd, record(os.getpid(), installed_version(), key, channel.code_digest(stamps)), 0
    )
    warm_up()
    address = channel.Address(directory, channel.socket_name(key))
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    real = os.path.join(directory, channel.socket_name(key))
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(address.path)  # a dead worker's (we hold the lock: none lives)
        listener.bind(address.path)
        os.chmod(address.path, 0o600)
        info = os.lstat(real)
        identity = (info.st_dev, info.st_ino)
        listener.listen(16)
        listener.settimeout(min(idle_s, _CHECK_S))
        last = time.monotonic()
        while True:
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                if (
                    time.monotonic() - last >= idle_s
                    or not _same_file(real, identity)
                    or _changed(watched, stamps)
                ):
                    break
                continue
            with conn:
                if _changed(watched, stamps):
                    # retire first (socket gone, lock free): the client starts a new worker
                    with contextlib.suppress(OSError):
                        if _same_file(real, identity):
                            os.unlink(address.path)
                    os.close(lock_fd)
                    with contextlib.suppress(OSError):
                        _serve_one(conn, directory, refusal="retired: the installed code changed")
                    return 0
                with contextlib.suppress(OSError):
                    _serve_one(conn, directory)
            last = time.monotonic()
        if _same_file(real, identity):
            os.unlink(address.path)
    finally:
        listener.close()
        address.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    """``--state-dir DIR [--idle-s S] [--lock-fd N]`` (no argparse: a clear error, exit 2)."""
    words = list(sys.argv[1:] if argv is None else argv)
    values: dict[str, str] = {}
    while words:
        name = words.pop(0)
        if name not in ("--state-dir", "--idle-s", "--lock-fd") or not words:
            print(f"worker: unexpected {name!r}", file=sys.stderr)
            return 2
        values[name] = words.pop(0)
    directory = values.get("--state-dir")
    if not directory or not os.path.isabs(directory):
        print("worker: --state-dir must be an absolute path", file=sys.stderr)
        return 2
    try:
        idle_s = float(values.get("--idle-s", IDLE_EXIT_S))
        lock_fd = int(values["--lock-fd"]) if "--lock-fd" in values else None
    except ValueError as error:
        print(f"worker: {error}", file=sys.stderr)
        return 2
    if not 0 < idle_s <= 24 * 3600:
        print("worker: --idle-s must be within (0, 86400] seconds", file=sys.stderr)
        return 2
    try:
        return serve(directory, idle_s=idle_s, lock_fd=lock_fd)
    except OSError as error:
        print(f"worker: cannot serve {directory!r}: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
