"""The hook fails open on hostile input and a hostile environment (issue 40 item 5).

Exit 0, nothing on stdout, one line on stderr, in the client (a batch event the
client would hand to the warm worker) and in process (the same events with
``--telemetry``, which never go to a worker, and ``run_hook`` itself): a payload
nested about 1000 deep, a ``hook_event_name`` that is a list or an object, a
closed stdin, and no ``HOME`` with a uid that has no passwd entry.
"""

from __future__ import annotations

import io
import json
import os
import pwd
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hook_workers import stop_workers

from tool_failure_guard.hooks.run import HookOptions, run_hook

_HOOK = [sys.executable, "-m", "tool_failure_guard", "hook", "claude-code", "--mode", "enforce"]
_BATCH = {"session_id": "s", "prompt_id": "p", "tool_calls": []}

_PAYLOADS = {
    "an array 1000 deep": b"[" * 1000 + b"]" * 1000,
    "an object 1000 deep": b'{"a":' * 1000 + b"1" + b"}" * 1000,
    "a batch whose fields nest 1000 deep": json.dumps(
        {**_BATCH, "hook_event_name": "PostToolBatch"}
    ).encode()[:-1]
    + b', "x": '
    + b"[" * 1000
    + b"]" * 1000
    + b"}",
    "hook_event_name a list": json.dumps({**_BATCH, "hook_event_name": ["PostToolBatch"]}).encode(),
    "hook_event_name an object": json.dumps(
        {**_BATCH, "hook_event_name": {"PostToolBatch": 1}}
    ).encode(),
}


@pytest.fixture
def folder(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "state"
    stop_workers(tmp_path)


def _one_line(out: bytes, err: bytes) -> str:
    assert out == b""
    lines = err.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tool-failure-guard hook claude-code: "), lines
    assert "failing open (" in lines[0] and "Traceback" not in err.decode()
    return lines[0]


def _routes(folder: Path, telemetry: bool) -> list[str]:
    return ["--telemetry", f"file:{folder.parent / 'telemetry.jsonl'}"] if telemetry else []


@pytest.mark.parametrize("telemetry", [False, True], ids=["client", "in process"])
@pytest.mark.parametrize("name", list(_PAYLOADS))
def test_hostile_payloads_fail_open(name: str, telemetry: bool, folder: Path) -> None:
    done = subprocess.run(
        [*_HOOK, "--state-dir", str(folder), *_routes(folder, telemetry)],
        input=_PAYLOADS[name],
        capture_output=True,
        timeout=25,
    )
    assert done.returncode == 0
    line = _one_line(done.stdout, done.stderr)
    assert "PayloadError" in line


@pytest.mark.parametrize("name", list(_PAYLOADS))
def test_hostile_payloads_fail_open_in_run_hook(name: str, folder: Path) -> None:
    out, err = io.StringIO(), io.StringIO()
    options = HookOptions(cli="claude-code", mode="enforce", state_dir=folder)
    assert run_hook(options, io.BytesIO(_PAYLOADS[name]), out, err) == 0
    _one_line(out.getvalue().encode(), err.getvalue().encode())


@pytest.mark.parametrize("telemetry", [False, True], ids=["client", "in process"])
def test_a_closed_stdin_fails_open(telemetry: bool, folder: Path) -> None:
    done = subprocess.run(
        [*_HOOK, "--state-dir", str(folder), *_routes(folder, telemetry)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=25,
        preexec_fn=lambda: os.close(0),  # the child's stdin only
    )
    assert done.returncode == 0
    assert "payload is empty" in _one_line(done.stdout, done.stderr)


def _uid_without_passwd_entry() -> int:
    for uid in range(54321, 54421):
        try:
            pwd.getpwuid(uid)
        except KeyError:
            return uid
    raise AssertionError("no free uid")


@pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("setpriv"),
    reason="running as a uid without a passwd entry takes root and setpriv",
)
@pytest.mark.parametrize("telemetry", [False, True], ids=["client", "in process"])
def test_no_home_and_no_passwd_entry_fails_open(telemetry: bool, tmp_path: Path) -> None:
    uid = _uid_without_passwd_entry()
    env = {k: v for k, v in os.environ.items() if k not in ("HOME", "XDG_STATE_HOME")}
    extra = ["--telemetry", "file:/dev/null"] if telemetry else []
    batch = json.dumps({**_BATCH, "hook_event_name": "PostToolBatch"}).encode()
    as_uid = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
    done = subprocess.run(
        [*as_uid, *_HOOK, *extra],  # no --state-dir: the default one needs a home
        input=batch,
        capture_output=True,
        timeout=25,
        env=env,
        cwd="/",
    )
    assert done.returncode == 0
    assert "home directory" in _one_line(done.stdout, done.stderr)
