"""``hooks.workers``: which workers a state folder has, which code they serve, ending them.

For ``hook status`` and ``hook uninstall`` (helper ``install``): real workers started
as the hook's client starts them; every one killed by pid at teardown.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hook_workers import stop_workers, worker_pids

from tool_failure_guard._version import installed_version
from tool_failure_guard.hooks import channel
from tool_failure_guard.hooks.workers import WorkerInfo, list_workers, retire_workers

_WORKER = [sys.executable, "-m", "tool_failure_guard.hooks.worker"]


@pytest.fixture
def folder(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "state"
    stop_workers(tmp_path)


def _start(folder: Path) -> subprocess.Popen[bytes]:
    worker = subprocess.Popen([*_WORKER, "--state-dir", str(folder), "--idle-s", "120"])
    deadline = time.monotonic() + 30
    while not (folder / channel.socket_name(channel.install_key())).exists():
        assert time.monotonic() < deadline and worker.poll() is None
        time.sleep(0.02)
    return worker


def test_a_running_worker_is_listed_with_its_version_and_key(folder: Path) -> None:
    worker = _start(folder)
    old = folder / "worker-0123456789abcdef.lock"  # an earlier install's, nobody holds it
    old.write_text(json.dumps({"pid": 1, "version": "0.0.1", "key": "0123456789abcdef"}))
    listed = sorted(list_workers(str(folder)), key=lambda w: w.key)
    mine = WorkerInfo(worker.pid, installed_version(), channel.install_key(), True, True)
    gone = WorkerInfo(1, "0.0.1", "0123456789abcdef", False, False)
    assert listed == sorted([mine, gone], key=lambda w: w.key)


def test_retire_ends_every_worker_and_removes_its_files(folder: Path) -> None:
    worker = _start(folder)
    (folder / "worker-0123456789abcdef.lock").write_text("")
    assert retire_workers(str(folder)) == 1
    assert worker.wait(timeout=30) == -signal.SIGTERM
    assert worker_pids(folder) == []
    assert sorted(p.name for p in folder.glob("worker-*")) == []
    assert list_workers(str(folder)) == []


def test_retire_ends_a_stopped_worker(folder: Path) -> None:
    worker = _start(folder)
    os.kill(worker.pid, signal.SIGSTOP)  # (Linux ends a stopped process on SIGTERM; else SIGKILL)
    assert retire_workers(str(folder), wait_s=0.5) == 1
    assert worker.wait(timeout=30) in (-signal.SIGTERM, -signal.SIGKILL)
    assert worker_pids(folder) == []


def test_a_pid_that_is_not_the_folders_worker_is_never_signalled(
    folder: Path, tmp_path: Path
) -> None:
    folder.mkdir(mode=0o700)
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        lock = folder / channel.lock_name(channel.install_key())
        lock.write_text(json.dumps({"pid": bystander.pid}))
        holder = subprocess.Popen(  # holds the lock like a worker, but is none
            [
                sys.executable,
                "-c",
                "import fcntl,sys,time;f=open(sys.argv[1]);"
                "fcntl.flock(f,fcntl.LOCK_EX);print(flush=True);time.sleep(60)",
                str(lock),
            ],
            stdout=subprocess.PIPE,
        )
        assert holder.stdout is not None and holder.stdout.readline() == b"\n"
        assert retire_workers(str(folder), wait_s=0.2) == 0
        assert bystander.poll() is None and holder.poll() is None
        holder.kill()
        holder.wait()
    finally:
        bystander.kill()
        bystander.wait()


def test_a_request_that_trickles_is_cut_at_the_read_bound(folder: Path) -> None:
    """One client sending a byte at a time cannot hold the worker past its 5 s read bound."""
    import socket

    from tool_failure_guard.hooks.worker import _READ_TIMEOUT_S

    worker = _start(folder)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as slow:
        slow.connect(str(folder / channel.socket_name(channel.install_key())))
        started = time.monotonic()
        reply = b""
        slow.settimeout(0.5)
        while time.monotonic() - started < 4 * _READ_TIMEOUT_S:
            try:
                slow.sendall(b" ")
                reply = slow.recv(4096)
            except TimeoutError:
                continue
            except OSError:
                break
            if reply:
                break
    assert json.loads(reply) == {"refused": "TimeoutError"}
    assert worker.poll() is None  # it serves on
