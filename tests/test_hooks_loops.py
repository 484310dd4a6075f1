"""One guard per agent loop (no CLI).

Claude Code's payloads as the notes (coding-cli-hooks.md §7) record them: a subagent's
events carry the parent's ``session_id`` and ``prompt_id`` plus ``agent_id`` and
``agent_type``; 2.1.337 hands a background agent's completion to the main agent as a
``UserPromptSubmit`` with the same ``prompt_id``.  Each test runs the hook's own
``run_hook`` on a state folder (:class:`hook_session.Session`), or the in-memory
:class:`SessionLoops` a long-lived host keeps.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hook_session import Session
from hook_session import kind as _kind

from tool_failure_guard.guard import REPEATED_TOOL_FAILURE_REMINDER
from tool_failure_guard.hooks import claude_code
from tool_failure_guard.hooks.loops import MAX_LOOPS, SessionLoops, handle_event

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


# -- Qwen Code's subagents ------------------------------------------------------------------


def _qwen_batch(ids: Sequence[str], agent: str | None, prompt: str = "p") -> dict[str, Any]:
    entries = [
        {
            "tool_call_id": call_id,
            "tool_name": "read_file",
            "status": "error",
            "tool_response": {"execution_status": "error", "error_type": "file_not_found"},
        }
        for call_id in ids
    ]
    more = {"agent_id": agent, "agent_type": "general-purpose"} if agent else {}
    return {"hook_event_name": "PostToolBatch", "prompt_id": prompt, "tool_calls": entries, **more}


def test_a_qwen_subagent_settles_at_its_batch_and_its_stop_is_context_and_a_notice() -> None:
    from tool_failure_guard.guard import REPEATED_TOOL_FAILURE_STOP_MESSAGE
    from tool_failure_guard.hooks import qwen_code

    loops = SessionLoops("enforce")
    submit = {"hook_event_name": "UserPromptSubmit", "prompt_id": "p", "prompt": "go"}
    assert handle_event(qwen_code, submit, loops).answer is None
    agent = "general-purpose-call_u001"
    answers = [
        handle_event(qwen_code, _qwen_batch([f"s{n}a", f"s{n}b", f"s{n}c", f"s{n}d"], agent), loops)
        for n in range(4)
    ]
    contexts = [
        a.answer["hookSpecificOutput"]["additionalContext"] if a.answer else "" for a in answers
    ]
    # the subagent's own streak: the reminder at its 2nd response, the stop at its 3rd, as
    # context (no answer stops a Qwen subagent), and again at every later response
    assert contexts[0] == ""
    assert contexts[1] == REPEATED_TOOL_FAILURE_REMINDER
    assert contexts[2] == contexts[3] == REPEATED_TOOL_FAILURE_STOP_MESSAGE
    assert all(a.answer is None or "continue" not in a.answer for a in answers)
    # the main loop's own calls are untouched; its next request carries the notice, once
    assert loops.main.batches == [] and loops.main.pending == {}
    handle_event(qwen_code, _qwen_batch(["m1"], None), loops)
    told = handle_event(qwen_code, submit, loops).answer
    assert told is not None and agent in told["hookSpecificOutput"]["additionalContext"]
    assert told["hookSpecificOutput"]["hookEventName"] == "UserPromptSubmit"
    assert handle_event(qwen_code, submit, loops).answer is None
    assert [len(batch) for batch in loops.main.batches] == [1]  # the main agent's own call
