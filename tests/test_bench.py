"""The benchmark's yardstick is a correct reducer: it decides what the guard decides.

Only behaviour is asserted here; the timings are printed by ``make bench``.
"""

from __future__ import annotations

from tool_failure_guard.commands.bench_corpus import build_corpus
from tool_failure_guard.commands.bench_yardstick import YardstickReducer, yardstick_agrees
from tool_failure_guard.guard import (
    BatchReceipt,
    Decision,
    DecisionKind,
    InputBoundary,
    RepeatedToolFailureGuard,
)

CORPUS = build_corpus(2_000, seed=7)


def test_the_yardstick_reaches_the_guards_decisions_and_state_on_a_corpus() -> None:
    assert yardstick_agrees(CORPUS)
    kinds = set()
    for mode, batches in CORPUS:
        guard = RepeatedToolFailureGuard(mode)
        kinds |= {guard.observe(receipt, boundary).kind for receipt, boundary in batches}
    # the corpus reaches every decision kind, so the agreement means something
    assert kinds == set(DecisionKind)


class ForgetsDowngrades(YardstickReducer):
    __slots__ = ()

    def observe(self, receipt: BatchReceipt, boundary: InputBoundary | None = None) -> Decision:
        decision = super().observe(receipt, boundary)
        self.disabled = False
        return decision


def test_the_agreement_check_notices_a_reducer_that_decides_differently() -> None:
    assert not yardstick_agrees(CORPUS, ForgetsDowngrades)
