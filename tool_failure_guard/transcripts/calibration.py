"""Calibrated false stops: how often a rule would stop a run that succeeded, with its bound.

Of the runs whose outcome is known, a stop rule (the shipped guard in each mode, each peer)
stops ``k`` of the ``n`` that succeeded: a false stop, the cost an operator weighs before
enforce.  ``k / n`` alone says nothing when ``k`` is 0, so each row carries the exact
(Clopper-Pearson) one-sided upper confidence bound of the false-stop rate: the largest rate
``p`` at which seeing ``k`` or fewer stops in ``n`` runs still has probability at least
``1 - confidence`` (0 of 371 at 95 %: 0.8 %).  No runs, no bound (None).  Beside it: the
failed runs it stops and what stopping them saves (the turns after the stop, their calls and
tokens), the benefit.

Exact and stdlib only: the bound is the Beta(k + 1, n - k) quantile, found by bisection on
the binomial distribution function (log-space terms), to 1e-12 in ``p``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Final

import attrs

from tool_failure_guard.transcripts.replay import RunResult

CONFIDENCE: Final = 0.95
#: The ``--json`` field of the bound: its name says it is the 95 % upper bound.
UPPER_FIELD: Final = "false_stop_rate_upper_95"
_TOLERANCE: Final = 1e-12


def binomial_cdf(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p), summed from log-space terms."""
    if p <= 0.0:
        return 1.0
    if p >= 1.0:
        return 1.0 if k >= n else 0.0
    log_p, log_q = math.log(p), math.log1p(-p)
    base = math.lgamma(n + 1)
    terms = [
        base - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * log_p + (n - i) * log_q
        for i in range(min(k, n) + 1)
    ]
    top = max(terms)
    return min(1.0, math.exp(top) * math.fsum(math.exp(t - top) for t in terms))


def upper_bound(k: int, n: int, confidence: float = CONFIDENCE) -> float | None:
    """The exact one-sided upper confidence bound of a rate seen ``k`` times in ``n``."""
    if n == 0:
        return None
    if not 0 <= k <= n:
        raise ValueError(f"{k} stops of {n} runs: a count must lie in 0..n")
    if k == n:
        return 1.0
    alpha = 1.0 - confidence
    low, high = k / n, 1.0  # the CDF falls as p grows: above alpha at k/n, 0 at 1
    while high - low > _TOLERANCE:
        middle = (low + high) / 2
        if binomial_cdf(k, n, middle) > alpha:
            low = middle
        else:
            high = middle
    return high


@attrs.frozen(kw_only=True)
class Calibration:
    """One stop rule on the runs with a known outcome."""

    succeeded_runs: int
    succeeded_stopped: int
    upper: float | None  #: the 95 % upper bound of the false-stop rate (None: no runs)
    failed_runs: int
    failed_stopped: int
    #: what stopping the failed runs saves: the turns after each stop, their calls, tokens
    saved_turns: int
    saved_calls: int
    saved_input_tokens: int | None
    saved_output_tokens: int | None

    def document(self) -> dict[str, Any]:
        return {
            "succeeded_runs": self.succeeded_runs,
            "succeeded_stopped": self.succeeded_stopped,
            UPPER_FIELD: self.upper,
            "failed_runs": self.failed_runs,
            "failed_stopped": self.failed_stopped,
            "saved_on_failed": {
                "turns": self.saved_turns,
                "calls": self.saved_calls,
                "input_tokens": self.saved_input_tokens,
                "output_tokens": self.saved_output_tokens,
            },
        }


def _sum(values: Sequence[int | None]) -> int | None:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def calibrate(results: Sequence[RunResult], rule: str) -> Calibration:
    """``rule`` (a key of :attr:`RunResult.stops`) on ``results``' runs of known outcome."""
    succeeded = [r for r in results if r.succeeded is True]
    failed = [r for r in results if r.succeeded is False]
    false_stops = sum(1 for r in succeeded if rule in r.stops)
    saved = [r.stops[rule] for r in failed if rule in r.stops]
    return Calibration(
        succeeded_runs=len(succeeded),
        succeeded_stopped=false_stops,
        upper=upper_bound(false_stops, len(succeeded)),
        failed_runs=len(failed),
        failed_stopped=len(saved),
        saved_turns=sum(s.turns for s in saved),
        saved_calls=sum(s.calls for s in saved),
        saved_input_tokens=_sum([s.input_tokens for s in saved]),
        saved_output_tokens=_sum([s.output_tokens for s in saved]),
    )
