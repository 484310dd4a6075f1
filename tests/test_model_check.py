"""Model checking: hypothesis state machines and a bounded exhaustive exploration.

Both drive the derived runtime and check the invariants of
``model_invariants.py`` after every batch; the hypothesis machine also drives
the python-statemachine engine beside it and demands the same transition.
"""

from __future__ import annotations

import copy

import pytest
from conftest import batch, failure, failures, outcome, success
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule
from model_invariants import Ledger, Snapshot, check_step

from tool_failure_guard.guard import (
    BatchReceipt,
    GuardMode,
    InputBoundary,
    Observation,
    Phase,
    RepeatedToolFailureGuard,
)
from tool_failure_guard.guard.engine import EngineGuard

TOOLS = ("read_file", "run_shell_command", "edit")
ERROR_TYPES = ("file_not_found", "shell_execute_error")

eligible_failures = st.builds(
    failure,
    tool=st.sampled_from(TOOLS[:2]),
    error_type=st.sampled_from(ERROR_TYPES),
    tool_type=st.sampled_from(("native", "mcp")),
)
any_observation = st.builds(
    Observation,
    call_id=st.sampled_from(("c1", "c2", "c3")),
    terminal_status=st.sampled_from(("success", "error", "cancelled")),
    execution_status=st.sampled_from(
        (None, "success", "error", "cancelled", "not_started", "unknown", "paused")
    ),
    execution_error_type=st.sampled_from((None, "", "unknown", *ERROR_TYPES)),
    policy_tool_name=st.sampled_from((None, "", *TOOLS)),
    tool_type=st.sampled_from((None, "native", "mcp")),
    provider_duplicate=st.booleans(),
)
observations = st.one_of(
    eligible_failures,
    eligible_failures,
    st.builds(success, tool=st.sampled_from(TOOLS)),
    any_observation,
)
receipts = st.builds(
    BatchReceipt,
    st.lists(observations, max_size=6),
    complete=st.sampled_from((True,) * 19 + (False,)),
)
loop_receipts = st.builds(
    lambda n, tool, error_type, extra: batch(*failures(n, tool, error_type).observations, *extra),
    st.integers(1, 6),
    st.sampled_from(TOOLS[:2]),
    st.sampled_from(ERROR_TYPES),
    st.lists(st.builds(success, tool=st.sampled_from(TOOLS)), max_size=2),
)
boundaries = st.one_of(
    st.just(InputBoundary()),
    st.just(InputBoundary()),
    st.just(InputBoundary()),
    st.builds(
        InputBoundary,
        has_external_input=st.booleans(),
        has_queued_prompt=st.booleans(),
        reliable=st.booleans(),
    ),
)
quiet_mostly = st.sampled_from((None,) * 9 + (InputBoundary(has_external_input=True),))


class PromptMachine(RuleBasedStateMachine):
    """Prompts of a session: settled batches, boundaries and modes."""

    @initialize(mode=st.sampled_from(GuardMode))
    def new_prompt(self, mode: GuardMode) -> None:
        self.guard = RepeatedToolFailureGuard(mode)
        self.engine = EngineGuard(mode)
        self.ledger = Ledger(mode=mode)

    @rule(mode=st.sampled_from(GuardMode))
    def next_prompt(self, mode: GuardMode) -> None:
        self.new_prompt(mode)

    def _observe(self, receipt: BatchReceipt, boundary: InputBoundary | None) -> None:
        before = Snapshot.of(self.guard)
        decision = self.guard.observe(receipt, boundary)
        engine_decision = self.engine.observe(receipt, boundary)
        # the engine, driven by the same classifier, takes the same transition
        assert engine_decision == decision
        assert Snapshot.of(self.engine) == Snapshot.of(self.guard)
        assert self.engine.engine_phase is self.guard.phase
        self.ledger = check_step(
            self.ledger, before, decision, self.guard, receipt, boundary or InputBoundary()
        )

    @rule(receipt=receipts, boundary=boundaries)
    def settle_any_batch(self, receipt: BatchReceipt, boundary: InputBoundary) -> None:
        self._observe(receipt, boundary)

    @rule(receipt=loop_receipts, boundary=quiet_mostly)
    def settle_a_failing_loop_batch(
        self, receipt: BatchReceipt, boundary: InputBoundary | None
    ) -> None:
        self._observe(receipt, boundary)

    @rule(n=st.integers(1, 5), boundary=quiet_mostly)
    def settle_the_tracked_candidate_again(self, n: int, boundary: InputBoundary | None) -> None:
        key = self.guard.key
        if key is None:
            receipt = failures(n)
        else:
            receipt = failures(n, key.policy_tool_name, key.execution_error_type)
        self._observe(receipt, boundary)

    @invariant()
    def phase_and_counts_agree(self) -> None:
        guard = self.guard
        if guard.phase is Phase.IDLE:
            assert (guard.key, guard.failure_count, guard.batch_count) == (None, 0, 0)
            assert guard.candidate_ordinal == 0
        else:
            assert guard.key is not None and guard.batch_count >= 1
            assert guard.candidate_ordinal == guard.last_candidate_ordinal >= 1
        if guard.phase in (Phase.WARNED, Phase.LATCHED):
            assert guard.failure_count >= 8 and guard.batch_count >= 2


PromptMachine.TestCase.settings = settings(
    max_examples=150,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestPromptMachine = PromptMachine.TestCase


# -- bounded exhaustive exploration -----------------------------------------

ALPHABET: dict[str, tuple[BatchReceipt, InputBoundary | None]] = {
    "fail_a_x4": (failures(4, "a", "x"), None),
    "fail_a_x1": (failures(1, "a", "x"), None),
    "fail_a_x8": (failures(8, "a", "x"), None),
    "fail_a_y4": (failures(4, "a", "y"), None),
    "fail_b_x4": (failures(4, "b", "x"), None),
    "fail_a_x2_success_c": (batch(failure("a", "x"), failure("a", "x"), success("c")), None),
    "success_a": (batch(success("a")), None),
    "success_c": (batch(success("c")), None),
    "fail_a_success_a": (batch(failure("a", "x"), success("a")), None),
    "cancelled": (batch(failure("a", "x"), outcome("cancelled", "error", tool="a")), None),
    "not_started": (batch(outcome("error", "not_started", tool="a")), None),
    "unknown": (batch(outcome("error", None, tool="a")), None),
    "unclassified": (batch(outcome("error", "error", tool="a", error_type="unknown")), None),
    "post_execution": (batch(outcome("error", "success", tool="a")), None),
    "contract_violation": (batch(outcome("success", "error", tool="a")), None),
    "mixed": (batch(failure("a", "x"), failure("b", "x")), None),
    "incomplete": (batch(failure("a", "x"), complete=False), None),
    "external_input": (failures(4, "a", "x"), InputBoundary(has_external_input=True)),
    "queued_prompt": (failures(4, "a", "x"), InputBoundary(has_queued_prompt=True)),
    "unreliable": (failures(4, "a", "x"), InputBoundary(reliable=False)),
    "duplicates_only": (batch(failure("a", "x", duplicate=True)), None),
    "empty": (batch(), None),
}
DEPTH = 4


def explore(mode: GuardMode, depth: int) -> tuple[int, set[Snapshot], set[str]]:
    """Every sequence of ``depth`` abstract batches; returns (sequences, states, decisions)."""
    states: set[Snapshot] = set()
    decisions: set[str] = set()
    sequences = 0
    letters = list(ALPHABET.values())

    def walk(guard: RepeatedToolFailureGuard, ledger: Ledger, remaining: int) -> None:
        nonlocal sequences
        states.add(Snapshot.of(guard))
        if remaining == 0:
            sequences += 1
            return
        for receipt, boundary in letters:
            child = copy.copy(guard)
            before = Snapshot.of(child)
            decision = child.observe(receipt, boundary)
            decisions.add(decision.kind.value)
            child_ledger = check_step(
                ledger, before, decision, child, receipt, boundary or InputBoundary()
            )
            walk(child, child_ledger, remaining - 1)

    walk(RepeatedToolFailureGuard(mode), Ledger(mode=mode), depth)
    return sequences, states, decisions


@pytest.mark.parametrize("mode", list(GuardMode))
def test_bounded_exhaustive_exploration(mode: GuardMode) -> None:
    sequences, states, decisions = explore(mode, DEPTH)
    assert sequences == len(ALPHABET) ** DEPTH
    phases = {state.phase for state in states}
    print(
        f"\n{mode.value}: {sequences} sequences of depth {DEPTH} over {len(ALPHABET)} batch "
        f"classes, {len(states)} distinct guard states, decisions {sorted(decisions)}"
    )
    if mode is GuardMode.OFF:
        assert phases == {Phase.IDLE} and decisions == {"none"}
        return
    assert phases == set(Phase)
    expected = {"none", "reset", "tracked", "would_stop"}
    expected |= {"would_warn"} if mode is GuardMode.SHADOW else {"warn"}
    if mode is GuardMode.ENFORCE:
        expected |= {"stop"}
    assert decisions == expected
