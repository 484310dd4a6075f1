"""One guard per agent loop, each event applied once, the installs' effective mode (no CLI).

Claude Code's payloads as the notes (coding-cli-hooks.md §7) record them: a subagent's
events carry the parent's ``session_id`` and ``prompt_id`` plus ``agent_id`` and
``agent_type``; 2.1.337 hands a background agent's completion to the main agent as a
``UserPromptSubmit`` with the same ``prompt_id``.  Each test runs the hook's own
``run_hook`` on a state folder (or the in-memory :class:`SessionLoops`).
"""

from __future__ import annotations

import io
import json
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from tool_failure_guard.guard import REPEATED_TOOL_FAILURE_REMINDER
from tool_failure_guard.hooks import claude_code, installs
from tool_failure_guard.hooks.event_keys import MAX_REMEMBERED, AppliedEvents, event_key
from tool_failure_guard.hooks.installs import Installs, install_key, verified_rank
from tool_failure_guard.hooks.loops import MAX_LOOPS, SessionLoops, handle_event
from tool_failure_guard.hooks.run import HookOptions, run_hook
from tool_failure_guard.hooks.state import StateStore

_EXE = "/opt/guard/bin/tool-failure-guard"


class Session:
    """One Claude Code session's events through ``run_hook`` (one or more installs)."""

    def __init__(self, root: Path, *, prompt: str = "p") -> None:
        self.root = root
        self.prompt = prompt
        self.count = 0
        self.clock = 1_000_000.0

    def options(self, mode: str, scope: str | None = None, exe: str = _EXE) -> HookOptions:
        argv = [exe, "hook", "claude-code", "--mode", mode]
        argv += ["--scope", scope] if scope else []
        return HookOptions(
            cli="claude-code", mode=mode, state_dir=self.root, scope=scope, argv=argv
        )

    def send(
        self, payload: dict[str, Any], options: HookOptions, request: str | None = None
    ) -> dict[str, Any] | None:
        stdout, stderr = io.StringIO(), io.StringIO()
        data = io.BytesIO(json.dumps({"session_id": "s", **payload}).encode())
        run_hook(options, data, stdout, stderr, clock=lambda: self.clock, request=request)
        assert stderr.getvalue() == "", stderr.getvalue()
        out = stdout.getvalue()
        return json.loads(out) if out else None

    def batch(
        self,
        installs_: Sequence[HookOptions],
        *,
        fail: bool = True,
        agent: str | None = None,
        calls: int = 4,
    ) -> list[dict[str, Any] | None]:
        """One model response of ``calls`` Reads (failing or not) as every install sees it;
        each install's answer to the batch event."""
        self.count += 1
        ids = [f"toolu_{agent or 'main'}_{self.count}_{i}" for i in range(calls)]
        more: dict[str, Any] = {"prompt_id": self.prompt}
        if agent is not None:
            more.update(agent_id=agent, agent_type="general-purpose")
        if fail:
            for call_id in ids:
                failure = {
                    "hook_event_name": "PostToolUseFailure",
                    "tool_use_id": call_id,
                    "tool_name": "Read",
                    "error": "File does not exist. Note: your current working directory is /w.",
                    **more,
                }
                for options in installs_:
                    assert self.send(failure, options) is None
        entries = [
            {"tool_use_id": i, "tool_name": "Read", "tool_input": {}, "tool_response": "ok"}
            for i in ids
        ]
        event = {"hook_event_name": "PostToolBatch", "tool_calls": entries, **more}
        return [self.send(event, options) for options in installs_]

    def submit(self, options: HookOptions, prompt_id: str | None) -> dict[str, Any] | None:
        payload: dict[str, Any] = {"hook_event_name": "UserPromptSubmit", "prompt": "x"}
        if prompt_id is not None:
            payload["prompt_id"] = prompt_id
        return self.send(payload, options)

    def state(self) -> dict[str, Any]:
        path = StateStore(self.root).path_of("s")
        return json.loads(path.read_text())["state"]  # type: ignore[no-any-return]


def _kind(answer: dict[str, Any] | None) -> str:
    if answer is None:
        return ""
    if answer.get("continue") is False:
        return "stop"
    context = answer["hookSpecificOutput"]["additionalContext"]
    kinds = []
    if REPEATED_TOOL_FAILURE_REMINDER in context:
        kinds.append("remind")
    if "stopped the subagent" in context:
        kinds.append("notice")
    return "+".join(kinds)


# -- one guard per agent loop ----------------------------------------------------------------


def test_a_subagent_has_its_own_streak_and_its_stop_is_a_notice_for_the_main_loop(
    tmp_path: Path,
) -> None:
    s = Session(tmp_path)
    enforce = [s.options("enforce")]
    assert _kind(s.batch(enforce)[0]) == ""  # the main loop's first failing batch
    sub = [_kind(s.batch(enforce, agent="a1")[0]) for _ in range(3)]
    assert sub == ["", "remind", "stop"]  # the subagent's own streak: its 2nd and 3rd batch
    # the main loop's second failing batch: its own reminder, and the notice of the stop
    answer = s.batch(enforce)[0]
    assert _kind(answer) == "remind+notice"
    assert answer is not None
    context = answer["hookSpecificOutput"]["additionalContext"]
    assert "a1 (general-purpose)" in context and "stopped" in context
    assert _kind(s.batch(enforce)[0]) == "stop"  # the main loop's third: its own stop
    assert s.state()["loops"]["notices"] == []


def test_the_main_loop_is_the_same_whether_its_subagent_fails_or_succeeds(
    tmp_path: Path,
) -> None:
    answers = {}
    for sub_fails in (True, False):
        s = Session(tmp_path / str(sub_fails))
        enforce = [s.options("enforce")]
        seen = [_kind(s.batch(enforce)[0])]
        seen += [_kind(s.batch(enforce, agent="a1", fail=sub_fails)[0]) for _ in range(2)]
        seen += [_kind(s.batch(enforce)[0]) for _ in range(2)]
        answers[sub_fails] = seen
    # the main loop's reminder at its 2nd batch, its stop at its 3rd, either way; the
    # subagent is reminded for its own streak only (its 2nd failing batch)
    assert answers[True] == ["", "", "remind", "remind", "stop"]
    assert answers[False] == ["", "", "", "remind", "stop"]


def test_a_subagent_is_never_reminded_for_its_parents_failures(tmp_path: Path) -> None:
    s = Session(tmp_path)
    warn = [s.options("warn")]
    assert [_kind(s.batch(warn)[0]) for _ in range(2)] == ["", "remind"]
    assert _kind(s.batch(warn, agent="a1")[0]) == ""  # its first failing batch
    assert _kind(s.batch(warn, agent="a2", fail=False)[0]) == ""
    assert [_kind(s.batch(warn)[0]) for _ in range(3)] == ["", "", ""]  # warn: once a streak


def test_a_task_notification_with_the_same_prompt_id_keeps_the_streak_and_carries_the_notice(
    tmp_path: Path,
) -> None:
    s = Session(tmp_path)
    enforce = [s.options("enforce")]
    assert s.submit(enforce[0], "p") is None
    assert _kind(s.batch(enforce)[0]) == ""
    assert [_kind(s.batch(enforce, agent="bg")[0]) for _ in range(3)] == ["", "remind", "stop"]
    assert _kind(s.submit(enforce[0], "p")) == "notice"  # the <task-notification>, mid-turn
    assert _kind(s.batch(enforce)[0]) == "remind"  # the main loop's 2nd batch: no reset
    s.prompt = "q"
    assert s.submit(enforce[0], "q") is None  # a new prompt id: a fresh guard
    assert _kind(s.batch(enforce)[0]) == ""


def test_a_background_subagent_keeps_the_prompt_it_started_in(tmp_path: Path) -> None:
    s = Session(tmp_path)
    enforce = [s.options("enforce")]
    assert _kind(s.batch(enforce, agent="bg")[0]) == ""
    s.prompt = "q"  # the main agent's turn ended; the user's next prompt
    assert s.submit(enforce[0], "q") is None
    assert _kind(s.batch(enforce)[0]) == ""
    s.prompt = "p"  # the background subagent's events keep the prompt id it started under
    assert _kind(s.batch(enforce, agent="bg")[0]) == "remind"
    s.prompt = "q"
    assert _kind(s.batch(enforce)[0]) == "remind"  # neither reset the other


def test_loops_are_bounded_least_recently_used_first_and_the_main_loop_is_kept() -> None:
    loops = SessionLoops("enforce")
    loops.main.enter_prompt("p")
    for n in range(MAX_LOOPS + 5):
        loops.loop(f"a{n}")
    assert len(loops) == MAX_LOOPS
    assert "" in loops.ids() and "a0" not in loops.ids() and f"a{MAX_LOOPS + 4}" in loops.ids()
    again = SessionLoops.from_state("enforce", json.loads(json.dumps(loops.to_state())))
    assert again.ids() == loops.ids() and again.main.prompt_id == "p"


def test_the_in_memory_loops_give_the_same_answers() -> None:
    # what a host that lives as long as the session (the Agent SDK adapter) uses
    loops = SessionLoops("enforce")

    def batch(n: int, agent: str | None = None) -> str:
        more = {"agent_id": agent, "agent_type": "Explore"} if agent else {}
        call = f"c{n}"
        failure = {
            "hook_event_name": "PostToolUseFailure",
            "prompt_id": "p",
            "tool_use_id": call,
            "tool_name": "Bash",
            "error": "Exit code 3",
            **more,
        }
        handle_event(claude_code, failure, loops)
        entry = {"tool_use_id": call, "tool_name": "Bash", "tool_response": "Exit code 3"}
        event = {"hook_event_name": "PostToolBatch", "prompt_id": "p", "tool_calls": [entry]}
        return _kind(handle_event(claude_code, {**event, **more}, loops).answer)

    kinds = [batch(n, "x") for n in range(9)]
    assert kinds == [""] * 7 + ["remind", "stop"]  # single calls: the 8th batch, then the 9th
    assert batch(9) == "notice"


# -- the error texts kept ---------------------------------------------------------------------


def test_no_error_text_outlives_its_batch_or_the_bound(tmp_path: Path) -> None:
    s = Session(tmp_path)
    enforce = s.options("enforce")
    failure = {
        "hook_event_name": "PostToolUseFailure",
        "prompt_id": "p",
        "tool_use_id": "lost",
        "tool_name": "Read",
        "error": "SECRET-TEXT File does not exist.",
    }
    assert s.send(failure, enforce) is None
    assert "SECRET-TEXT" in json.dumps(s.state())
    s.clock += 901  # its batch never settled (interrupted): past the bound it goes
    s.submit(enforce, "p")
    assert "SECRET-TEXT" not in json.dumps(s.state())
    assert s.send(failure, enforce) is None
    s.batch([enforce])  # another batch of the loop settles: a record left over goes with it
    assert "SECRET-TEXT" not in json.dumps(s.state())


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
    monkeypatch.setitem(
        installs.SCOPE_FILES,
        "claude-code",
        {"managed": (str(managed),), "user": ("~/.claude/settings.json",)},
    )
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
    assert verified_rank("claude-code", "plugin", user_argv) == installs.SCOPE_RANK["plugin"]
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
