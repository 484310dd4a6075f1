"""The hooks' shared core without a CLI: payload bound, state store, replay, fail open."""

from __future__ import annotations

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

from tool_failure_guard.guard import REPEATED_TOOL_FAILURE_REMINDER, GuardMode
from tool_failure_guard.hooks.payload import MAX_PAYLOAD_BYTES, PayloadError, parse_payload
from tool_failure_guard.hooks.prompt import PromptSession
from tool_failure_guard.hooks.run import HookOptions, run_hook
from tool_failure_guard.hooks.state import StateStore, session_file_name
from tool_failure_guard.hooks.state_folder import MARKER_NAME

# -- payload ---------------------------------------------------------------------------


def test_a_payload_past_the_bound_is_refused_naming_the_bound() -> None:
    with pytest.raises(PayloadError, match=str(MAX_PAYLOAD_BYTES)):
        parse_payload(b" " * (MAX_PAYLOAD_BYTES + 1))
    with pytest.raises(PayloadError, match="not an object"):
        parse_payload(b"[1, 2]")
    with pytest.raises(PayloadError, match="not JSON"):
        parse_payload(b"{nope")
    assert parse_payload(b'{"a": 1}') == {"a": 1}


# -- the state store ----------------------------------------------------------------------


def test_state_folder_is_0700_and_files_0600_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        store = StateStore(tmp_path / "state")
        with store.session("s1") as state:
            state["x"] = 1
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "state").stat().st_mode) == 0o700
    assert stat.S_IMODE(store.path_of("s1").stat().st_mode) == 0o600


def test_unsafe_session_ids_become_hashed_file_names() -> None:
    assert session_file_name("abc-123") == "abc-123.json"
    for hostile in ("../../etc/passwd", "a/b", ".hidden", "x" * 300, ""):
        name = session_file_name(hostile)
        assert name.startswith("sha256-") and "/" not in name


def _seeded(tmp_path: Path, content: bytes) -> tuple[StateStore, list[str]]:
    said: list[str] = []
    store = StateStore(tmp_path, warn=said.append)
    with store.session("s") as state:
        state["kept"] = True
    store.path_of("s").write_bytes(content)
    return store, said


@pytest.mark.parametrize(
    ("content", "reason"),
    [(b"{not json", "damaged"), (b'{"version": 99, "state": {}}', "version"), (b"[]", "version")],
)
def test_a_damaged_file_starts_over_with_a_reason(
    tmp_path: Path, content: bytes, reason: str
) -> None:
    store, said = _seeded(tmp_path, content)
    with store.session("s") as state:
        assert state == {}
    assert len(said) == 1 and reason in said[0]
    with store.session("s") as state:  # rewritten: no second warning
        assert state == {}
    assert len(said) == 1


def test_a_stale_file_starts_over(tmp_path: Path) -> None:
    said: list[str] = []
    now = [1_000_000.0]
    store = StateStore(tmp_path, stale_after_s=60, clock=lambda: now[0], warn=said.append)
    with store.session("s") as state:
        state["kept"] = True
    os.utime(store.path_of("s"), (now[0] - 10, now[0] - 10))
    with store.session("s") as state:
        assert state == {"kept": True}
    os.utime(store.path_of("s"), (now[0] - 61, now[0] - 61))
    with store.session("s") as state:
        assert state == {}
    assert "stale" in said[0]


def test_a_state_past_its_bound_is_written_empty(tmp_path: Path) -> None:
    said: list[str] = []
    store = StateStore(tmp_path, max_bytes=200, warn=said.append)
    with store.session("s") as state:
        state["big"] = "x" * 500
    with store.session("s") as state:
        assert state == {}
    assert "larger than 200" in said[0]


def test_a_block_that_raises_writes_nothing(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    with store.session("s") as state:
        state["n"] = 1
    with pytest.raises(RuntimeError), store.session("s") as state:
        state["n"] = 2
        raise RuntimeError("boom")
    with store.session("s") as state:
        assert state == {"n": 1}


def test_a_symlinked_state_file_is_refused(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "state")
    with store.session("other"):
        pass
    target = tmp_path / "elsewhere.json"
    target.write_text("{}")
    store.path_of("s").symlink_to(target)
    with pytest.raises(OSError, match="symbolic link"), store.session("s"):
        pass


def test_a_new_session_prunes_session_files_older_than_a_week(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    for name in ("old", "recent"):
        with store.session(name) as state:
            state["x"] = 1
    week = 7 * 24 * 3600
    os.utime(store.path_of("old"), (time.time() - week - 60,) * 2)
    os.utime(store.path_of("recent"), (time.time() - week + 3600,) * 2)
    (tmp_path / "notes.txt").write_text("not a session")
    with store.session("new") as state:
        state["x"] = 1
    names = sorted(p.name for p in tmp_path.iterdir() if p.name != MARKER_NAME)
    assert names == ["new.json", "notes.txt", "recent.json"]


_COUNTER = """
import sys
from pathlib import Path
from tool_failure_guard.hooks.state import StateStore
store = StateStore(Path(sys.argv[1]))
for _ in range(int(sys.argv[2])):
    with store.session("shared") as state:
        state["n"] = state.get("n", 0) + 1
        state.setdefault("by", []).append(sys.argv[3])
"""


def test_concurrent_processes_lose_no_update(tmp_path: Path) -> None:
    writers, each = 6, 25
    procs = [
        subprocess.Popen([sys.executable, "-c", _COUNTER, str(tmp_path), str(each), str(w)])
        for w in range(writers)
    ]
    assert all(p.wait(timeout=120) == 0 for p in procs)
    with StateStore(tmp_path).session("shared") as state:
        assert state["n"] == writers * each
        assert sorted(state["by"]) == sorted(str(w) for w in range(writers) for _ in range(each))


# -- the prompt's replay through the core ---------------------------------------------------


def _failure(call_id: str) -> dict[str, Any]:
    return {
        "hook_event_name": "PostToolUseFailure",
        "session_id": "s",
        "prompt_id": "p",
        "tool_use_id": call_id,
        "tool_name": "Read",
        "error": "File does not exist. Note: your current working directory is /w.",
        "is_interrupt": False,
    }


def _batch(*ids: str, prompt: str = "p") -> dict[str, Any]:
    return {
        "hook_event_name": "PostToolBatch",
        "session_id": "s",
        "prompt_id": prompt,
        "tool_calls": [
            {"tool_use_id": i, "tool_name": "Read", "tool_input": {}, "tool_response": "x"}
            for i in ids
        ],
    }


def _hook(tmp_path: Path, payload: Any, mode: str = "enforce") -> tuple[str, str]:
    stdin = io.BytesIO(payload if isinstance(payload, bytes) else json.dumps(payload).encode())
    stdout, stderr = io.StringIO(), io.StringIO()
    options = HookOptions(cli="claude-code", mode=GuardMode(mode), state_dir=tmp_path / "st")
    assert run_hook(options, stdin, stdout, stderr) == 0
    return stdout.getvalue(), stderr.getvalue()


def _failing_batch(tmp_path: Path, n: int, mode: str = "enforce", prompt: str = "p") -> str:
    ids = [f"b{n}c{i}" for i in range(4)]
    for call_id in ids:
        assert _hook(tmp_path, dict(_failure(call_id), prompt_id=prompt), mode) == ("", "")
    return _hook(tmp_path, _batch(*ids, prompt=prompt), mode)[0]


def test_the_stored_batches_replay_to_the_cores_decisions(tmp_path: Path) -> None:
    assert _failing_batch(tmp_path, 1) == ""
    reminder = json.loads(_failing_batch(tmp_path, 2))
    assert reminder["hookSpecificOutput"] == {
        "hookEventName": "PostToolBatch",
        "additionalContext": REPEATED_TOOL_FAILURE_REMINDER,
    }
    stop = json.loads(_failing_batch(tmp_path, 3))
    assert stop["continue"] is False and "stopped" in stop["stopReason"]


def test_a_new_prompt_id_is_a_fresh_guard(tmp_path: Path) -> None:
    _failing_batch(tmp_path, 1)
    assert _failing_batch(tmp_path, 2, prompt="q") == ""  # streak of prompt q: 1 batch
    assert "additionalContext" in _failing_batch(tmp_path, 3, prompt="q")


def test_an_event_without_a_prompt_id_stays_in_the_prompt() -> None:
    session = PromptSession("enforce")
    session.enter_prompt("p")
    session.record("a", ["Read", "x", False])
    assert session.enter_prompt(None) is False and session.pending
    assert session.enter_prompt("q") is True and not session.pending


@pytest.mark.parametrize(("submitted", "fresh"), [("q", True), (None, True), ("p", False)])
def test_a_user_prompt_submit_is_a_fresh_guard_unless_its_prompt_id_is_the_current_one(
    tmp_path: Path, submitted: str | None, fresh: bool
) -> None:
    # the same prompt id again is 2.1.337's <task-notification> of a background agent mid-turn
    _failing_batch(tmp_path, 1)
    submit = {"hook_event_name": "UserPromptSubmit", "session_id": "s", "prompt": "<task>"}
    if submitted is not None:
        submit["prompt_id"] = submitted
    assert _hook(tmp_path, submit) == ("", "")
    prompt = submitted or "p"
    second = _failing_batch(tmp_path, 2, prompt=prompt)
    assert (second == "") is fresh  # the same prompt: the second failing batch is reminded


def test_warn_reminds_and_shadow_says_nothing(tmp_path: Path) -> None:
    for mode in ("shadow", "warn"):
        outs = [_failing_batch(tmp_path / mode, n, mode) for n in range(1, 6)]
        if mode == "shadow":
            assert outs == [""] * 5
        else:
            assert [bool(o) for o in outs] == [False, True, False, False, False]


def test_calls_without_a_recorded_failure_are_successes_or_not_started() -> None:
    from tool_failure_guard.hooks import claude_code

    session = PromptSession(GuardMode.ENFORCE)
    batch = _batch("a", "b", "c")
    batch["tool_calls"][0]["tool_response"] = (
        "<tool_use_error>InputValidationError: x</tool_use_error>"
    )
    batch["tool_calls"][1]["tool_response"] = (
        "Claude requested permissions to use Read, but you haven't granted it yet."
    )
    handled = claude_code.handle(batch, session)
    assert handled.answer is None
    statuses = [(row[4], row[5]) for row in session.batches[0]]
    assert statuses == [
        ("error", "not_started"),
        ("cancelled", "not_started"),
        ("success", "success"),
    ]


@pytest.mark.parametrize(
    ("tool", "error", "interrupt", "expected"),
    [
        ("Bash", "Exit code 3", False, ("error", "error", "shell_execute_error")),
        ("Read", "File does not exist. Note: x", False, ("error", "error", "file_not_found")),
        ("Edit", "String to replace not found in file.", False, ("error", "error", "unknown")),
        ("Bash", "Exit code 1", True, ("cancelled", "cancelled", None)),
    ],
)
def test_failure_texts_are_typed_or_unknown(
    tool: str, error: str, interrupt: bool, expected: tuple[str, str, str | None]
) -> None:
    from tool_failure_guard.hooks import claude_code

    session = PromptSession(GuardMode.ENFORCE)
    payload = dict(_failure("a"), tool_name=tool, error=error, is_interrupt=interrupt)
    claude_code.handle(payload, session)
    claude_code.handle(
        dict(_batch("a"), tool_calls=[dict(_batch("a")["tool_calls"][0], tool_name=tool)]), session
    )
    row = session.batches[0][0]  # call id, name, tool, tool type, terminal, execution, type, ...
    assert (row[4], row[5], row[6]) == expected


def test_off_registers_its_install_and_applies_nothing(tmp_path: Path) -> None:
    assert _hook(tmp_path, _failure("a"), "off") == ("", "")
    state = json.loads(StateStore(tmp_path / "st").path_of("s").read_text())["state"]
    assert [entry[1] for entry in state["installs"].values()] == ["off"]
    assert "loops" not in state and "events" not in state  # the failure was not recorded


# -- fail open -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "payload",
    [b"", b"not json", b"[]", b'{"hook_event_name": "PostToolBatch"}', b"x" * (5 << 20)],
)
def test_bad_input_fails_open(tmp_path: Path, payload: bytes) -> None:
    out, err = _hook(tmp_path, payload)
    assert out == ""
    assert err.startswith("tool-failure-guard hook claude-code: failing open (")
    assert err.count("\n") == 1


def test_an_unusable_state_folder_fails_open(tmp_path: Path) -> None:
    (tmp_path / "st").write_text("a file, not a folder")
    out, err = _hook(tmp_path, _batch("a"))
    assert out == "" and "failing open" in err


def test_a_damaged_prompt_state_resets_the_streak(tmp_path: Path) -> None:
    _failing_batch(tmp_path, 1)
    path = StateStore(tmp_path / "st").path_of("s")
    data = json.loads(path.read_text())
    data["state"]["loops"]["loops"][""]["batches"] = [["not a call"]]
    path.write_text(json.dumps(data))
    ids = [f"x{i}" for i in range(4)]
    said = [_hook(tmp_path, _failure(call_id))[1] for call_id in ids]
    assert "state damaged" in said[0] and said[1:] == ["", "", ""]
    assert _hook(tmp_path, _batch(*ids)) == ("", "")  # one batch after the reset: no reminder


def test_a_bad_hook_command_line_fails_open_with_status_0() -> None:
    exe = Path(sys.executable).parent / "tool-failure-guard"
    for extra in (["--mode", "bogus"], ["--nope"], ["--state-dir"], ["--scope", "bogus"]):
        done = subprocess.run(
            [str(exe), "hook", "claude-code", *extra],
            input=b"{}",
            capture_output=True,
        )
        assert done.returncode == 0 and done.stdout == b""
        assert b"failing open (bad command line" in done.stderr


_PER_CALL_IMPORTS = """
import io, json, sys
from tool_failure_guard.commands.cli import main
payload = {"hook_event_name": "PostToolUseFailure", "session_id": "s", "prompt_id": "p",
           "tool_use_id": "a", "tool_name": "Read", "error": "File does not exist.",
           "is_interrupt": False}
sys.stdin = io.TextIOWrapper(io.BytesIO(json.dumps(payload).encode()))
assert main(["hook", "claude-code", "--mode", "enforce", "--state-dir", sys.argv[1]]) == 0
heavy = ("attr", "attrs", "typing", "argparse", "tool_failure_guard.core",
         "tool_failure_guard.guard", "tool_failure_guard.agent_outcomes")
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in heavy or m in heavy
                        or any(m.startswith(h + ".") for h in heavy))))
"""


def test_the_per_call_event_loads_no_core_attrs_typing_or_argparse(tmp_path: Path) -> None:
    # docs/hooks.md (Cost): the per-call hook's start-up is kept near a no-op Python hook's
    done = subprocess.run(
        [sys.executable, "-c", _PER_CALL_IMPORTS, str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(done.stdout.splitlines()[-1]) == []
