"""A worker stuck while it holds a session's lock is replaced; nobody waits without bound.

Issue 40 item 4: a worker stopped (``SIGSTOP``) in the middle of a request, holding
the session's ``flock``, blocked every later hook of that session until the CLI
killed each at its timeout.  Here the worker is stopped at the moment ``/proc/locks``
shows it holding the session file's lock (a batch whose replay takes a while, so
the moment is long); the client that sent the request, and a per-call hook of the
same session started meanwhile, both finish well under a CLI's 30 s timeout, with
the in-process answer, and the next batch is a new worker's.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hook_workers import comparable_state, stop_workers, worker_pids

from tool_failure_guard.hooks import channel
from tool_failure_guard.hooks.run import HookOptions, run_hook

_CLIENT = [sys.executable, "-m", "tool_failure_guard", "hook", "claude-code", "--mode", "enforce"]
_WORKER = [sys.executable, "-m", "tool_failure_guard.hooks.worker"]


@pytest.fixture
def folders(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    yield tmp_path / "served", tmp_path / "reference"
    stop_workers(tmp_path)


def _batch(n: int, calls: int = 1000) -> dict[str, Any]:
    entries = [
        {"tool_use_id": f"b{n}c{i}", "tool_name": "Read", "tool_response": "x"}
        for i in range(calls)
    ]
    return {
        "hook_event_name": "PostToolBatch",
        "session_id": "s",
        "prompt_id": "p",
        "tool_calls": entries,
    }


def _failure(call_id: str) -> dict[str, Any]:
    return {
        "hook_event_name": "PostToolUseFailure",
        "session_id": "s",
        "prompt_id": "p",
        "tool_use_id": call_id,
        "tool_name": "Read",
        "error": "File does not exist.",
        "is_interrupt": False,
    }


def _in_process(directory: Path, payload: dict[str, Any]) -> str:
    out, err = io.StringIO(), io.StringIO()
    options = HookOptions(cli="claude-code", mode="enforce", state_dir=directory)
    run_hook(options, io.BytesIO(json.dumps(payload).encode()), out, err)
    assert err.getvalue() == ""
    return out.getvalue()


def _holds_flock(pid: int, path: Path) -> bool:
    """Whether ``pid`` holds a ``flock`` on ``path``'s inode now (``/proc/locks``)."""
    try:
        info = os.stat(path)
        text = Path("/proc/locks").read_text()
    except OSError:
        return False
    inode = f":{info.st_ino} "
    return any(
        line.split()[1] == "FLOCK" and line.split()[4] == str(pid) and inode in line
        for line in text.splitlines()
        if len(line.split()) > 5
    )


def _state(directory: Path) -> dict[str, Any]:
    return comparable_state(directory / "s.json")


@pytest.mark.skipif(not os.path.exists("/proc/locks"), reason="needs /proc/locks to see a flock")
def test_a_worker_stopped_holding_the_session_lock_is_replaced(
    folders: tuple[Path, Path],
) -> None:
    served, reference = folders
    for n in range(5):  # a prompt some way in: each batch's replay takes a while
        for directory in (served, reference):
            _in_process(directory, _batch(n))
    worker = subprocess.Popen([*_WORKER, "--state-dir", str(served), "--idle-s", "120"])
    sock = served / channel.socket_name(channel.install_key())
    deadline = time.monotonic() + 30
    while not sock.exists():
        assert time.monotonic() < deadline
        time.sleep(0.02)
    caught = False
    for n in range(5, 10):  # until the worker is caught holding the lock (the first, mostly)
        payload = _batch(n)
        expected = _in_process(reference, payload)
        request = served.parent / f"batch-{n}.json"
        request.write_text(json.dumps(payload))
        with request.open("rb") as stdin:
            client = subprocess.Popen(
                [*_CLIENT, "--state-dir", str(served)],
                stdin=stdin,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
        while client.poll() is None and not caught:
            if _holds_flock(worker.pid, served / "s.json"):
                os.kill(worker.pid, signal.SIGSTOP)  # stuck, the session's lock held
                caught = True
        if caught:  # a per-call hook of the session arrives meanwhile: it waits, bounded
            per_call = subprocess.run(
                [*_CLIENT, "--state-dir", str(served)],
                input=json.dumps(_failure("late")).encode(),
                capture_output=True,
                timeout=25,
            )
            _in_process(reference, _failure("late"))
            assert per_call.returncode == 0 and per_call.stdout == b""
        out, err = client.communicate(timeout=25)  # under Claude Code's 30 s hook timeout
        assert client.returncode == 0 and (out.decode(), err) == (expected, b"")
        if caught:
            break
    assert caught, "the worker was never seen holding the session's lock"
    assert worker.wait(timeout=30) == -signal.SIGKILL  # ended by the client, lock freed
    # a new worker answers the next batch; the state is the reference's (nothing twice)
    deadline = time.monotonic() + 30
    while not (sock.exists() and worker_pids(served)):
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert worker.pid not in worker_pids(served)
    last = _batch(99, calls=3)
    done = subprocess.run(
        [*_CLIENT, "--state-dir", str(served)],
        input=json.dumps(last).encode(),
        capture_output=True,
        timeout=25,
        check=True,
    )
    assert done.stdout.decode() == _in_process(reference, last) and done.stderr == b""
    assert _state(served) == _state(reference)
