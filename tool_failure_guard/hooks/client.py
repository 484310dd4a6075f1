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
time, the worker lock taken without waiting and handed to the worker.  A
worker that did not answer within the bound (stopped, or stuck holding a
session's lock) is ended first (:func:`~tool_failure_guard.hooks.workers.end_unresponsive`),
so the next event has a new one instead of waiting again; a worker that
refused because the installed code changed has already retired.  Anything
that goes wrong here (an unreadable stdin, no home folder) fails open too:
exit 0, nothing on stdout, one line on stderr.
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
    from typing import IO, Final

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
    except (ValueError, RecursionError):
        return False
    if not isinstance(payload, dict):
        return False
    name = payload.get("hook_event_name")
    return isinstance(name, str) and name in events


#: How an exchange ended: answered, no worker there, refused (or broken), or no answer in time.
ANSWERED, ABSENT, REFUSED, TIMED_OUT = "answered", "absent", "refused", "timed out"


def exchange(
    directory: str, header: dict[str, str | None], data: bytes, timeout: float = EXCHANGE_TIMEOUT_S
) -> tuple[str, str] | None:
    """The worker's (stdout, stderr) for one request, or None (no worker, refused, too slow)."""
    return _exchange(directory, header, data, timeout)[1]


def _exchange(
    directory: str, header: dict[str, str | None], data: bytes, timeout: float
) -> tuple[str, tuple[str, str] | None]:
    """How the exchange ended, and the worker's (stdout, stderr) when it answered."""
    # the C module under ``socket``: ``socket`` itself loads enum and selectors (~5 ms)
    import _socket
    import time

    if not channel.private_folder(directory):
        return ABSENT, None
    deadline = time.monotonic() + timeout
    try:
        address = channel.Address(directory, channel.socket_name(channel.install_key()))
    except OSError:
        return ABSENT, None
    conn = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        conn.settimeout(timeout)
        try:
            conn.connect(address.path)
        except TimeoutError:
            return TIMED_OUT, None  # a full backlog: the worker takes nothing
        except OSError:
            return ABSENT, None
        conn.settimeout(max(0.001, deadline - time.monotonic()))
        conn.sendall(json.dumps(header).encode() + b"\n" + data)
        conn.shutdown(_socket.SHUT_WR)
        chunks: list[bytes] = []
        size = 0
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return TIMED_OUT, None
            conn.settimeout(left)
            chunk = conn.recv(65536)
            if not chunk:
                break
            size += len(chunk)
            if size > channel.MAX_REPLY_BYTES:
                return REFUSED, None
            chunks.append(chunk)
        reply = json.loads(b"".join(chunks))
    except TimeoutError:
        return TIMED_OUT, None
    except (OSError, ValueError):
        return REFUSED, None
    finally:
        conn.close()
        address.close()
    if not isinstance(reply, dict):
        return REFUSED, None
    out, err = reply.get("stdout"), reply.get("stderr")
    if not isinstance(out, str) or not isinstance(err, str):
        return REFUSED, None  # handled in process
    return ANSWERED, (out, err)


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
    cli: str, mode: str, state_dir: str | None, telemetry: str | None, **more: str | None
) -> int:
    """``tool-failure-guard hook <cli>``: the worker's answer, or the in-process one.

    ``more``: the other ``HookOptions`` fields from the command line (each carried to
    the worker in the request's header, and to the in-process hook).
    """
    try:
        return _main(cli, {"mode": mode, "state_dir": state_dir, "telemetry": telemetry, **more})
    except Exception as error:  # fail open: the CLI goes on as without the guard
        reason = str(error).splitlines()[0] if str(error) else ""
        with contextlib.suppress(Exception):
            print(
                f"tool-failure-guard hook {cli}: failing open "
                f"({type(error).__name__}: {reason[:300]})",
                file=sys.stderr,
            )
        return 0


def _main(cli: str, fields: dict[str, str | None]) -> int:
    stdin = getattr(sys.stdin, "buffer", None)  # None: the CLI closed the hook's stdin
    if fields["telemetry"] is not None or fields["mode"] == "off" or cli not in WORKER_EVENTS:
        return _handle_here(cli, fields, stdin or io.BytesIO(), None)
    data = stdin.read(MAX_PAYLOAD_BYTES + 1) if stdin is not None else b""
    if not _routed(cli, data):
        return _handle_here(cli, fields, io.BytesIO(data), None)
    state_dir = fields["state_dir"]
    if not state_dir:
        from tool_failure_guard.hooks.state import default_state_dir

        state_dir = str(default_state_dir(cli))
    directory = os.path.abspath(state_dir)
    fields = {**fields, "state_dir": directory}
    request = os.urandom(12).hex()
    ended, reply = _exchange(
        directory, {"cli": cli, **fields, "request": request}, data, EXCHANGE_TIMEOUT_S
    )
    if reply is not None:
        _write(*reply)
        return 0
    if ended == TIMED_OUT:  # stopped, or stuck (maybe holding the session's lock): replace it
        _end_worker(cli, directory)
    code = _handle_here(cli, fields, io.BytesIO(data), request)
    try:
        start_worker(directory)
    except Exception as error:  # the answer is given; the next event tries again
        print(
            f"tool-failure-guard hook {cli}: could not start the worker "
            f"({type(error).__name__}: {str(error)[:200]})",
            file=sys.stderr,
        )
    return code


def _end_worker(cli: str, directory: str) -> None:
    try:
        from tool_failure_guard.hooks.workers import end_unresponsive

        end_unresponsive(directory, channel.install_key())
    except Exception as error:  # the event is still answered in process
        print(
            f"tool-failure-guard hook {cli}: could not end the unresponsive worker "
            f"({type(error).__name__}: {str(error)[:200]})",
            file=sys.stderr,
        )


def _handle_here(
    cli: str, fields: dict[str, str | None], stdin: IO[bytes], request: str | None
) -> int:
    from tool_failure_guard.hooks.run import HookOptions, run_hook

    options = HookOptions.from_header({"cli": cli, **fields})
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
