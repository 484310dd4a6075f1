"""The hook's client: a batch event handed to the warm worker, else handled in process.

``tool-failure-guard hook <cli>`` runs here.  An event that may reduce a batch
(:data:`~tool_failure_guard.hooks.clis.WORKER_EVENTS`), with no ``--telemetry``
(telemetry stays in process), is sent to the worker of the state folder
(:mod:`tool_failure_guard.hooks.worker`), and what the worker's
:func:`~tool_failure_guard.hooks.run.run_hook` wrote is written here as it came.
This path imports the stdlib's ``_socket`` and ``json`` and no attrs, guard or core.

Fail open as before: no worker, a stale socket, a refused, broken or slow
exchange (past :data:`EXCHANGE_TIMEOUT_S`) -> the event is handled in process,
with the same answer (the request's id keeps a late worker from applying it a
second time), and a worker is started detached for the next event: one at a
time, the worker lock taken without waiting and handed to the worker.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys

from tool_failure_guard.hooks import channel
from tool_failure_guard.hooks.clis import WORKER_EVENTS
from tool_failure_guard.hooks.payload import MAX_PAYLOAD_BYTES

# no `typing` at run time: the hook's start-up is its cost (TYPE_CHECKING as mypy reads it)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import IO, Any, Final

#: The most seconds the client waits for the worker's answer before handling it itself.
EXCHANGE_TIMEOUT_S: Final = 2.0
#: What the worker is started with: ``python -I`` (no ``PYTHON*`` variable, no current
#: folder on the path) and the package folder the hook runs from first on the path.
_BOOT: Final = (
    "import sys;sys.path.insert(0,sys.argv[1]);"
    "from tool_failure_guard.hooks.worker import main;raise SystemExit(main(sys.argv[2:]))"
)


def _routed(cli: str, data: bytes) -> bool:
    """Whether the payload is a batch event of ``cli`` (anything unreadable: in process)."""
    events = WORKER_EVENTS.get(cli)
    if not events or len(data) > MAX_PAYLOAD_BYTES:
        return False
    try:
        payload = json.loads(data)
    except ValueError:
        return False
    return isinstance(payload, dict) and payload.get("hook_event_name") in events


def exchange(
    directory: str, header: dict[str, Any], data: bytes, timeout: float = EXCHANGE_TIMEOUT_S
) -> tuple[str, str] | None:
    """The worker's (stdout, stderr) for one request, or None (no worker, refused, too slow)."""
    # the C module under ``socket``: ``socket`` itself loads enum and selectors (~5 ms)
    import _socket
    import time

    if not channel.private_folder(directory):
        return None
    deadline = time.monotonic() + timeout
    try:
        address = channel.Address(directory, channel.socket_name(channel.install_key()))
    except OSError:
        return None
    conn = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        conn.settimeout(timeout)
        conn.connect(address.path)
        conn.sendall(json.dumps(header).encode() + b"\n" + data)
        conn.shutdown(_socket.SHUT_WR)
        chunks: list[bytes] = []
        size = 0
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            conn.settimeout(left)
            chunk = conn.recv(65536)
            if not chunk:
                break
            size += len(chunk)
            if size > channel.MAX_REPLY_BYTES:
                return None
            chunks.append(chunk)
        reply = json.loads(b"".join(chunks))
    except (OSError, ValueError):
        return None
    finally:
        conn.close()
        address.close()
    if not isinstance(reply, dict):
        return None
    out, err = reply.get("stdout"), reply.get("stderr")
    if not isinstance(out, str) or not isinstance(err, str):
        return None  # refused: handled in process
    return out, err


def start_worker(directory: str) -> int | None:
    """Start the folder's worker detached unless one lives or starts; its pid, or None."""
    import fcntl

    if not channel.private_folder(directory):
        return None
    path = os.path.join(directory, channel.lock_name(channel.install_key()))
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return None  # a worker lives (or is starting): it holds the lock
        import subprocess

        command = [sys.executable, "-I", "-c", _BOOT, channel.PACKAGE_ROOT]
        command += ["--state-dir", directory, "--lock-fd", str(fd)]
        worker = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd="/",
            pass_fds=(fd,),
            start_new_session=True,
        )
        return worker.pid
    finally:
        os.close(fd)  # the worker holds the lock through its own descriptor


def main(
    cli: str,
    mode: str,
    state_dir: str | None,
    telemetry: str | None,
    *,
    scope: str | None = None,
    argv: Sequence[str] = (),
) -> int:
    """``tool-failure-guard hook <cli>``: the worker's answer, or the in-process one."""
    if telemetry is not None or mode == "off" or cli not in WORKER_EVENTS:
        from tool_failure_guard.hooks.run import main as in_process

        return in_process(cli, mode, state_dir, telemetry, scope=scope, argv=argv)
    install = {"scope": scope, "argv": list(argv)}
    data = sys.stdin.buffer.read(MAX_PAYLOAD_BYTES + 1)
    if not _routed(cli, data):
        return _handle_here(cli, mode, state_dir, io.BytesIO(data), None, install)
    if not state_dir:
        from tool_failure_guard.hooks.state import default_state_dir

        state_dir = str(default_state_dir(cli))
    directory = os.path.abspath(state_dir)
    request = os.urandom(12).hex()
    header = {"cli": cli, "mode": mode, "state_dir": directory, "request": request, **install}
    reply = exchange(directory, header, data)
    if reply is not None:
        _write(*reply)
        return 0
    code = _handle_here(cli, mode, directory, io.BytesIO(data), request, install)
    try:
        start_worker(directory)
    except Exception as error:  # the answer is given; the next event tries again
        print(
            f"tool-failure-guard hook {cli}: could not start the worker "
            f"({type(error).__name__}: {str(error)[:200]})",
            file=sys.stderr,
        )
    return code


def _handle_here(
    cli: str,
    mode: str,
    state_dir: str | None,
    stdin: IO[bytes],
    request: str | None,
    install: dict[str, Any],
) -> int:
    from pathlib import Path

    from tool_failure_guard.hooks.run import HookOptions, run_hook

    options = HookOptions(
        cli=cli,
        mode=mode,
        state_dir=Path(state_dir) if state_dir else None,
        scope=install["scope"],
        argv=install["argv"],
    )
    return run_hook(options, stdin, sys.stdout, sys.stderr, request=request)


def _write(out: str, err: str) -> None:
    try:
        if out:
            sys.stdout.write(out)
            sys.stdout.flush()
        if err:
            sys.stderr.write(err)
            sys.stderr.flush()
    except Exception as error:  # e.g. the CLI closed the pipe (as the in-process hook says)
        with contextlib.suppress(Exception):
            print(
                f"tool-failure-guard hook: could not write the answer ({type(error).__name__})",
                file=sys.stderr,
            )
