"""The hook's state folder and files: only the guard's own touched, writes whole, waits bounded.

Issue 40 items 3 (the prune removed ``settings.json`` and ``.credentials.json`` of a
``--state-dir ~/.claude``), 4 (a session lock held without bound), 12 (a write cut
short damaged or emptied the state silently) and 13 (a refused folder chmod-ed first).
Real files, real processes, real ``flock``s.
"""

from __future__ import annotations

import fcntl
import io
import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tool_failure_guard.hooks.run import HookOptions, run_hook
from tool_failure_guard.hooks.state import StateStore
from tool_failure_guard.hooks.state_folder import MARKER_NAME, StateError

_CLIENT = [sys.executable, "-m", "tool_failure_guard", "hook", "claude-code"]


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def _failure(call_id: str, session: str = "s") -> dict[str, Any]:
    return {
        "hook_event_name": "PostToolUseFailure",
        "session_id": session,
        "prompt_id": "p",
        "tool_use_id": call_id,
        "tool_name": "Read",
        "error": "File does not exist.",
        "is_interrupt": False,
    }


def _hook(directory: Path, payload: Any) -> subprocess.CompletedProcess[bytes]:
    """The installed hook's command, as a CLI runs it (bounded: a hang fails the test)."""
    return subprocess.run(
        [*_CLIENT, "--mode", "enforce", "--state-dir", str(directory)],
        input=json.dumps(payload).encode(),
        capture_output=True,
        timeout=25,  # under Claude Code's 30 s hook timeout
        check=True,
    )


def _fails_open(done: subprocess.CompletedProcess[bytes], *words: str) -> None:
    assert done.returncode == 0 and done.stdout == b""
    lines = done.stderr.decode().splitlines()
    assert len(lines) == 1 and "failing open" in lines[0], lines
    for word in words:
        assert word in lines[0], lines


def _aged(path: Path, days: float) -> None:
    then = time.time() - days * 24 * 3600
    os.utime(path, (then, then))


# -- item 3: a folder the guard did not create; the prune's own files only -----------------


def test_a_folder_holding_the_users_files_is_refused_and_nothing_in_it_changes(
    tmp_path: Path,
) -> None:
    claude = tmp_path / ".claude"
    claude.mkdir(mode=0o700)
    settings, credentials = claude / "settings.json", claude / ".credentials.json"
    settings.write_text('{"hooks": {}}')
    credentials.write_text('{"token": "secret"}')
    for path in (settings, credentials):
        path.chmod(0o644)
        _aged(path, 30)
    done = _hook(claude, _failure("a", session="new-session"))
    _fails_open(done, "not created by the guard", "settings.json")
    assert sorted(p.name for p in claude.iterdir()) == [".credentials.json", "settings.json"]
    assert settings.read_text() == '{"hooks": {}}'
    assert (_mode(claude), _mode(settings), _mode(credentials)) == (0o700, 0o644, 0o644)


def test_the_prune_removes_only_old_files_the_guard_wrote(tmp_path: Path) -> None:
    folder = tmp_path / "state"
    store = StateStore(folder)
    for name in ("old", "recent"):
        with store.session(name) as state:
            state["x"] = 1
    _aged(store.path_of("old"), 8)
    _aged(store.path_of("recent"), 6)
    # in the guard's own folder later: names it could have written, content it did not
    foreign = {
        "settings.json": b'{"hooks": {}}',
        "notes.json": b'{"version": 1, "state": {}, "mine": true}',
        "empty.json": b"",
        ".settings.json.0123456789abcdef.tmp": b"user text",
        "worker-0123456789abcdef.lock": b"",
    }
    for name, content in foreign.items():
        (folder / name).write_bytes(content)
        _aged(folder / name, 30)
    stale_temp = folder / ".old.json.fedcba9876543210.tmp"
    stale_temp.write_bytes(b'{"version":1,"st')  # a write killed midway
    _aged(stale_temp, 8)
    held = folder / "worker-fedcba9876543210.lock"
    held.write_text("")
    _aged(held, 30)
    with open(held, "rb") as holder:
        fcntl.flock(holder, fcntl.LOCK_EX)  # a live worker's lock stays
        with store.session("new") as state:
            state["x"] = 1
    left = sorted(p.name for p in folder.iterdir())
    expected = {*foreign, MARKER_NAME, "new.json", "recent.json", held.name}
    expected -= {"worker-0123456789abcdef.lock"}  # an unheld, old worker lock is the guard's
    assert left == sorted(expected)
    assert (folder / "settings.json").read_bytes() == b'{"hooks": {}}'


def test_an_earlier_versions_folder_is_adopted_and_pruned(tmp_path: Path) -> None:
    folder = tmp_path / "state"
    folder.mkdir(mode=0o700)
    (folder / "old.json").write_text('{"version":1,"state":{"prompt":{}}}')
    _aged(folder / "old.json", 8)
    (folder / "worker-0123456789abcdef.sock").write_text("")
    with StateStore(folder).session("new") as state:
        state["x"] = 1
    assert sorted(p.name for p in folder.iterdir()) == [
        MARKER_NAME,
        "new.json",
        "worker-0123456789abcdef.sock",
    ]


# -- item 13: refused untouched ----------------------------------------------------------


def test_a_symlinked_state_folder_is_refused_and_its_target_untouched(tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.mkdir()
    target.chmod(0o755)
    link = tmp_path / "state"
    link.symlink_to(target)
    _fails_open(_hook(link, _failure("a")), "symbolic link")
    assert _mode(target) == 0o755 and list(target.iterdir()) == []


def test_a_folder_others_can_read_is_refused_untouched(tmp_path: Path) -> None:
    folder = tmp_path / "state"
    folder.mkdir()
    folder.chmod(0o750)
    _fails_open(_hook(folder, _failure("a")), "read or entered by others")
    assert _mode(folder) == 0o750 and list(folder.iterdir()) == []
    folder.chmod(0o700)  # the operator's fix: then it is used, and marked
    assert _hook(folder, _failure("a")).stderr == b""
    assert sorted(p.name for p in folder.iterdir()) == [MARKER_NAME, "s.json"]


def test_a_folder_the_guard_creates_is_0700_whatever_the_umask(tmp_path: Path) -> None:
    for umask in (0o000, 0o077, 0o277):
        old = os.umask(umask)
        try:
            folder = tmp_path / f"state-{umask:o}"
            with StateStore(folder).session("s") as state:
                state["x"] = 1
        finally:
            os.umask(old)
        assert _mode(folder) == 0o700 and _mode(folder / "s.json") == 0o600


# -- item 12: whole or not at all, and said -----------------------------------------------

_LIMITED = """
import io, json, resource, signal, sys
from pathlib import Path
from tool_failure_guard.hooks.run import HookOptions, run_hook
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit: EFBIG, not death
limit = int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
options = HookOptions(cli="claude-code", mode="enforce", state_dir=Path(sys.argv[1]))
out, err = io.StringIO(), io.StringIO()
run_hook(options, io.BytesIO(sys.stdin.buffer.read()), out, err)
print(json.dumps([out.getvalue(), err.getvalue()]))
"""


def test_a_write_that_fails_keeps_the_previous_state_and_says_so(tmp_path: Path) -> None:
    folder = tmp_path / "state"
    for n in range(3):
        _hook(folder, _failure(f"c{n}"))
    before = (folder / "s.json").read_bytes()
    done = subprocess.run(
        [sys.executable, "-c", _LIMITED, str(folder), str(len(before) + 10)],
        input=json.dumps(_failure("c-big")).encode(),
        capture_output=True,
        check=True,
        timeout=60,
    )
    out, err = json.loads(done.stdout)
    assert out == "" and err.count("\n") == 1
    assert "could not be written" in err and "keeps its previous content" in err
    assert (folder / "s.json").read_bytes() == before  # whole: neither cut nor emptied
    assert sorted(p.name for p in folder.iterdir()) == [MARKER_NAME, "s.json"]  # no temp left
    # the next event reads the previous state, without a damaged-state line
    assert _hook(folder, _failure("c3")).stderr == b""
    recorded = json.loads((folder / "s.json").read_text())["state"]
    assert "c-big" not in json.dumps(recorded) and "c3" in json.dumps(recorded)


def test_an_emptied_state_file_is_said_on_stderr(tmp_path: Path) -> None:
    said: list[str] = []
    store = StateStore(tmp_path / "state", warn=said.append)
    with store.session("s") as state:
        state["n"] = 1
    store.path_of("s").write_bytes(b"")
    with store.session("s") as state:
        assert state == {}
    assert len(said) == 1 and "empty" in said[0]


def test_a_new_sessions_file_is_never_seen_empty(tmp_path: Path) -> None:
    said: list[str] = []
    store = StateStore(tmp_path / "state", warn=said.append)
    with store.session("s") as state:
        assert state == {}
        assert json.loads(store.path_of("s").read_text()) == {"version": 1, "state": {}}
    assert said == []


_COUNTER = """
import sys
from pathlib import Path
from tool_failure_guard.hooks.state import StateStore
store = StateStore(Path(sys.argv[1]))
for _ in range(int(sys.argv[2])):
    with store.session(sys.argv[4]) as state:
        state["n"] = state.get("n", 0) + 1
        state.setdefault("by", []).append(sys.argv[3])
"""


def test_renamed_writes_lose_no_concurrent_update_from_a_new_session_on(tmp_path: Path) -> None:
    writers, each = 6, 20
    for round_ in range(3):  # each round starts a new session: creation races too
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    _COUNTER,
                    str(tmp_path / "st"),
                    str(each),
                    str(w),
                    f"r{round_}",
                ]
            )
            for w in range(writers)
        ]
        assert all(p.wait(timeout=120) == 0 for p in procs)
        with StateStore(tmp_path / "st").session(f"r{round_}") as state:
            assert state["n"] == writers * each


# -- item 4: a lock held without end does not hold the hook --------------------------------


def test_a_session_lock_held_forever_fails_the_hook_open_within_its_bound(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "state"
    _hook(folder, _failure("a"))
    with open(folder / "s.json", "rb") as holder:
        fcntl.flock(holder, fcntl.LOCK_EX)  # a stuck process holding the session's lock
        for event in (_failure("b"), {**_failure("c"), "hook_event_name": "UserPromptSubmit"}):
            _fails_open(_hook(folder, event), "stayed locked", "StateError")
    assert _hook(folder, _failure("d")).stderr == b""  # released: used again


def test_the_lock_bound_is_the_stores(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "state")
    store.lock_wait_s = 0.2
    with store.session("s") as state:
        state["n"] = 1
    with open(store.path_of("s"), "rb") as holder:
        fcntl.flock(holder, fcntl.LOCK_EX)
        with pytest.raises(StateError, match=r"stayed locked .* for 0\.2 s"), store.session("s"):
            pass


def test_in_process_too_a_refused_folder_fails_open(tmp_path: Path) -> None:
    folder = tmp_path / "elsewhere"
    folder.mkdir(mode=0o700)
    (folder / "id_rsa").write_text("KEY")
    out, err = io.StringIO(), io.StringIO()
    options = HookOptions(cli="claude-code", mode="enforce", state_dir=folder)
    assert run_hook(options, io.BytesIO(json.dumps(_failure("a")).encode()), out, err) == 0
    assert out.getvalue() == "" and "not created by the guard" in err.getvalue()
    assert [p.name for p in folder.iterdir()] == ["id_rsa"]
