"""pydantic-ai and LangChain record a provider replay as what happened (issue 41.3).

Both let a replayed call (an answered id sent again with the same name and arguments)
run in ``off``/``shadow``, as the framework would without the guard; their per-call
records said ``provider_duplicate`` for it all the same, so ``rollout check`` counted
every such shadow prompt under ``protections_changed`` (an executed provider duplicate).
The replay that ran is now an executed call; in ``enforce`` it is answered unrun and
keeps the flag.  Real runs over the real wire, the ``file:`` exporter ``rollout check``
reads.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.tools import StructuredTool
from langchain_harness import guarded_run as langchain_run
from pydantic_ai_harness import guarded_run as pydantic_ai_run
from telemetry_harness import Harness
from test_adapter_limits import _replaying_answers

from tool_failure_guard.commands.cli import main
from tool_failure_guard.integrations.langchain import RepeatedToolFailureMiddleware
from tool_failure_guard.telemetry.build import build_telemetry
from tool_failure_guard.telemetry.sink import TOOL_CALL_EVENT, OpenTelemetrySink

#: (batch, provider_duplicate, execution status) of the two calls, by mode
EXPECTED = {
    "off": [(1, False, "success"), (2, False, "success")],
    "shadow": [(1, False, "success"), (2, False, "success")],
    "enforce": [(1, False, "success"), (2, True, "not_started")],
}


def note(text: str) -> str:
    """Write a note."""
    return "noted"


def _run(framework: str, mode: str, sink: Any) -> None:
    if framework == "pydantic-ai":
        pydantic_ai_run(_replaying_answers(), [note], mode=mode, telemetry=sink)
    else:
        guard = RepeatedToolFailureMiddleware(mode=mode, on_stop="end", telemetry=sink)  # type: ignore[arg-type]
        langchain_run(_replaying_answers(), [StructuredTool.from_function(note)], guard=guard)


@pytest.mark.parametrize("framework", ["pydantic-ai", "langchain"])
@pytest.mark.parametrize("mode", ["off", "shadow", "enforce"])
def test_a_replay_that_ran_is_recorded_as_an_executed_call(framework: str, mode: str) -> None:
    harness = Harness()
    _run(framework, mode, harness.sink)
    records = [
        (r["batch_ordinal"], r["provider_duplicate"], r["execution_status"])
        for r in harness.logs(TOOL_CALL_EVENT)
    ]
    assert records == EXPECTED[mode]


@pytest.mark.parametrize("framework", ["pydantic-ai", "langchain"])
def test_rollout_check_counts_no_shadow_replay_as_a_changed_protection(
    framework: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv(
        "OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=staging,enduser.pseudo.id=owner-7"
    )
    path = tmp_path / "fleet.jsonl"
    sink = build_telemetry(f"file:{path}")
    for mode in ("shadow", "enforce"):
        _run(framework, mode, sink)
    assert isinstance(sink, OpenTelemetrySink) and sink.force_flush()
    assert main(["rollout", "check", str(path), "--json"]) == 1  # one day: may not advance yet
    staging = json.loads(capsys.readouterr().out)["environments"]["staging"]
    assert staging["invariants"]["protections_changed"]["violations"] == 0
