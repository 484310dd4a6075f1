"""The docs name each protection's loop type as the code does (issue 33 §16).

The cap's loop type is ``turn_tool_call_cap`` (``core.protections.LOOP_TOOL_CALL_CAP``,
the original's name); ``tool_call_cap`` stays the error type of a call the cap skipped
and the cap's parameter, and as a loop type only the earlier value (``EARLIER_VALUES``).
"""

from __future__ import annotations

import re
from pathlib import Path

from tool_failure_guard.core.protections import LOOP_TOOL_CALL_CAP
from tool_failure_guard.telemetry.names import EARLIER_VALUES

DOCS = Path(__file__).resolve().parents[1] / "docs"
#: "`loop_type` `X`", "loopType `X`", "loop type `X`": a loop type named in prose.
NAMED_LOOP_TYPE = re.compile(r"(?:loop_type|loopType|loop type)`?[ :]+`([a-z_]+)`")
#: How a line says that a value is the earlier one.
AS_EARLIER = re.compile(r"earlier (?:value|builds?)")


def test_the_caps_loop_type_is_named_as_the_code_names_it() -> None:
    assert LOOP_TOOL_CALL_CAP == "turn_tool_call_cap"
    earlier = set(EARLIER_VALUES["loop_type"])
    wrong = []
    for path in sorted(DOCS.glob("*.md")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for match in NAMED_LOOP_TYPE.finditer(line):
                if match[1] in earlier and not AS_EARLIER.search(line):
                    wrong.append(f"{path.name}:{number}: {match[0]}")
    assert wrong == []


def test_the_protections_table_gives_the_cap_its_loop_type() -> None:
    text = (DOCS / "session.md").read_text(encoding="utf-8")
    [row] = [line for line in text.splitlines() if line.startswith("| 4 | per-prompt tool-call")]
    loop_type = row.split("|")[4].strip()
    assert loop_type.startswith(f"`{LOOP_TOOL_CALL_CAP}`")
    assert "`tool_call_cap`" not in loop_type or AS_EARLIER.search(loop_type)
