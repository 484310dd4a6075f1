"""mini-swe-agent: a rejected message is one event, and version 1's actions are found linearly.

Issue 39 item 2 / issue 40 item 8: a message the agent refused ("EXACTLY ONE action") ran
nothing, so it is one not-started record, never one call per block, and no peer's rule sees
its blocks as repeated calls; the ``ACTION`` pattern of mini-swe-agent 1.x is matched by a
linear scan that finds exactly what the pattern finds, hostile text included.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from transcript_files import FIXTURES

from tool_failure_guard.transcripts.importers import mini_swe_agent as mini
from tool_failure_guard.transcripts.importers.mini_swe_agent_text import ACTION, actions
from tool_failure_guard.transcripts.replay import replay_run

MINI = FIXTURES / "mini-swe-agent"
#: what the agent's FormatError template says (1.15's default config)
FORMAT_ERROR = "Please always provide EXACTLY ONE action in triple backticks, found 3 actions."

# the pieces the pattern turns on, and whitespace Python's \s matches beyond ASCII
_PIECES = ["```bash", "```", "\n", " ", "\t", "\r", "x", "b", "\x1c", "\x85", "\u00a0", "\u2028"]


@settings(max_examples=3000, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=16))
def test_actions_are_what_the_agents_pattern_finds(pieces: list[str]) -> None:
    text = "".join(pieces)
    assert actions(text) == ACTION.findall(text)


def test_actions_on_published_shapes() -> None:
    assert actions("Thought.\n```bash\nls -la\n```\n") == ["ls -la"]
    assert actions("```bash\n\n```\n") == ACTION.findall("```bash\n\n```\n")
    assert actions("```bash\na\n```\n```bash\nb\n```") == ["a", "b"]
    assert actions("```bash ls\n```") == []  # no newline after the fence's word
    assert actions("```bash\n  \n```") == ACTION.findall("```bash\n  \n```")


HOSTILE = """
import sys
from tool_failure_guard.transcripts.importers.mini_swe_agent_text import actions
size = 10 << 20
for text in ("```bash" + "\\n" * size + "x", "```bash\\n" * (size // 8),
             "```bash \\n" + " \\n" * (size // 2), ("```bash\\nx\\n```" * (size // 14))):
    found = actions(text)
print("done")
"""


def test_a_10_mb_hostile_message_is_parsed() -> None:
    """The pattern itself takes minutes on 1 MB of these; the scan must end. The generous
    timeout only fails the test, it measures nothing (benches measure speed)."""
    done = subprocess.run(
        [sys.executable, "-c", HOSTILE], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.strip() == "done"


def _with_rejected_messages(tmp_path: Path, count: int) -> Path:
    """The real 1.15 failing loop with its first ``count`` responses holding three identical
    blocks each, answered by the agent's format error (nothing ran)."""
    data = json.loads((MINI / "v1-failing-command.traj.json").read_text())
    messages = data["messages"]
    assistants = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
    for index in assistants[:count]:
        block = "```bash\ncat missing.txt\n```"
        messages[index]["content"] = f"Trying.\n{block}\n{block}\n{block}\n"
        messages[index + 1]["content"] = FORMAT_ERROR
    path = tmp_path / "rejected.traj.json"
    path.write_text(json.dumps(data))
    return path


def test_a_rejected_message_is_one_not_started_record(tmp_path: Path) -> None:
    (run,) = mini.read(_with_rejected_messages(tmp_path, 4))
    calls = [c for t in run.turns for c in t.calls]
    assert len(run.turns) == len(calls) == 14  # one record per message, never one per block
    refused = [c for c in calls if c.rejected_message]
    assert len(refused) == 4
    assert {(str(c.status), str(c.execution_status)) for c in refused} == {("error", "not_started")}
    assert all(c.error_text == FORMAT_ERROR for c in refused)


def test_no_peer_sees_a_rejected_messages_blocks_as_repeated_calls(tmp_path: Path) -> None:
    (run,) = mini.read(_with_rejected_messages(tmp_path, 6))
    result = replay_run(run)
    # six messages of three identical blocks: counted per block, every identical-call rule
    # and Goose would fire inside the first message; here only the 8 executed failures count
    assert result.calls == 14 and result.failed_calls == 14
    executed = 6 + 1  # the first executed step is call 7
    assert result.peers["opencode_roo"] == executed + 2
    assert result.peers["goose"] == executed + 2
    assert result.peers["gemini_cli"] == executed + 4
    # the guard (adapter profile) counts only the executed failures: 8 of them by call 14
    enforce = result.mode("enforce")
    assert enforce.stop is None and result.mode("warn").remind is not None


def test_a_v2_format_error_with_several_calls_is_one_record(tmp_path: Path) -> None:
    data = json.loads((MINI / "submits.traj.json").read_text())
    message = next(
        m
        for m in data["messages"]
        if (m.get("extra") or {}).get("interrupt_type") == "FormatError"
        and m["extra"]["response"]["choices"][0]["message"]["tool_calls"]
    )
    choice = message["extra"]["response"]["choices"][0]["message"]
    (call,) = choice["tool_calls"]
    choice["tool_calls"] = [call, {**call, "id": "second"}, {**call, "id": "third"}]
    path = tmp_path / "v2.traj.json"
    path.write_text(json.dumps(data))
    (run,) = mini.read(path)
    (before,) = mini.read(MINI / "submits.traj.json")
    refused = [c for t in run.turns for c in t.calls if c.rejected_message]
    assert len(refused) == 1 and refused[0].error_text == message["content"]
    assert sum(len(t.calls) for t in run.turns) == sum(len(t.calls) for t in before.turns)
