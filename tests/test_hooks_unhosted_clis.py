"""Why no guard hook ships for the Copilot CLI (and what its hooks do), in the real CLI.

``docs/hooks-clis.md`` says the Copilot CLI 1.0.102 gets no guard hook: its
failure hook's ``additionalContext`` reaches the next request, but no payload
names a call or a batch (the seed's thresholds count batches), and no answer
stops the run.  This test keeps those claims true for the pinned version:
a logging hook answers every failure with a marker and ``continue: false``
and the run goes on to its final answer.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from agent_clis import copilot_script, require
from agent_fakes.script import Call, Turn
from hook_clis import copilot_hooks, run_copilot

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


@pytest.fixture(autouse=True)
def _copilot() -> None:
    require(copilot_script)


def test_copilot_carries_failure_context_but_names_no_call_and_cannot_stop(
    tmp_path: Path,
) -> None:
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
