"""The run's report in the agent state, and ``stop_of`` / ``report_of`` reading it back.

``after_agent`` writes the run's :class:`~tool_failure_guard.integrations._api.RunReport`
into the state key :data:`REPORT_KEY` as plain JSON-able values (a
checkpointer may serialise the state); :func:`report_of` and :func:`stop_of`
turn the final state (``invoke``'s result, the last ``stream`` "values" state)
back into the shared values.  A stop the run raised
(:class:`~._stop.ProtectionStopped`, ``on_stop="error"``) carries the same
values, and both functions accept it too.
"""

from __future__ import annotations

from typing import Any

from tool_failure_guard.guard import FailureKey, GuardMode
from tool_failure_guard.integrations._api import GuardStop, ProtectionStopped, RunReport

#: The state key of the run's report (public: :func:`stop_of`, :func:`report_of` read it).
REPORT_KEY = "tool_failure_guard"


def stop_to_state(stop: GuardStop) -> dict[str, Any]:
    key = stop.key
    return {
        "loop_type": stop.loop_type,
        "notice": stop.notice,
        "mode": stop.mode.value,
        "key": None if key is None else [key.policy_tool_name, key.execution_error_type],
    }


def stop_from_state(value: Any) -> GuardStop | None:
    if not isinstance(value, dict):
        return None
    key = value.get("key")
    return GuardStop(
        loop_type=str(value["loop_type"]),
        notice=str(value["notice"]),
        mode=GuardMode(value["mode"]),
        key=FailureKey(str(key[0]), str(key[1])) if isinstance(key, list | tuple) else None,
    )


def report_to_state(report: RunReport) -> dict[str, Any]:
    return {
        "mode": report.mode.value,
        "decisions": list(report.decisions),
        "batches": report.batches,
        "tool_calls": report.tool_calls,
        "observed": report.observed,
        "stop": stop_to_state(report.stop) if report.stop is not None else None,
        "would_stop_loop_type": report.would_stop_loop_type,
    }


def report_of(result: Any) -> RunReport | None:
    """What the guard did in the run that ended with ``result``; None: not a guarded run.

    ``result`` is the run's final state (``invoke``'s result, the last
    ``stream`` "values" state) or the :class:`ProtectionStopped` it raised.
    """
    if isinstance(result, ProtectionStopped):
        return result.report
    value = result.get(REPORT_KEY) if isinstance(result, dict) else None
    if not isinstance(value, dict):
        return None
    return RunReport(
        mode=GuardMode(value["mode"]),
        decisions=tuple(value["decisions"]),
        batches=int(value["batches"]),
        tool_calls=int(value["tool_calls"]),
        observed=int(value["observed"]),
        stop=stop_from_state(value.get("stop")),
        would_stop_loop_type=_optional_str(value.get("would_stop_loop_type")),
    )


def _optional_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def stop_of(result: Any) -> GuardStop | None:
    """The typed stop of the run that ended with ``result``: None unless a protection stopped it."""
    report = report_of(result)
    return report.stop if report is not None else None
