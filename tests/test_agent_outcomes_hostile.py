"""The other agents' outcome rules on hostile tool output (issue 40, item 1: the check).

The Claude Code rules' quadratic pattern (``tests/test_claude_code_outcomes_hostile.py``)
prompted a look at every rule that reads outside text with a pattern: Codex's and Gemini
CLI's exit-code lines (``MULTILINE``, ``\\s*$``) and SWE-agent's timeout sentence (``.*``
under ``DOTALL``) each try a bounded amount per line start, so they are linear; these
tests hold them so, on 4 MiB shaped to make a backtracking pattern work hardest, in a
child process under a generous timeout (no wall-clock figure asserted).  What the look
did find: Codex's rules read an output that starts with ``{`` as the older shell tool's
JSON, and one nested 100,000 deep made ``json.loads`` raise ``RecursionError`` out of
the classification; it is read as text now.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tool_failure_guard.agent_outcomes import codex

ROOT = Path(__file__).resolve().parents[1]
DEEP = '{"a":' * 100_000 + "1" + "}" * 100_000
SHELL = "shell_execute_error"


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        (DEEP, ("success", "success", None)),
        (DEEP + "\nProcess exited with code 2\n", ("error", "error", SHELL)),
        (
            '{"output": "x", "metadata": {"exit_code": 1}}',
            ("error", "error", "shell_execute_error"),
        ),
    ],
)
def test_a_deeply_nested_codex_output_is_read_as_text(
    output: str, expected: tuple[str, str, str | None]
) -> None:
    status, execution, error_type, _heuristic = codex.from_output(output)
    assert (status, execution, error_type) == expected


HOSTILE = """
from tool_failure_guard.agent_outcomes import codex, gemini_cli
from tool_failure_guard.transcripts.importers import swe_agent

n = 2 * 1024 * 1024
print(codex.from_output("Process exited with code 1" + " \\n" * n + "x")[2])
print(codex.from_output("Process exited with code 1 " * (n // 14))[2])
response = {"llmContent": "Exit Code: 1" + " \\n" * n + "x"}
print(gemini_cli.from_after_tool("run_shell_command", response).error_type)
response = {"llmContent": "Exit Code: 1 " * (n // 6)}
print(gemini_cli.from_after_tool("run_shell_command", response).error_type)
sentence = "' was cancelled because it took more than x"
print(swe_agent.rule({"observation": "The command '" + sentence * (n // 22)}))
"""


def test_the_other_rules_read_4_mib_of_hostile_output_in_linear_time() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", HOSTILE],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    # an exit-code line ends at its newline (MULTILINE): the trailing blanks are no matter
    assert done.stdout.splitlines() == [
        "shell_execute_error",
        "None",
        "shell_execute_error",
        "None",
        "any other observation",
    ]
