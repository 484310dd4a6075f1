"""A Codex tool output nested past the JSON parser's depth is text, not a crash (issue 40.1).

The rules read an output that starts with ``{`` as the older shell tool's JSON (its
``metadata.exit_code``); a hostile tool's output nested 100,000 deep made ``json.loads``
raise ``RecursionError``, which no caller expects from a classification.
"""

from __future__ import annotations

import pytest

from tool_failure_guard.agent_outcomes import codex

DEEP = '{"a":' * 100_000 + "1" + "}" * 100_000


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        (DEEP, ("success", "success", None)),
        (DEEP + "\nProcess exited with code 2\n", ("error", "error", "shell_execute_error")),
        (
            '{"output": "x", "metadata": {"exit_code": 1}}',
            ("error", "error", "shell_execute_error"),
        ),
    ],
)
def test_a_deeply_nested_output_is_read_as_text(
    output: str, expected: tuple[str, str, str | None]
) -> None:
    status, execution, error_type, _heuristic = codex.from_output(output)
    assert (status, execution, error_type) == expected
