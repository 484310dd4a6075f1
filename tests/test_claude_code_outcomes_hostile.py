"""A hostile Claude Code tool result is classified in time linear in a bound (issue 40, item 1).

``<tool_use_error>`` followed by many newlines and one other character took the old
pattern (``^\\s*<tool_use_error>(.*?)(</tool_use_error>)?\\s*$``, DOTALL) seconds at
20,000 characters and hours at 4 MiB, holding a hook's session lock meanwhile.  The
reading is now string operations on the text's first ``MAX_CLASSIFIED_TEXT``
characters.  The 4 MiB cases run in a child process under a generous timeout: with the
old pattern they never finish; no wall-clock figure is asserted beyond that.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from transcript_files import CLAUDE, edited

from tool_failure_guard.agent_outcomes import claude_code as outcomes

ROOT = Path(__file__).resolve().parents[1]
HOSTILE_CHARS = 4 * 1024 * 1024
#: Far above what a linear reading of 4 MiB takes, far below what the old pattern took.
CHILD_TIMEOUT_S = 120

#: The pattern the rules used to read ``<tool_use_error>`` with: the reference for short texts.
OLD_PATTERN = re.compile(r"^\s*<tool_use_error>(.*?)(</tool_use_error>)?\s*$", re.DOTALL)


def _old_inner(text: str) -> str | None:
    found = OLD_PATTERN.match(text)
    return None if found is None else found.group(1)


def test_the_tag_is_read_as_the_old_pattern_read_it() -> None:
    pieces = ["", " ", "\n", "\t", "x", "Error: No such tool available", "<tool_use_error>"]
    pieces += ["</tool_use_error>", "<tool_use_error", "\u2003"]
    texts = {"".join(p) for n in range(1, 5) for p in itertools.product(pieces, repeat=n)}
    assert len(texts) > 5000
    for text in texts:
        assert outcomes._inner(text) == _old_inner(text), repr(text)


def test_only_the_bounded_head_of_a_result_is_read() -> None:
    head = "<tool_use_error>Error: No such tool available: Foo"
    long = head + " " * (2 * outcomes.MAX_CLASSIFIED_TEXT) + "</tool_use_error>"
    assert outcomes.classify_batch_entry("Foo", long).error_type == "tool_not_registered"
    result = outcomes.Result(tool="Read", is_error=True, text="y" * 10**6, interrupted=False)
    assert len(result.text) == outcomes.MAX_CLASSIFIED_TEXT
    # a sentence past the bound is never looked at: the text is typed by what came before it
    late = "x" * outcomes.MAX_CLASSIFIED_TEXT + "File does not exist."
    assert outcomes.classify_hook_failure("Read", late, is_interrupt=False).error_type == "unknown"


def _child(script: str, *args: str) -> str:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])}
    done = subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


HOOK_SCRIPT = """
import sys
from tool_failure_guard.agent_outcomes.claude_code import (
    classify_batch_entry,
    classify_hook_failure,
)
from tool_failure_guard.guard import GuardMode
from tool_failure_guard.hooks import claude_code
from tool_failure_guard.hooks.prompt import PromptSession

hostile = "<tool_use_error>" + "\\n" * int(sys.argv[1]) + "x"
print(classify_batch_entry("Read", hostile).error_type)
print(classify_hook_failure("mcp__s__t", hostile, is_interrupt=False).error_type)
session = PromptSession(GuardMode.ENFORCE)
claude_code.handle({"hook_event_name": "UserPromptSubmit", "prompt_id": "p"}, session)
entry = {"tool_use_id": "a", "tool_name": "Read", "tool_input": {}, "tool_response": hostile}
claude_code.handle(
    {"hook_event_name": "PostToolBatch", "prompt_id": "p", "tool_calls": [entry]}, session
)
print(session.batches[0][0][6])

# the hook as the worker runs it: the payload (under its 4 MiB bound) from stdin, the state
import io, json
from pathlib import Path
from tool_failure_guard.hooks.payload import MAX_PAYLOAD_BYTES
from tool_failure_guard.hooks.run import HookOptions, run_hook

state = Path(sys.argv[2])
payload = {"hook_event_name": "PostToolBatch", "session_id": "s", "prompt_id": "p",
           "tool_calls": [entry]}
# each newline is two bytes in JSON: as many as fit under the bound
entry["tool_response"] = "<tool_use_error>" + "\\n" * ((MAX_PAYLOAD_BYTES - 4096) // 2) + "x"
data = json.dumps(payload).encode()
out, err = io.StringIO(), io.StringIO()
options = HookOptions(cli="claude-code", mode=GuardMode.ENFORCE, state_dir=state)
status = run_hook(options, io.BytesIO(data), out, err)
at_bound = MAX_PAYLOAD_BYTES - 4096 < len(data) <= MAX_PAYLOAD_BYTES
print(status, at_bound, repr(out.getvalue()), repr(err.getvalue()))
"""


def test_a_4_mib_hostile_result_is_classified_by_the_hook_at_once(tmp_path: Path) -> None:
    lines = _child(HOOK_SCRIPT, str(HOSTILE_CHARS), str(tmp_path / "state")).splitlines()
    # refused before it ran (the tag), an MCP tool's error, and the batch entry as the hook keeps it
    assert lines[:3] == ["invalid_tool_params", "mcp_tool_error", "invalid_tool_params"]
    # the whole hook on a payload at its bound: answered (nothing to say: one refused call)
    assert lines[3:] == ["0 True '' ''"]


IMPORT_SCRIPT = """
import sys
from tool_failure_guard.transcripts.importers import claude_code

for run in claude_code.read(sys.argv[1]):
    for turn in run.turns:
        for call in turn.calls:
            print(call.execution_status, call.error_type, len(call.error_text or ""))
"""


def test_a_4_mib_hostile_result_in_a_session_log_is_imported_at_once(tmp_path: Path) -> None:
    hostile = "<tool_use_error>" + "\n" * HOSTILE_CHARS + "x"

    def poison(records: list[dict[str, object]]) -> list[dict[str, object]]:
        for record in records:
            message = record.get("message")
            content = message.get("content") if isinstance(message, dict) else None
            for block in content if isinstance(content, list) else []:
                if block.get("type") == "tool_result" and block.get("is_error"):
                    block["content"] = hostile
                    return records
        raise AssertionError("the fixture holds no error result")

    path = edited(CLAUDE / "failing.session.jsonl", tmp_path / "hostile.jsonl", poison)
    assert os.path.getsize(path) > HOSTILE_CHARS  # the newlines, JSON-escaped
    rows = [line.split() for line in _child(IMPORT_SCRIPT, path).splitlines()]
    assert rows[0] == ["not_started", "invalid_tool_params", "4096"]  # error text kept bounded
    assert len(rows) > 1


@pytest.mark.parametrize("size", [10, 1000])
def test_the_hostile_shape_is_still_read_as_refused_when_short(size: int) -> None:
    text = "<tool_use_error>" + "\n" * size + "x"
    assert outcomes._inner(text) == _old_inner(text) == "\n" * size + "x"
    assert json.dumps(outcomes.classify_batch_entry("Read", text).error_type) == (
        '"invalid_tool_params"'
    )
