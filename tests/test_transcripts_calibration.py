"""Calibrated false stops per stop rule (issue 39 item 4): the exact bound, and the report."""

from __future__ import annotations

import json
from fractions import Fraction
from math import comb
from pathlib import Path

import pytest
from transcript_files import FIXTURES

from tool_failure_guard.commands.cli import main
from tool_failure_guard.guard import ExecutionStatus, TerminalStatus
from tool_failure_guard.transcripts.calibration import (
    UPPER_FIELD,
    binomial_cdf,
    calibrate,
    upper_bound,
)
from tool_failure_guard.transcripts.model import ImportedCall, Run, Turn
from tool_failure_guard.transcripts.replay import replay_run

#: (stopped, runs) -> the exact one-sided 95 % Clopper-Pearson upper bound, to 10 digits
#: (0 of n: 1 - 0.05 ** (1 / n); 5 of 10: the textbook 0.7776; the others bracketed
#: below in exact rational arithmetic)
TEXTBOOK = {
    (0, 371): 0.0080422368,
    (3, 371): 0.0207657894,
    (17, 371): 0.0679413933,
    (5, 10): 0.7775588990,
    (0, 1): 0.95,
    (10, 10): 1.0,
}


def _exact_cdf(k: int, n: int, p: Fraction) -> Fraction:
    return sum((comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k + 1)), Fraction(0))


@pytest.mark.parametrize(("k", "n"), sorted(TEXTBOOK))
def test_the_bound_matches_the_textbook(k: int, n: int) -> None:
    bound = upper_bound(k, n)
    assert bound is not None and abs(bound - TEXTBOOK[(k, n)]) < 1e-9
    if k < n:  # the table's value is the root: the exact CDF crosses 0.05 there
        low, high = (
            Fraction(TEXTBOOK[(k, n)]) - Fraction(1, 10**9),
            Fraction(TEXTBOOK[(k, n)]) + Fraction(1, 10**9),
        )
        assert _exact_cdf(k, n, low) > Fraction(1, 20) > _exact_cdf(k, n, high)


def test_no_runs_give_no_bound_and_bad_counts_are_refused() -> None:
    assert upper_bound(0, 0) is None
    assert abs(upper_bound(0, 371) - (1 - 0.05 ** (1 / 371))) < 1e-12  # type: ignore[operator]
    with pytest.raises(ValueError, match=r"0\.\.n"):
        upper_bound(4, 3)
    assert binomial_cdf(3, 3, 0.5) == 1.0 and binomial_cdf(0, 2, 0.5) == 0.25


def _call(n: int, ok: bool) -> ImportedCall:
    return ImportedCall(
        call_id=f"c{n}",
        tool="bash",
        arguments_fingerprint=f"sha256:{n}",
        status=TerminalStatus.SUCCESS if ok else TerminalStatus.ERROR,
        execution_status=ExecutionStatus.SUCCESS if ok else ExecutionStatus.ERROR,
        error_type=None if ok else "shell_execute_error",
        error_text=None if ok else "boom",
    )


def _run(name: str, failures: int, after: int, succeeded: bool | None) -> Run:
    """``failures`` different failing commands, then ``after`` successful ones."""
    turns = [Turn(line=n, calls=(_call(n, False),), input_tokens=10) for n in range(failures)]
    turns += [
        Turn(line=100 + n, calls=(_call(100 + n, True),), input_tokens=10) for n in range(after)
    ]
    return Run(
        agent="mini-swe-agent", source=name, run_id=name, turns=tuple(turns), succeeded=succeeded
    )


def test_calibration_counts_false_stops_and_what_stopping_failed_runs_saves() -> None:
    results = [
        replay_run(_run("ok-looping", 12, 3, True)),  # a false stop for the guard in enforce
        replay_run(_run("ok-clean", 0, 5, True)),
        replay_run(_run("failed-looping", 10, 2, False)),
        replay_run(_run("unknown-looping", 10, 0, None)),  # no known outcome: left out
    ]
    guard = calibrate(results, "guard_enforce")
    assert (guard.succeeded_stopped, guard.succeeded_runs) == (1, 2)
    assert guard.upper == upper_bound(1, 2)
    assert (guard.failed_stopped, guard.failed_runs) == (1, 1)
    # stopped after the 9th failure: the 10th failing turn and the 2 successful ones
    assert (guard.saved_turns, guard.saved_calls, guard.saved_input_tokens) == (3, 3, 30)
    shadow = calibrate(results, "guard_shadow")  # shadow only counts: no stop, no false stop
    assert shadow.succeeded_stopped == shadow.failed_stopped == 0
    goose = calibrate(results, "goose")  # same tool, same error text: the 3rd failure
    assert (goose.succeeded_stopped, goose.failed_stopped) == (1, 1)
    assert goose.saved_calls == 12 - 3


def test_the_report_carries_the_bound(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = FIXTURES / "mini-swe-agent"
    assert main(["transcripts", "--json", str(folder)]) == 0
    document = json.loads(capsys.readouterr().out)
    rows = document["fleet"]["calibration"]
    assert set(rows) == set(document["stop_rules"])
    enforce = rows["guard_enforce"]
    # 2 successful and 2 failed runs; the guard stops the two failing loops at the 9th call
    assert enforce["succeeded_runs"] == 2 and enforce["succeeded_stopped"] == 0
    assert enforce[UPPER_FIELD] == upper_bound(0, 2)
    assert enforce["failed_stopped"] == 2 and enforce["saved_on_failed"]["calls"] == 10
    assert main(["transcripts", str(folder)]) == 0
    text = capsys.readouterr().out
    assert "false stops (runs with a known outcome; bound: exact 95% upper" in text
    line = next(x for x in text.splitlines() if x.startswith("shipped guard, enforce"))
    assert "0/2" in line and f"{100 * upper_bound(0, 2):.1f}%" in line and "2/2" in line
