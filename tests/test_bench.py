"""The benchmark's yardstick is a correct reducer: it decides what the guard decides.

Only behaviour is asserted here; the timings are printed by ``make bench``.
"""

from __future__ import annotations

import logging

import pytest

from benches.corpus import build_corpus
from benches.logging_cost import guard_records_held
from benches.yardstick import YardstickReducer, yardstick_agrees
from tool_failure_guard.guard import (
    BatchReceipt,
    Decision,
    DecisionKind,
    GuardMode,
    InputBoundary,
    RepeatedToolFailureGuard,
)
from tool_failure_guard.integrations._api import LOGGER_NAME, ActionLog

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


def test_the_bench_holds_the_guards_log_records_and_puts_the_logger_back(
    capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger=LOGGER_NAME)
    logger = logging.getLogger(LOGGER_NAME)
    before = (list(logger.handlers), list(logger.filters), logger.propagate, logger.level)
    with guard_records_held():
        ActionLog("langchain").decided(DecisionKind.STOP, GuardMode.ENFORCE, batch=3, loop_type="x")
    assert capsys.readouterr().err == "" and caplog.records == []
    assert (list(logger.handlers), list(logger.filters), logger.propagate, logger.level) == before
    # outside the bench, the library's record reaches the application as before
    ActionLog("langchain").decided(DecisionKind.STOP, GuardMode.ENFORCE, batch=3, loop_type="x")
    assert [r.getMessage() for r in caplog.records] == [
        "tool-failure-guard (enforce, langchain): stopped the run at batch 3 (x)"
    ]


def test_without_a_handler_the_guards_record_still_reaches_stderr_after_the_bench(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", [])  # an application that configured no logging
    monkeypatch.setattr(logging.getLogger(LOGGER_NAME), "level", logging.NOTSET)
    with guard_records_held():
        ActionLog("langchain").decided(DecisionKind.WARN, GuardMode.ENFORCE, batch=2, loop_type="x")
        assert capsys.readouterr().err == ""
        # an adapter's fail-open warning, on its child logger, is not held
        logging.getLogger(f"{LOGGER_NAME}.integrations.langchain").warning("observes nothing")
        assert capsys.readouterr().err == "observes nothing\n"
    ActionLog("langchain").decided(DecisionKind.WARN, GuardMode.ENFORCE, batch=2, loop_type="x")
    assert "injected the reminder at batch 2" in capsys.readouterr().err
