"""Upgrades take effect at the next event (issue 37 item 4, issue 40 item 10).

A private editable copy of the package (the source tree copied to a temporary
folder, run from there as an editable clone is): a warm worker serves it, then a
module of the copy changes (the reminder text; a module outside the install key's
four stamped files; the distribution's metadata) and the very next event is
answered by the new code, the old worker retired and a new one serving after it.
Real processes; every worker is killed by pid at teardown.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hook_workers import stop_workers, worker_pids

import tool_failure_guard
from tool_failure_guard.guard import REPEATED_TOOL_FAILURE_REMINDER

_PACKAGE = Path(tool_failure_guard.__file__).parent
#: The hook's entry as an editable clone at ``argv[1]`` runs it (the clone first on the path).
_RUN = (
    "import sys;sys.path.insert(0,sys.argv[1]);"
    "from tool_failure_guard.commands.cli import main;"
    "raise SystemExit(main(['hook',*sys.argv[2:]]))"
)


@pytest.fixture
def clone(tmp_path: Path) -> Iterator[Path]:
    """A private copy of the package's source tree (its root folder); workers stopped after."""
    root = tmp_path / "clone"
    shutil.copytree(_PACKAGE, root / "tool_failure_guard", ignore=shutil.ignore_patterns("*.pyc"))
    yield root
    stop_workers(tmp_path)


def _events() -> Iterator[dict[str, Any]]:
    """A prompt whose every batch is three failing Reads (the reminder, then the stop)."""
    base = {"session_id": "s", "prompt_id": "p"}
    yield {"hook_event_name": "UserPromptSubmit", **base}
    for n in range(6):
        ids = [f"b{n}c{i}" for i in range(3)]
        for call_id in ids:
            yield {
                "hook_event_name": "PostToolUseFailure",
                **base,
                "tool_use_id": call_id,
                "tool_name": "Read",
                "error": "File does not exist.",
                "is_interrupt": False,
            }
        calls = [{"tool_use_id": i, "tool_name": "Read", "tool_response": ""} for i in ids]
        yield {"hook_event_name": "PostToolBatch", **base, "tool_calls": calls}


def _hook(root: Path, folder: Path, payload: dict[str, Any]) -> str:
    options = ["--mode", "enforce", "--state-dir", str(folder)]
    done = subprocess.run(
        [sys.executable, "-c", _RUN, str(root), "claude-code", *options],
        input=json.dumps(payload).encode(),
        capture_output=True,
        timeout=25,
        check=True,
    )
    assert done.stderr == b"", done.stderr
    return done.stdout.decode()


def _wait_for(check: Callable[[], bool], what: str, bound_s: float = 30.0) -> None:
    deadline = time.monotonic() + bound_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not within {bound_s} s")
        time.sleep(0.02)


def _listening_worker(folder: Path) -> int:
    """The pid of the folder's one worker, once its socket is there."""
    _wait_for(lambda: any(folder.glob("worker-*.sock")), "a worker's socket")
    [pid] = worker_pids(folder)
    return pid


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0]
    except (OSError, IndexError):
        return True
    return state == "Z"


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, (path, old)
    path.write_text(text.replace(old, new))  # another size: seen whatever the clock


#: (file of the copy, text there, its replacement, what the reminder's answer then holds)
_CHANGES = {
    "the reminder text (guard/_values.py)": (
        "guard/_values.py",
        "Do not repeat the same approach.",
        "Do not repeat the same approach (upgraded).",
        "Do not repeat the same approach (upgraded).",
    ),
    "another module (hooks/payload.py writes the answer)": (
        "hooks/payload.py",
        'separators=(",", ":")',
        'separators=(", ", ": ")',
        '{"hookSpecificOutput": {"hookEventName": "PostToolBatch"',
    ),
}


@pytest.mark.parametrize("change", list(_CHANGES))
def test_a_changed_module_answers_the_next_event(change: str, clone: Path, tmp_path: Path) -> None:
    name, old, new, told = _CHANGES[change]
    folder = tmp_path / "state"
    events = list(_events())
    batches = [n for n, e in enumerate(events) if e["hook_event_name"] == "PostToolBatch"]
    reminder_at, stop_at = batches[2], batches[3]  # the third failing batch, the fourth
    for payload in events[: batches[0] + 1]:
        _hook(clone, folder, payload)  # the first batch starts the worker
    worker = _listening_worker(folder)
    for payload in events[batches[0] + 1 : reminder_at]:
        _hook(clone, folder, payload)
    assert worker_pids(folder) == [worker]  # warm: the worker served the batches so far
    _edit(clone / "tool_failure_guard" / name, old, new)
    answer = _hook(clone, folder, events[reminder_at])
    assert told in answer
    assert REPEATED_TOOL_FAILURE_REMINDER.split(". ")[0] in answer  # the reminder it is
    _wait_for(lambda: _gone(worker), "the old worker's retirement")
    replacement = _listening_worker(folder)
    assert replacement != worker
    # the new worker serves the new code from then on (the stop, the next batch)
    for payload in events[reminder_at + 1 : stop_at]:
        _hook(clone, folder, payload)
    stop = _hook(clone, folder, events[stop_at])
    assert worker_pids(folder) == [replacement]
    assert ('"continue": false' if name == "hooks/payload.py" else '"continue":false') in stop


def test_a_rewritten_distribution_metadata_retires_the_worker(clone: Path, tmp_path: Path) -> None:
    info = clone / "tool_failure_guard-9.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: tool-failure-guard\nVersion: 9.1\n"
    )
    (info / "RECORD").write_text("")
    folder = tmp_path / "state"
    events = list(_events())
    for payload in events[:5]:
        _hook(clone, folder, payload)
    worker = _listening_worker(folder)
    [lock] = folder.glob("worker-*.lock")
    assert json.loads(lock.read_text())["version"] == "9.1"
    # an upgrade rewrites the metadata (here: the version only, no module changes)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: tool-failure-guard\nVersion: 9.10\n"
    )
    for payload in events[5:9]:
        _hook(clone, folder, payload)
    _wait_for(lambda: _gone(worker), "the old worker's retirement")
    replacement = _listening_worker(folder)
    assert replacement != worker
    _wait_for(lambda: json.loads(lock.read_text())["version"] == "9.10", "the new record")
    assert json.loads(lock.read_text())["pid"] == replacement


def test_an_idle_worker_retires_when_the_code_changes(clone: Path, tmp_path: Path) -> None:
    folder = tmp_path / "state"
    for payload in list(_events())[:5]:
        _hook(clone, folder, payload)
    worker = _listening_worker(folder)
    (clone / "tool_failure_guard" / "hooks" / "new_module.py").write_text('"""Added."""\n')
    _wait_for(lambda: _gone(worker), "the idle worker's retirement")  # no event needed
    assert not any(folder.glob("worker-*.sock"))
    assert os.path.exists(clone / "tool_failure_guard" / "hooks" / "new_module.py")


# -- the options: every request carries them all, from the hook's own command line ----------


def test_the_header_carries_every_hook_option(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from tool_failure_guard.hooks import client
    from tool_failure_guard.hooks.run import HookOptions
    from tool_failure_guard.hooks.worker import handle_request

    options = HookOptions(cli="claude-code", mode="warn", state_dir=tmp_path, telemetry="file:x")
    header = options.to_header()
    assert set(header) == set(HookOptions.__slots__)  # generic: a new field rides along
    assert HookOptions.from_header(header).to_header() == header
    for bad in ({**header, "bogus": "1"}, {**header, "mode": ["warn"]}, {**header, "mode": "x"}):
        with pytest.raises(ValueError):
            HookOptions.from_header(bad)
    # what the client sends is what it was given, and the worker rebuilds the options from it
    sent: list[dict[str, Any]] = []

    def exchange(*args: Any) -> tuple[str, tuple[str, str]]:
        sent.append(dict(args[1]))
        return client.ANSWERED, ("", "")

    monkeypatch.setattr(client, "_exchange", exchange)
    batch = next(e for e in _events() if e["hook_event_name"] == "PostToolBatch")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(json.dumps(batch).encode())))
    assert client.main("claude-code", "warn", str(tmp_path), None) == 0
    [got] = sent
    assert isinstance(got.pop("request"), str)
    expected = HookOptions(cli="claude-code", mode="warn", state_dir=tmp_path).to_header()
    assert HookOptions.from_header(got).to_header() == expected
    # a worker refuses a header that is not the options it knows (the client then falls back)
    line = json.dumps({**got, "request": "r", "bogus": "1"}).encode() + b"\n{}"
    assert "refused" in handle_request(line, str(tmp_path))
    line = json.dumps({**got, "request": "r"}).encode() + b"\n" + json.dumps(batch).encode()
    assert handle_request(line, str(tmp_path)) == {"stdout": "", "stderr": ""}
