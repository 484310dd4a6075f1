"""One guard however often installed: each event applied once, the installs' effective
mode, the scopes verified, the state's summary (no CLI; payloads as Claude Code sends them).
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from pathlib import Path

import pytest
from hook_session import EXE as _EXE
from hook_session import Session
from hook_session import kind as _kind

from tool_failure_guard.hooks import claude_code, config, installs
from tool_failure_guard.hooks.event_keys import MAX_REMEMBERED, AppliedEvents, event_key
from tool_failure_guard.hooks.installs import Installs, install_key, verified_rank

# -- one guard however often installed --------------------------------------------------------


def test_an_event_is_applied_once_and_answered_once_across_installs(tmp_path: Path) -> None:
    s = Session(tmp_path)
    two = [s.options("enforce", "user", exe="/a/tool-failure-guard"), s.options("enforce")]
    # a prompt whose calls all succeed is never stopped (applied twice, batch 3 used to stop)
    assert all(s.batch(two, fail=False) == [None, None] for _ in range(12))
    kinds = [[_kind(a) for a in s.batch(two)] for _ in range(3)]
    assert kinds == [["", ""], ["remind", ""], ["stop", ""]]  # one reminder, one stop


def test_the_same_request_gets_its_answer_back_and_changes_nothing(tmp_path: Path) -> None:
    s = Session(tmp_path)
    enforce = s.options("enforce")
    s.batch([enforce])
    for call_id in ("x1", "x2", "x3", "x4"):
        failure = {
            "hook_event_name": "PostToolUseFailure",
            "prompt_id": "p",
            "tool_use_id": call_id,
            "tool_name": "Read",
            "error": "File does not exist.",
        }
        s.send(failure, enforce)
    entries = [
        {"tool_use_id": f"x{n}", "tool_name": "Read", "tool_response": "x"} for n in (1, 2, 3, 4)
    ]
    event = {"hook_event_name": "PostToolBatch", "prompt_id": "p", "tool_calls": entries}
    first = s.send(event, enforce, request="r1")
    before = s.state()["loops"]
    assert _kind(first) == "remind"
    assert s.send(event, enforce, request="r1") == first  # the client's fallback, or the worker
    assert s.send(event, enforce, request="r2") is None  # a second install
    assert s.state()["loops"] == before


def test_event_keys_name_the_session_loop_prompt_event_and_calls() -> None:
    batch = {
        "session_id": "s",
        "prompt_id": "p",
        "hook_event_name": "PostToolBatch",
        "tool_calls": [{"tool_use_id": "b"}, {"tool_use_id": "a"}],
    }
    assert event_key(batch) == event_key({**batch, "tool_calls": batch["tool_calls"][::-1]})
    assert event_key(batch) != event_key({**batch, "agent_id": "x"})
    assert event_key(batch) != event_key({**batch, "prompt_id": "q"})
    failure = {"session_id": "s", "hook_event_name": "PostToolUseFailure", "tool_use_id": "a"}
    assert event_key(failure) != event_key({**failure, "tool_use_id": "b"})
    assert event_key({"session_id": "s", "hook_event_name": "UserPromptSubmit"}) is None
    many = {**batch, "tool_calls": [{"tool_use_id": f"toolu_{n:040d}"} for n in range(50)]}
    assert str(event_key(many)).startswith("sha256-")
    applied = AppliedEvents()
    for n in range(MAX_REMEMBERED + 10):
        applied.remember(f"k{n}", None, {"big": "answer"})
    assert len(applied.to_state()) == MAX_REMEMBERED
    assert all(answer is None for _k, _r, answer in applied.to_state())  # no request: no answer


# -- the installs' effective mode -------------------------------------------------------------


def _installs(*rows: tuple[str | None, str, int, float]) -> Installs:
    found = Installs()
    for n, (scope, mode, rank, seen) in enumerate(rows):
        found.register(
            cli="claude-code",
            mode=mode,
            scope=scope,
            argv=[f"/v{n}/tool-failure-guard"],
            prompt_id="p",
            now=seen,
            verify=lambda cli, claimed, argv, rank=rank: rank,
        )
    return found


@pytest.mark.parametrize(
    ("rows", "effective"),
    [
        ([("user", "enforce", 2, 0.0), ("project", "warn", 1, 0.0)], "enforce"),
        ([("user", "warn", 2, 0.0), ("project", "enforce", 1, 0.0)], "warn"),
        ([("project", "warn", 1, 0.0), ("settings", "enforce", 1, 0.0)], "warn"),
        ([("managed", "off", 3, 0.0), ("user", "enforce", 2, 0.0)], "off"),
        ([("managed", "shadow", 3, 0.0), ("user", "enforce", 2, 0.0)], "shadow"),
        # an install not seen for an hour no longer counts
        ([("managed", "off", 3, -3601.0), ("user", "enforce", 2, 0.0)], "enforce"),
    ],
)
def test_the_highest_ranked_recent_install_decides_ties_to_the_least_acting_mode(
    rows: list[tuple[str | None, str, int, float]], effective: str
) -> None:
    assert _installs(*rows).effective_mode(0.0) == effective


def test_a_managed_off_install_switches_the_others_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = Session(tmp_path)
    managed_off = s.options("off", "managed")
    user = s.options("enforce", "user", exe="/u/tool-failure-guard")
    monkeypatch.setattr(installs, "verified_rank", lambda c, scope, a: installs.SCOPE_RANK[scope])
    answers = [s.batch([managed_off, user]) for _ in range(4)]
    assert answers == [[None, None]] * 4
    assert "loops" not in s.state()  # nothing applied
    assert s.state()["summary"]["mode"] == "off"
    # a managed claim its file does not hold ranks as a project's: below the user's install
    only_user = {"user": 2}
    monkeypatch.setattr(installs, "verified_rank", lambda c, scope, a: only_user.get(scope, 1))
    s.clock += 1
    s.prompt = "q"  # the scopes are checked again at the next prompt
    assert [_kind(a) for a in s.batch([managed_off, user])] == ["", ""]
    assert [_kind(a) for a in s.batch([managed_off, user])] == ["", "remind"]


def test_an_operator_scope_counts_only_when_its_settings_file_holds_the_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    managed = tmp_path / "managed-settings.json"
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    monkeypatch.setitem(claude_code.SCOPES, "managed", str(managed))
    monkeypatch.setattr(installs, "_passwd_home", lambda: str(home))
    argv = [_EXE, "hook", "claude-code", "--mode", "enforce", "--scope", "managed"]

    def write(path: Path, command: str) -> None:
        group = {"matcher": "*", "hooks": [{"type": "command", "command": command}]}
        path.write_text(json.dumps({"hooks": {"PostToolBatch": [group]}}))

    assert verified_rank("claude-code", "managed", argv) == installs.PROJECT_RANK  # no file
    write(managed, shlex.join([*argv[:-1], "user"]))
    assert verified_rank("claude-code", "managed", argv) == installs.PROJECT_RANK  # other words
    write(managed, shlex.join(argv))
    assert verified_rank("claude-code", "managed", argv) == installs.SCOPE_RANK["managed"]
    user_argv = [*argv[:-1], "user"]
    assert verified_rank("claude-code", "user", user_argv) == installs.PROJECT_RANK
    # $HOME (which a project's env can move) is never read: the passwd entry's home is
    monkeypatch.setenv("HOME", str(tmp_path))
    write(tmp_path / "settings.json", shlex.join(user_argv))
    assert verified_rank("claude-code", "user", user_argv) == installs.PROJECT_RANK
    write(home / ".claude" / "settings.json", shlex.join(user_argv))
    assert verified_rank("claude-code", "user", user_argv) == installs.SCOPE_RANK["user"]
    # a plugin's command names no mode: one with a mode of its own is a project's claim
    assert verified_rank("claude-code", "plugin", user_argv) == installs.PROJECT_RANK
    assert verified_rank("claude-code", None, user_argv) == installs.PROJECT_RANK


def test_a_scope_is_verified_once_per_prompt() -> None:
    checked: list[str | None] = []

    def verify(cli: str, scope: str | None, argv: Sequence[str]) -> int:
        checked.append(scope)
        return 3

    found = Installs()
    for prompt, now in (("p", 1.0), ("p", 2.0), ("p", 3.0), ("q", 4.0), ("q", 5.0)):
        found.register(
            cli="claude-code",
            mode="enforce",
            scope="managed",
            argv=[_EXE],
            prompt_id=prompt,
            now=now,
            verify=verify,
        )
    assert checked == ["managed", "managed"]
    assert list(found.to_state()) == [install_key([_EXE], "managed", "enforce")]


def test_the_summary_says_what_the_session_did(tmp_path: Path) -> None:
    s = Session(tmp_path)
    warn = s.options("warn")
    s.batch([warn])
    s.batch([warn], agent="a1")
    s.batch([warn])
    summary = s.state()["summary"]
    assert summary == {
        "events": 15,  # 3 batches of 4 failures, 3 batch events
        "last_event": "PostToolBatch",
        "last_decision": "warn",
        "mode": "warn",
        "loops": 2,
        "updated": s.clock,
    }


def test_the_worker_registers_the_install_its_client_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the batch events go to the warm worker: the header carries the install's scope and
    # command line, so the worker registers the install the hook's process would
    from tool_failure_guard.hooks.worker import handle_request

    directory = tmp_path / "st"
    argv = [_EXE, "hook", "claude-code", "--scope", "plugin"]  # its mode: the operator's
    monkeypatch.setattr(config, "read_config", lambda: {"claude-code": {"mode": "warn"}})
    header = {
        "cli": "claude-code",
        "mode": "warn",
        "state_dir": str(directory),
        "request": "r1",
        "scope": "plugin",
        "command": "\0".join(argv),
    }
    batch = {"hook_event_name": "PostToolBatch", "session_id": "s", "prompt_id": "p"}
    batch["tool_calls"] = [{"tool_use_id": "a", "tool_name": "Read", "tool_response": "x"}]
    data = json.dumps(header).encode() + b"\n" + json.dumps(batch).encode()
    assert handle_request(data, str(directory)) == {"stdout": "", "stderr": ""}
    state = Session(directory).state()
    assert state["installs"] == {
        install_key(argv, "plugin", "warn"): ["plugin", "warn", 2, state["summary"]["updated"], "p"]
    }
    bad = dict(header, command=["not", "text"])
    refused = handle_request(json.dumps(bad).encode() + b"\n{}", str(directory))
    assert "refused" in refused


def test_a_plugin_claim_counts_only_as_the_operators_configured_plugin(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The plugin's command names no mode (the operator's ``hook configure`` gives it): an
    entry claiming the plugin's rank with a mode of its own, or for a plugin the operator
    never configured (a project's settings, to tie with the user's guard at its rank and
    win by the least acting mode), ranks as a project."""
    plugin = [_EXE, "hook", "claude-code", "--scope", "plugin"]
    configured: dict[str, object] = {}
    monkeypatch.setattr(config, "read_config", lambda: configured)
    assert verified_rank("claude-code", "plugin", plugin) == installs.PROJECT_RANK
    configured["claude-code"] = {"mode": "enforce"}
    assert verified_rank("claude-code", "plugin", plugin) == installs.SCOPE_RANK["plugin"]
    assert verified_rank("qwen-code", "plugin", plugin) == installs.PROJECT_RANK
    for mode in (["--mode", "off"], ["--mode=off"]):
        assert verified_rank("claude-code", "plugin", [*plugin, *mode]) == installs.PROJECT_RANK
