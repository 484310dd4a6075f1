"""What the Copilot CLI's and the Codex CLI's hooks cannot do, in the real CLIs.

``docs/hooks-clis.md`` says the Copilot CLI gets no guard hook and the Codex
CLI only a late reminder.  The Copilot CLI 1.0.102's failure hook's
``additionalContext`` reaches the next request, but no payload names a call or
a batch (the seed's thresholds count batches), and no answer stops the run.
The Codex CLI 0.169.0 has no failure event: its ``PostToolUse`` gives the
output text only (no exit code), and ``continue: false`` only replaces the
call's output.  These tests keep those claims true for the pinned versions: a
logging hook answers every call with a marker and ``continue: false``, and each
run goes on to its final answer.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from agent_clis import codex_script, copilot_script, require
from agent_fakes.script import Call, Turn
from hook_clis import codex_hooks, copilot_hooks, run_codex, run_copilot

MARKER = "guard-marker-5d1c"
#: A hook that logs its payload and answers with a marker and a stop (Copilot's own format).
HOOK = """
import json, os, sys
payload = json.load(sys.stdin)
with open(os.environ["HOOK_LOG"], "a") as log:
    log.write(json.dumps(payload) + "\\n")
print(json.dumps({"additionalContext": os.environ["HOOK_MARKER"], "continue": False,
                  "stopReason": "stop here"}))
"""


def test_copilot_carries_failure_context_but_names_no_call_and_cannot_stop(
    tmp_path: Path,
) -> None:
    require(copilot_script)
    hook = tmp_path / "hook.py"
    hook.write_text(HOOK, encoding="utf-8")
    log = tmp_path / "hook.jsonl"

    def turns(ws: Path) -> list[Turn]:
        read = [
            Call(name="view", arguments={"path": str(ws / f"missing-{b}.txt")}) for b in range(3)
        ]
        return [Turn(text="Reading.", calls=(call,)) for call in read]

    run = run_copilot(
        turns,
        hooks=copilot_hooks(f"{sys.executable} {hook}", ["postToolUseFailure"]),
        env={"HOOK_LOG": str(log), "HOOK_MARKER": MARKER},
        base=tmp_path,
    )
    payloads = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    assert len(payloads) == 3  # one per failed call
    # no call id, no batch id: only the session, the time, the tool and the error text
    assert {key for p in payloads for key in p} == {
        "sessionId",
        "timestamp",
        "cwd",
        "toolName",
        "toolArgs",
        "error",
    }
    # the context reaches the very next request (a reminder could)...
    marked = [MARKER in json.dumps(r["messages"]) for r in run.requests]
    assert marked == [False, True, True, True]
    # ...but continue: false stopped nothing: every scripted turn ran, then the final answer
    assert len(run.requests) == 4 and run.returncode == 0
    assert "Done." in run.stdout


#: The Codex hook's answer: Claude-style, the marker as additionalContext, and a stop.
CODEX_HOOK = """
import json, os, sys
payload = json.load(sys.stdin)
with open(os.environ["HOOK_LOG"], "a") as log:
    log.write(json.dumps(payload) + "\\n")
context = {"hookEventName": "PostToolUse", "additionalContext": os.environ["HOOK_MARKER"]}
print(json.dumps({"continue": False, "stopReason": "stop here", "hookSpecificOutput": context}))
"""


def test_codex_gives_no_exit_code_and_its_stop_only_replaces_the_output(tmp_path: Path) -> None:
    require(codex_script)
    hook = tmp_path / "hook.py"
    hook.write_text(CODEX_HOOK, encoding="utf-8")
    log = tmp_path / "hook.jsonl"
    command = "cat missing-{}.txt; exit 3"
    turns = [
        Turn(
            text="Reading.",
            calls=(Call(name="exec_command", arguments={"cmd": command.format(b)}),),
        )
        for b in range(3)
    ]
    run = run_codex(
        turns,
        hooks=codex_hooks(f"{sys.executable} {hook}", ["PostToolUse"]),
        env={"HOOK_LOG": str(log), "HOOK_MARKER": MARKER},
        base=tmp_path,
    )
    payloads = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    assert len(payloads) == 3
    for payload in payloads:  # the output text only: exit 3 is nowhere in the payload
        assert (
            payload["tool_response"]
            == f"cat: {payload['tool_input']['command'][4:17]}: No such file or directory\n"
        )
    # no exit code, no status: only the ids, the tool, its input and that text
    assert {key for p in payloads for key in p} == {
        "session_id",
        "turn_id",
        "transcript_path",
        "cwd",
        "hook_event_name",
        "model",
        "permission_mode",
        "tool_name",
        "tool_input",
        "tool_response",
        "tool_use_id",
    }
    marked = [MARKER in json.dumps(r["input"]) for r in run.requests]
    assert marked == [False, True, True, True]  # context arrives (a developer message)...
    outputs = [
        item["output"]
        for item in run.requests[-1]["input"]
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    ]
    assert outputs == ["stop here"] * 3  # ...continue: false replaced each output...
    assert len(run.requests) == 4 and run.returncode == 0  # ...and stopped nothing
