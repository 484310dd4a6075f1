"""Owner-level statistics: delta-method ratio intervals, Poisson bootstrap, gate verdicts.

The owner is the randomisation unit, so every metric is a ratio of per-owner
sums and its variance comes from the spread *across owners* (Deng, Knoblich &
Lu, "Applying the Delta Method in Metric Analytics", KDD 2018).  With
per-owner sums X_i (numerator) and Y_i (denominator) over n owners and
M = mean(X) / mean(Y)::

    Var(M) ≈ (1/n) · [ s²_X/Ȳ² − 2·X̄·s_XY/Ȳ³ + X̄²·s²_Y/Ȳ⁴ ]

Arms are independent, so Var(M_T − M_C) = Var(M_T) + Var(M_C); a ratio of
arms uses logs, Var(log M) ≈ Var(M)/M².  Quantiles have no simple delta
form under clustering: :func:`poisson_bootstrap_quantile_ratio` resamples
owners (each owner's prompts share one Poisson(1) weight per replicate).

:func:`naive_ratio_variance` is the prompt-level variance that ignores the
owners; it exists to show (``docs/rollout.md``) that it under-covers.
"""

from __future__ import annotations

import enum
import math

import attrs
import numpy as np
import numpy.typing as npt

Array = npt.NDArray[np.float64]
#: Two-sided 95 % normal quantile.
Z95 = 1.959963984540054


class Verdict(enum.StrEnum):
    PASS = "pass"
    FAIL = "fail"
    INCONCLUSIVE = "inconclusive"


@attrs.frozen(kw_only=True)
class Interval:
    estimate: float
    low: float
    high: float

    @property
    def finite(self) -> bool:
        return all(math.isfinite(v) for v in (self.estimate, self.low, self.high))


def ratio_and_variance(x: Array, y: Array) -> tuple[float, float]:
    """M = ΣX/ΣY over owners and its delta-method variance (NaN when undefined)."""
    n = len(x)
    if n < 2 or float(np.sum(y)) <= 0:
        return math.nan, math.nan
    mx, my = float(np.mean(x)), float(np.mean(y))
    sxx = float(np.var(x, ddof=1))
    syy = float(np.var(y, ddof=1))
    sxy = float(np.cov(x, y, ddof=1)[0, 1])
    m = mx / my
    var = (sxx / my**2 - 2 * mx * sxy / my**3 + mx**2 * syy / my**4) / n
    return m, max(var, 0.0)


def naive_ratio_variance(x: Array, y: Array) -> tuple[float, float]:
    """The same ratio with prompts as independent units (Bernoulli/mean variance per prompt).

    For a 0/1 outcome summed per owner (x successes of y trials) this is
    p(1−p)/Σy: what an analysis that ignores owners would report.
    """
    total = float(np.sum(y))
    if total <= 0:
        return math.nan, math.nan
    p = float(np.sum(x)) / total
    return p, p * (1 - p) / total


def difference_interval(
    treatment: tuple[Array, Array], control: tuple[Array, Array], z: float = Z95
) -> Interval:
    """M_T − M_C with a delta-method interval."""
    mt, vt = ratio_and_variance(*treatment)
    mc, vc = ratio_and_variance(*control)
    d = mt - mc
    half = z * math.sqrt(vt + vc) if math.isfinite(vt + vc) else math.nan
    return Interval(estimate=d, low=d - half, high=d + half)


def ratio_interval(
    treatment: tuple[Array, Array], control: tuple[Array, Array], z: float = Z95
) -> Interval:
    """M_T / M_C with a delta-method interval on the log scale."""
    mt, vt = ratio_and_variance(*treatment)
    mc, vc = ratio_and_variance(*control)
    if not (mt > 0 and mc > 0):
        return Interval(estimate=math.nan, low=math.nan, high=math.nan)
    log_ratio = math.log(mt) - math.log(mc)
    half = z * math.sqrt(vt / mt**2 + vc / mc**2)
    return Interval(
        estimate=math.exp(log_ratio),
        low=math.exp(log_ratio - half),
        high=math.exp(log_ratio + half),
    )


def _weighted_quantile(sorted_values: Array, weights: Array, q: float) -> float:
    cumulative = np.cumsum(weights)
    total = cumulative[-1]
    if total <= 0:
        return math.nan
    index = int(np.searchsorted(cumulative, q * total, side="left"))
    return float(sorted_values[min(index, len(sorted_values) - 1)])


def poisson_bootstrap_quantile_ratio(
    treatment: tuple[Array, npt.NDArray[np.int64], Array],
    control: tuple[Array, npt.NDArray[np.int64], Array],
    *,
    q: float = 0.95,
    replicates: int = 200,
    seed: int = 0,
) -> Interval:
    """Quantile_T / Quantile_C with an owner-level Poisson bootstrap percentile interval.

    Each arm is (values, owner index per value, count per value): a value that
    occurs ``count`` times for its owner (the engine sends counts, not prompts).
    ``-inf``/``+inf`` values stand for counts below/above the band the engine
    sent in full: a quantile landing on one makes the interval undefined.
    Values are sorted once; a replicate draws one Poisson(1) weight per owner
    and takes the weighted quantile, O(rows) per replicate.
    """
    rng = np.random.default_rng(seed)
    prepared = []
    for values, owners, counts in (treatment, control):
        if len(values) == 0:
            return Interval(estimate=math.nan, low=math.nan, high=math.nan)
        order = np.argsort(values, kind="stable")
        prepared.append((values[order], owners[order], counts[order], int(owners.max()) + 1))
    point = [_weighted_quantile(v, c, q) for v, _, c, _ in prepared]
    if any(math.isinf(p) for p in point):
        return Interval(estimate=math.nan, low=math.nan, high=math.nan)
    estimate = point[0] / point[1] if point[1] > 0 else math.nan
    ratios = []
    for _ in range(replicates):
        qs = []
        for values, owners, counts, n_owners in prepared:
            weights = rng.poisson(1.0, n_owners).astype(np.float64)
            qs.append(_weighted_quantile(values, weights[owners] * counts, q))
        if any(math.isinf(v) for v in qs):
            # This replicate's quantile lies outside the band sent in full.
            return Interval(estimate=estimate, low=math.nan, high=math.nan)
        if qs[1] > 0 and math.isfinite(qs[0]) and math.isfinite(qs[1]):
            ratios.append(qs[0] / qs[1])
    if len(ratios) < replicates // 2:
        return Interval(estimate=estimate, low=math.nan, high=math.nan)
    low, high = np.percentile(ratios, [2.5, 97.5])
    return Interval(estimate=estimate, low=float(low), high=float(high))


def poisson_bootstrap_statistic(
    arms: tuple[Array, Array],
    statistic: object,
    *,
    replicates: int = 400,
    seed: int = 0,
) -> Array:
    """Replicates of ``statistic(T_sums, C_sums)`` where each arm is an owners × k sum matrix.

    Owner weights are Poisson(1) per replicate; weighted column sums are a
    matrix product, so this is cheap for any number of prompts.
    """
    rng = np.random.default_rng(seed)
    t, c = arms
    wt = rng.poisson(1.0, (replicates, t.shape[0])).astype(np.float64)
    wc = rng.poisson(1.0, (replicates, c.shape[0])).astype(np.float64)
    st, sc = wt @ t, wc @ c
    assert callable(statistic)
    return np.asarray([statistic(st[i], sc[i]) for i in range(replicates)], dtype=np.float64)


def upper_bound_verdict(interval: Interval, margin: float) -> Verdict:
    """Non-inferiority where larger is worse: pass iff the whole interval is below the margin."""
    if not interval.finite:
        return Verdict.INCONCLUSIVE
    if interval.high < margin:
        return Verdict.PASS
    if interval.low > margin:
        return Verdict.FAIL
    return Verdict.INCONCLUSIVE


def lower_bound_verdict(interval: Interval, margin: float) -> Verdict:
    """Non-inferiority where smaller is worse: pass iff the whole interval is above the margin."""
    if not interval.finite:
        return Verdict.INCONCLUSIVE
    if interval.low > margin:
        return Verdict.PASS
    if interval.high < margin:
        return Verdict.FAIL
    return Verdict.INCONCLUSIVE


def equivalence_verdict(interval: Interval, low: float, high: float) -> Verdict:
    """Consistency: pass iff the whole interval lies in [low, high]; fail iff wholly outside."""
    if not interval.finite:
        return Verdict.INCONCLUSIVE
    if low <= interval.low and interval.high <= high:
        return Verdict.PASS
    if interval.high < low or interval.low > high:
        return Verdict.FAIL
    return Verdict.INCONCLUSIVE
