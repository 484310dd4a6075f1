"""The warm worker: the same answers and state as the in-process hook, and every fallback.

Real processes and a real Unix socket: the client is ``python -m tool_failure_guard
hook <cli>`` as a CLI runs it, the worker ``python -m tool_failure_guard.hooks.worker``
(or the one a client starts).  Every worker is killed by pid at teardown
(``hook_workers.stop_workers``, also run for every test by ``conftest.py``).
"""

from __future__ import annotations

import io
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hook_workers import comparable_state, stop_workers, worker_pids

from tool_failure_guard._version import installed_version
from tool_failure_guard.hooks import channel
from tool_failure_guard.hooks.clis import WORKER_EVENTS
from tool_failure_guard.hooks.run import HookOptions, run_hook
from tool_failure_guard.hooks.workers import list_workers

_CLIENT = [sys.executable, "-m", "tool_failure_guard", "hook"]
_WORKER = [sys.executable, "-m", "tool_failure_guard.hooks.worker"]
_SOCKET = channel.socket_name(channel.install_key())


@pytest.fixture
def folders(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """(the worker's state folder, the in-process reference's), workers stopped after."""
    yield tmp_path / "worker", tmp_path / "reference"
    stop_workers(tmp_path)


def _wait_for(check: Callable[[], bool], what: str, bound_s: float = 30.0) -> None:
    deadline = time.monotonic() + bound_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not within {bound_s} s")
        time.sleep(0.02)


def _start_worker(directory: Path, idle_s: float = 120.0) -> subprocess.Popen[bytes]:
    worker = subprocess.Popen(
        [*_WORKER, "--state-dir", str(directory), "--idle-s", str(idle_s)],
        stdin=subprocess.DEVNULL,
    )
    _wait_for(lambda: (directory / _SOCKET).exists(), "the worker's socket")
    return worker


def _client(
    cli: str, directory: Path, payload: Any, mode: str
) -> subprocess.CompletedProcess[bytes]:
    data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return subprocess.run(
        [*_CLIENT, cli, "--mode", mode, "--state-dir", str(directory)],
        input=data,
        capture_output=True,
        timeout=60,
        check=True,
    )


def _reference(cli: str, directory: Path, payload: Any, mode: str) -> tuple[bytes, bytes]:
    """The in-process hook (``run_hook``, as before the worker), its stdout and stderr."""
    stdout, stderr = io.StringIO(), io.StringIO()
    options = HookOptions(cli=cli, mode=mode, state_dir=directory)
    assert run_hook(options, io.BytesIO(json.dumps(payload).encode()), stdout, stderr) == 0
    return stdout.getvalue().encode(), stderr.getvalue().encode()


def _state(directory: Path, session: str) -> dict[str, Any]:
    return comparable_state(directory / f"{session}.json")


# -- recorded event sequences of each CLI (as its tests' fakes send them) -------------------


def _claude() -> Iterator[Any]:
    def failure(call_id: str, prompt: str) -> dict[str, Any]:
        return {
            "hook_event_name": "PostToolUseFailure",
            "session_id": "s",
            "prompt_id": prompt,
            "tool_use_id": call_id,
            "tool_name": "Read",
            "error": "File does not exist. Note: your current working directory is /w.",
            "is_interrupt": False,
        }

    for prompt, batches in (("p", 4), ("q", 2)):
        yield {"hook_event_name": "UserPromptSubmit", "session_id": "s", "prompt_id": prompt}
        for n in range(batches):
            ids = [f"{prompt}{n}c{i}" for i in range(3)]
            yield from (failure(call_id, prompt) for call_id in ids)
            calls = [{"tool_use_id": i, "tool_name": "Read", "tool_response": ""} for i in ids]
            yield {
                "hook_event_name": "PostToolBatch",
                "session_id": "s",
                "prompt_id": prompt,
                "tool_calls": [*calls, {"tool_use_id": f"ok{n}", "tool_name": "Bash"}][: 3 + n % 2],
            }


def _qwen() -> Iterator[Any]:
    def event(name: str, **more: Any) -> dict[str, Any]:
        return {"hook_event_name": name, "session_id": "s", "prompt_id": "s####0", **more}

    yield event("UserPromptSubmit", prompt="Read it")
    for n in range(4):
        for i in range(3):
            entry = {
                "tool_name": "read_file",
                "tool_use_id": f"b{n}c{i}",
                "tool_call_id": f"b{n}c{i}",
                "status": "error",
                "tool_response": {"error_type": "file_not_found", "execution_status": "error"},
            }
            yield event("PostToolBatch", tool_calls=[entry])
        yield event("UserPromptSubmit", prompt="")
    yield event("Stop")


def _gemini() -> Iterator[Any]:
    def event(name: str, **more: Any) -> dict[str, Any]:
        return {
            "hook_event_name": name,
            "session_id": "g",
            "timestamp": "2026-12-06T05:00Z",
            **more,
        }

    yield event("BeforeAgent", prompt="Read")
    yield event("BeforeModel", llm_request={})
    failure = {"llmContent": "File not found.", "error": {"type": "file_not_found"}}
    for _ in range(4):
        for _ in range(4):
            yield event("AfterTool", tool_name="read_file", tool_response=failure)
        yield event("BeforeModel", llm_request={})
    yield event("AfterAgent")


def _codex(rollout: Path) -> Iterator[Any]:
    def add(line_type: str, payload: dict[str, Any]) -> None:
        with rollout.open("a", encoding="utf-8") as stream:
            stream.write(json.dumps({"type": line_type, "payload": payload}) + "\n")

    def event(name: str, **more: Any) -> dict[str, Any]:
        return {
            "hook_event_name": name,
            "session_id": "x",
            "turn_id": "t1",
            "transcript_path": str(rollout),
            "tool_name": "Bash",
            **more,
        }

    rollout.write_text("")
    yield event("UserPromptSubmit", prompt="run it")
    for n in range(5):
        ids = [f"b{n}c{i}" for i in range(4)]
        add("response_item", {"type": "message", "role": "assistant", "content": []})
        for call_id in ids:
            call = {"type": "function_call", "name": "exec_command", "call_id": call_id}
            add("response_item", {**call, "arguments": "{}"})
        yield from (event("PreToolUse", tool_use_id=call_id) for call_id in ids)
        yield from (event("PostToolUse", tool_use_id=i, tool_response="") for i in ids)
        for call_id in ids:
            item = {"type": "CommandExecution", "id": call_id, "status": "completed"}
            add("event_msg", {"type": "item_completed", "item": {**item, "exit_code": 3}})
            output = {"type": "function_call_output", "call_id": call_id}
            add("response_item", {**output, "output": "Process exited with code 3\nOutput:\n"})
    yield event("Stop")


def _sequence(cli: str, tmp_path: Path) -> tuple[Iterator[Any], str]:
    if cli == "claude-code":
        return _claude(), "s"
    if cli == "qwen-code":
        return _qwen(), "s"
    if cli == "gemini-cli":
        return _gemini(), "g"
    return _codex(tmp_path / "rollout.jsonl"), "x"


#: The hook's entry (``commands.cli.main``), then whether its process ran ``run_hook``.
_TELLING = """
import sys
from tool_failure_guard.commands.cli import main
code = main(["hook", *sys.argv[2:]])
with open(sys.argv[1], "a") as told:
    told.write(("true" if "tool_failure_guard.hooks.run" in sys.modules else "false") + "\\n")
raise SystemExit(code)
"""


def _telling(told: Path) -> list[str]:
    return [sys.executable, "-c", _TELLING, str(told)]


@pytest.mark.parametrize(
    ("cli", "mode"),
    [
        ("claude-code", "enforce"),
        ("qwen-code", "enforce"),
        ("gemini-cli", "enforce"),
        ("codex", "warn"),
        ("claude-code", "warn"),
    ],
)
def test_the_workers_answers_and_state_are_the_in_process_ones(
    cli: str, mode: str, tmp_path: Path, folders: tuple[Path, Path]
) -> None:
    served, reference = folders
    worker = _start_worker(served)
    events, session = _sequence(cli, tmp_path)
    answered = 0
    for payload in events:
        done = subprocess.run(
            [*_telling(tmp_path / "in-process"), cli, "--mode", mode, "--state-dir", str(served)],
            input=json.dumps(payload).encode(),
            capture_output=True,
            timeout=60,
            check=True,
        )
        assert (done.stdout, done.stderr) == _reference(cli, reference, payload, mode), payload
        answered += bool(done.stdout)
        in_process = (tmp_path / "in-process").read_text().splitlines()[-1] == "true"
        # the batch events went to the worker; the hook's process never ran one itself
        assert in_process is (payload["hook_event_name"] not in WORKER_EVENTS[cli]), payload
    assert answered >= 1  # the sequence reached a reminder or a stop
    assert _state(served, session) == _state(reference, session)
    assert worker.poll() is None and worker_pids(served) == [worker.pid]


_IMPORTS = """
import json, sys
from tool_failure_guard.commands.cli import main
assert main(["hook", "claude-code", "--mode", "enforce", "--state-dir", sys.argv[1]]) == 0
heavy = ("attr", "attrs", "tool_failure_guard.core", "tool_failure_guard.guard",
         "tool_failure_guard.agent_outcomes", "tool_failure_guard.hooks.replay", "subprocess")
sys.stdout.flush()
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in heavy or m in heavy
                        or any(m.startswith(h + ".") for h in heavy))), file=sys.stderr)
"""


def test_the_client_with_a_worker_loads_no_attrs_and_no_core(folders: tuple[Path, Path]) -> None:
    served, _ = folders
    _start_worker(served)
    sequence = list(_claude())[:4]  # a prompt, three failures, then its batch
    for payload in sequence:
        _client("claude-code", served, payload, "enforce")
    batch = {
        **sequence[1],
        "hook_event_name": "PostToolBatch",
        "tool_calls": [{"tool_use_id": "p0c0", "tool_name": "Read", "tool_response": ""}],
    }
    done = subprocess.run(
        [sys.executable, "-c", _IMPORTS, str(served)],
        input=json.dumps(batch).encode(),
        capture_output=True,
        check=True,
    )
    assert json.loads(done.stderr.decode().splitlines()[-1]) == []


def _claude_batches(directory: Path, count: int) -> list[bytes]:
    answers = []
    for payload in _claude():
        done = _client("claude-code", directory, payload, "enforce")
        if payload["hook_event_name"] == "PostToolBatch":
            answers.append(done.stdout)
            if len(answers) == count:
                return answers
    raise AssertionError("the sequence is shorter")


def _expected_batches(directory: Path, count: int) -> list[bytes]:
    answers = []
    for payload in _claude():
        out, _ = _reference("claude-code", directory, payload, "enforce")
        if payload["hook_event_name"] == "PostToolBatch":
            answers.append(out)
            if len(answers) == count:
                return answers
    raise AssertionError("the sequence is shorter")


def test_with_no_worker_the_hook_answers_in_process_and_starts_one(
    folders: tuple[Path, Path],
) -> None:
    served, reference = folders
    assert _claude_batches(served, 3) == _expected_batches(reference, 3)
    # the first batch found no worker and started one: it listens for the next event
    _wait_for(lambda: (served / _SOCKET).exists(), "the started worker's socket")
    [pid] = worker_pids(served)
    # its lock file tells which worker serves which code (for ``hook status``)
    [info] = list_workers(str(served))
    assert (info.pid, info.key, info.running, info.current) == (
        pid,
        channel.install_key(),
        True,
        True,
    )
    assert info.version == installed_version()
    assert _state(served, "s") == _state(reference, "s")


def test_a_stale_socket_is_answered_in_process_and_replaced(folders: tuple[Path, Path]) -> None:
    served, reference = folders
    served.mkdir(mode=0o700)
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(served / _SOCKET))
    stale.close()  # the socket file stays, nobody listens: a dead worker's
    assert _claude_batches(served, 3) == _expected_batches(reference, 3)
    _wait_for(lambda: len(worker_pids(served)) == 1, "a worker")
    _wait_for(lambda: _listens(served / _SOCKET), "the new worker's socket")


def _listens(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(str(path))
        except OSError:
            return False
    return True


def test_a_worker_killed_mid_request_leaves_the_in_process_answer(
    folders: tuple[Path, Path],
) -> None:
    served, reference = folders
    worker = _start_worker(served)
    expected = _expected_batches(reference, 3)
    answers = _claude_batches(served, 1)
    os.kill(worker.pid, signal.SIGSTOP)  # it accepts nothing more (the request waits)
    events = list(_claude())
    second = [p for p in events[5:] if p["hook_event_name"] != "UserPromptSubmit"][:4]
    for payload in second[:3]:  # the failures: in process, no worker needed
        _client("claude-code", served, payload, "enforce")
    request = served.parent / "batch.json"
    request.write_text(json.dumps(second[3]))
    with request.open("rb") as stdin:
        client = subprocess.Popen(
            [*_CLIENT, "claude-code", "--mode", "enforce", "--state-dir", str(served)],
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
    time.sleep(0.3)  # the client is connected, or not yet: both must fall back
    worker.kill()
    worker.wait(timeout=30)
    out, err = client.communicate(timeout=60)
    answers.append(out)
    assert client.returncode == 0 and err == b""
    answers += _claude_batches_after(served, events, 9, 1)
    assert answers == expected
    assert _state(served, "s") == _state(reference, "s")


def _claude_batches_after(
    directory: Path, events: list[Any], start: int, count: int
) -> list[bytes]:
    answers = []
    for payload in events[start:]:
        done = _client("claude-code", directory, payload, "enforce")
        if payload["hook_event_name"] == "PostToolBatch":
            answers.append(done.stdout)
            if len(answers) == count:
                break
    return answers


def _told(tmp_path: Path, directory: Path, payload: Any) -> tuple[bytes, bytes, bool]:
    """The hook's stdout, stderr, and whether its own process ran ``run_hook``."""
    options = ["--mode", "enforce", "--state-dir", str(directory)]
    done = subprocess.run(
        [*_telling(tmp_path / "told"), "claude-code", *options],
        input=json.dumps(payload).encode(),
        capture_output=True,
        timeout=25,  # under Claude Code's 30 s hook timeout
        check=True,
    )
    in_process = (tmp_path / "told").read_text().splitlines()[-1] == "true"
    return done.stdout, done.stderr, in_process


def test_a_stopped_worker_is_replaced_and_applies_nothing_twice(
    tmp_path: Path, folders: tuple[Path, Path]
) -> None:
    served, reference = folders
    worker = _start_worker(served)
    expected = _expected_batches(reference, 4)
    events = list(_claude())
    answers = _claude_batches_after(served, events, 0, 1)  # events 0..4
    os.kill(worker.pid, signal.SIGSTOP)  # idle and stopped: it takes no request any more
    for payload in events[5:8]:
        _client("claude-code", served, payload, "enforce")
    # the client waits its bound, ends the worker, answers in process and starts another
    out, err, in_process = _told(tmp_path, served, events[8])
    assert (err, in_process) == (b"", True)
    answers.append(out)
    assert worker.wait(timeout=30) == -signal.SIGKILL
    _wait_for(lambda: _listens(served / _SOCKET), "the new worker's socket")
    [replacement] = worker_pids(served)
    assert replacement != worker.pid
    for payload in events[9:]:  # no 2 s wait again: the new worker answers every batch
        out, err, in_process = _told(tmp_path, served, payload)
        assert err == b""
        if payload["hook_event_name"] == "PostToolBatch":
            assert not in_process
            answers.append(out)
            if len(answers) == len(expected):
                break
    assert answers == expected
    assert _state(served, "s") == _state(reference, "s")
    assert worker_pids(served) == [replacement]


def test_a_request_handled_twice_is_applied_once(tmp_path: Path) -> None:
    """A worker that gets to a request its client gave up on answers it and changes nothing."""
    directory = tmp_path / "state"
    events = list(_claude())[:5]  # a prompt, three failures, their batch
    for payload in events[:-1]:
        _reference("claude-code", directory, payload, "enforce")
    answers = []
    for _ in range(2):
        stdout, stderr = io.StringIO(), io.StringIO()
        options = HookOptions(cli="claude-code", mode="enforce", state_dir=directory)
        data = io.BytesIO(json.dumps(events[-1]).encode())
        run_hook(options, data, stdout, stderr, request="same-request")
        answers.append((stdout.getvalue(), stderr.getvalue()))
        if len(answers) == 1:
            once = _state(directory, "s")
    assert answers[0] == answers[1]
    assert _state(directory, "s") == once


def test_concurrent_hooks_start_one_worker(folders: tuple[Path, Path]) -> None:
    served, _ = folders
    served.mkdir(mode=0o700)
    batch = json.dumps(list(_claude())[4]).encode()
    clients = [
        subprocess.Popen(
            [*_CLIENT, "claude-code", "--mode", "enforce", "--state-dir", str(served)],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
        )
        for _ in range(6)
    ]
    for client in clients:
        client.communicate(batch, timeout=60)
    # a client starts a worker before it exits (Popen returns once it runs): all are here
    assert len(worker_pids(served)) == 1
    _wait_for(lambda: (served / _SOCKET).exists(), "the worker's socket")
    assert len(worker_pids(served)) == 1


def test_the_worker_exits_after_its_idle_bound_and_removes_its_socket(
    folders: tuple[Path, Path],
) -> None:
    served, _ = folders
    worker = _start_worker(served, idle_s=0.5)
    assert worker.wait(timeout=30) == 0
    assert not (served / _SOCKET).exists()


def test_a_second_worker_for_the_same_folder_leaves_at_once(folders: tuple[Path, Path]) -> None:
    served, _ = folders
    first = _start_worker(served)
    second = subprocess.run(
        [*_WORKER, "--state-dir", str(served)], capture_output=True, timeout=60, check=False
    )
    assert second.returncode == 0 and first.poll() is None


def test_a_request_for_another_folder_is_refused(folders: tuple[Path, Path]) -> None:
    from tool_failure_guard.hooks.client import exchange

    served, other = folders
    _start_worker(served)
    header = {"cli": "claude-code", "mode": "enforce", "state_dir": str(other), "request": "r"}
    assert exchange(str(served), header, json.dumps(list(_claude())[4]).encode()) is None
    assert not other.exists()


@pytest.mark.parametrize(
    "words", [["--idle-s", "0"], ["--state-dir", "relative"], ["--bogus", "1"]]
)
def test_a_bad_worker_command_line_is_named(words: list[str], tmp_path: Path) -> None:
    words = words if "--state-dir" in words else [*words, "--state-dir", str(tmp_path)]
    done = subprocess.run([*_WORKER, *words], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stderr.startswith("worker: ")


def test_a_long_state_folder_is_reached_through_its_descriptor(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    assert len(str(deep / _SOCKET)) > 108
    reference = tmp_path / "reference"
    try:
        _start_worker(deep)
        assert _claude_batches(deep, 3) == _expected_batches(reference, 3)
        stored = json.loads((deep / "s.json").read_text())["state"]
        assert any(request for _key, request, _answer in stored["events"])
    finally:
        stop_workers(tmp_path)
