"""Hostile MCP schemas (issue 33 §1, §2): every check ends within its budget, no session
starves another, and compiling a schema's patterns is bounded before it starts.

* ``uniqueItems`` over thousands of objects: jsonschema compares them pairwise and
  never looks at the deadline; the bounded keyword keys each item once and looks
  at the deadline while it does (a clock that advances on every look shows it).
* One session's checks hold at most ``CHECKS_PER_SESSION`` argument-check
  threads: a session whose four checks block does not keep another's from
  settling.
* ``(?:(?:(?:a{1000}){1000}){1000})`` is measured from its text and never
  compiled; compiled, it exhausts memory (the child process that registers it
  runs under a 2 GiB address-space cap, so a regression fails there, not here).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import attrs
import pytest
from e2e_helpers import run

from tool_failure_guard.session.tools import schema_patterns
from tool_failure_guard.session.tools.builtin import Tool, ToolContext, ToolKind
from tool_failure_guard.session.tools.executor import (
    Executor,
    FunctionCall,
    PermissionAnswer,
)
from tool_failure_guard.session.tools.pattern_size import MAX_PATTERN_SIZE, compiled_size
from tool_failure_guard.session.tools.schema_check import (
    InvalidToolParams,
    check_arguments,
    schema_problem,
    schema_validator,
)

NESTED = "(?:(?:(?:a{1000}){1000}){1000})"


def _plain_verdict(schema: Mapping[str, Any], instance: Any) -> bool:
    from jsonschema import Draft202012Validator

    return Draft202012Validator(schema).is_valid(instance)


@pytest.mark.parametrize(
    "items",
    [
        [1, True],
        [1, 1.0],
        [0, False],
        [None, 0],
        [{"a": 1, "b": [1, 2]}, {"b": [1, 2], "a": 1}],
        [{"a": 1}, {"a": True}],
        [[1, 2], [2, 1]],
        [[1, [2]], [1, [2.0]]],
        ["a", "b", "a"],
        [],
    ],
)
def test_unique_items_gives_jsonschemas_verdict(items: list[Any]) -> None:
    schema = {"properties": {"xs": {"type": "array", "uniqueItems": True}}}
    validator = schema_validator(schema)
    try:
        check_arguments(validator, {"xs": items})
        fits = True
    except InvalidToolParams:
        fits = False
    assert fits == _plain_verdict(schema, {"xs": items})


def test_unique_items_over_thousands_of_objects_looks_at_the_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The deadline passes inside the one keyword: the check ends there, a verdict."""
    ticks = iter(range(1_000_000))

    class Clock:
        @staticmethod
        def monotonic() -> float:
            return next(ticks) * 0.3  # every look at the clock takes 0.3 "seconds"

    monkeypatch.setattr(schema_patterns, "time", Clock)
    validator = schema_validator({"properties": {"xs": {"uniqueItems": True}}})
    objects = [{"n": n, "tag": "x"} for n in range(2_500)]
    with pytest.raises(InvalidToolParams, match="took longer than"):
        check_arguments(validator, {"xs": objects})


def test_unique_items_over_thousands_of_objects_is_a_verdict() -> None:
    validator = schema_validator({"properties": {"xs": {"uniqueItems": True}}})
    objects = [{"n": n, "tag": "x"} for n in range(2_500)]
    assert check_arguments(validator, {"xs": objects}) == {"xs": objects}
    with pytest.raises(InvalidToolParams, match="uniqueItems"):
        check_arguments(validator, {"xs": [*objects, {"tag": "x", "n": 7}]})


@attrs.frozen(eq=False)
class _BlockingTool:
    """A native tool whose argument check waits for ``release`` (a slow schema's stand-in)."""

    release: threading.Event
    started: threading.Semaphore
    name: str = "slow"
    kind: ToolKind = "other"
    tool_type: Literal["native", "mcp"] = "native"
    needs_permission: bool = False
    description: str = "slow"
    parameters_schema: Mapping[str, Any] = attrs.field(factory=lambda: {"type": "object"})

    def validate(self, args: Mapping[str, Any]) -> Mapping[str, Any]:
        if args.get("block"):
            self.started.release()
            self.release.wait(60)
        return args

    def title(self, args: Mapping[str, Any]) -> str:
        return "slow"

    async def run(self, args: Mapping[str, Any], context: ToolContext) -> bytes:
        return b"ran"


async def _allow(call: FunctionCall, tool: Tool, args: Any) -> PermissionAnswer:
    return PermissionAnswer.ALLOWED


def test_one_sessions_checks_do_not_starve_anothers(tmp_path: Path) -> None:
    release, started = threading.Event(), threading.Semaphore(0)
    tool = _BlockingTool(release, started)
    hog = Executor({"slow": tool}, ToolContext(cwd=tmp_path), _allow)
    other = Executor({"slow": tool}, ToolContext(cwd=tmp_path), _allow)

    async def go() -> tuple[str, int]:
        calls = [
            asyncio.ensure_future(
                hog.execute(
                    FunctionCall(call_id=f"h{n}", name="slow", args={"block": True}),
                    asyncio.Event(),
                )
            )
            for n in range(4)
        ]
        try:
            await asyncio.to_thread(started.acquire, True, 30)
            # The hog's first check holds its thread; the other session is served meanwhile.
            served = await asyncio.wait_for(
                other.execute(FunctionCall(call_id="o", name="slow", args={}), asyncio.Event()), 30
            )
            waiting = sum(not call.done() for call in calls)
        finally:
            release.set()
        settled = await asyncio.wait_for(asyncio.gather(*calls), 30)
        assert [o.execution_status for o in settled] == ["success"] * 4
        return served.execution_status, waiting

    assert run(go(), timeout=120) == ("success", 4)


def test_nested_counted_repeats_are_measured_not_compiled() -> None:
    assert compiled_size(NESTED) > MAX_PATTERN_SIZE
    assert compiled_size("(?:a{1000}){1000}") > MAX_PATTERN_SIZE
    assert compiled_size(r"^\d{3}-\d{4}$") <= 12
    assert compiled_size("^[a-z]{0,65535}$") < 10  # a range is not copied
    assert compiled_size("[{1000}]") == 1  # a brace inside a set is a member
    assert compiled_size("a{" + "9" * 5_000 + "}") > MAX_PATTERN_SIZE
    problem = schema_problem({"properties": {"s": {"type": "string", "pattern": NESTED}}})
    assert problem is not None and f"{MAX_PATTERN_SIZE:,} items" in problem
    # The schema's patterns count together: many large ones are refused as well.
    many = {"properties": {f"s{n}": {"pattern": "a{8000}"} for n in range(4)}}
    assert schema_problem(many) is not None
    assert schema_problem({"properties": {"s": {"pattern": "a{8000}"}}}) is None


_REGISTER = """
import json, logging, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
import mcp_types as types
from tool_failure_guard.session.tools.mcp_tools import _checked_schema
schema = {"type": "object", "properties": {"s": {"type": "string", "pattern": sys.argv[1]}}}
print(json.dumps(_checked_schema("hostile", types.Tool(name="repeats", input_schema=schema))))
"""


def test_a_pattern_too_large_to_compile_is_checked_as_an_object() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _REGISTER, NESTED],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout) == {"type": "object"}
    assert "'repeats': unusable inputSchema" in done.stderr
    assert f"more than {MAX_PATTERN_SIZE:,} items" in done.stderr
