"""Differential: our guard against the released original's reducer, decision by decision.

The original's ``reduceRepeatedToolFailureGuard`` and ``createRepeatedToolFailureGuardState``
(and what they need) are loaded at test time from the installed Qwen Code 0.24.4
(``tests/qwen_reducer.mjs``; one node process for the module).  Every batch of every
sequence must give the same decision kind and reset reason, the same phases before and
after, the same failure key, counts, candidate ordinals and enforcement flag
(``parity_mapping`` translates).  Sequences come from hypothesis (arbitrary entries on
both axes, unknown and empty error types, provider duplicates, incomplete batches,
unreliable, external and queued input, every mode), from the model check's alphabet
explored exhaustively to depth 3, and from the bench's seeded corpus.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from parity_mapping import decision_fields, original_fields, reducer_input
from qwen_original import require_qwen
from qwen_reducer import OriginalReducer
from test_model_check import ALPHABET

from benches.corpus import build_corpus
from tool_failure_guard.guard import (
    INELIGIBLE_RESET_REASON_PRECEDENCE,
    REPEATED_TOOL_FAILURE_BATCH_THRESHOLD,
    REPEATED_TOOL_FAILURE_REMINDER,
    REPEATED_TOOL_FAILURE_STOP_MESSAGE,
    REPEATED_TOOL_FAILURE_THRESHOLD,
    BatchReceipt,
    GuardMode,
    InputBoundary,
    Observation,
    RepeatedToolFailureGuard,
)

Step = tuple[BatchReceipt, InputBoundary | None]


@pytest.fixture(scope="module")
def original() -> Iterator[OriginalReducer]:
    require_qwen()
    reducer = OriginalReducer()
    print(f"\nqwen_reducer.mjs: node start-up and load {reducer.startup_s * 1000:.0f} ms")
    yield reducer
    reducer.close()


def ours(mode: GuardMode, steps: Sequence[Step]) -> list[dict[str, Any]]:
    guard = RepeatedToolFailureGuard(mode)
    out = []
    for receipt, boundary in steps:
        decision = guard.observe(receipt, boundary)
        fields = decision_fields(decision, guard)
        out.append({"phase_before": decision.phase_before.value, **fields})
    return out


def theirs(results: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    out, before = [], "idle"
    for result in results:
        fields = original_fields(result)
        out.append({"phase_before": before, **fields})
        before = fields["phase"]
    return out


def assert_same(
    mode: GuardMode, steps: Sequence[Step], results: Sequence[dict[str, Any]], label: str = ""
) -> None:
    mine, original = ours(mode, steps), theirs(results)
    for index, (a, b) in enumerate(zip(mine, original, strict=True)):
        assert a == b, (
            f"{label} mode={mode.value} batch {index}: ours {a} != original {b}\n"
            f"inputs: {[reducer_input(mode, r, bd) for r, bd in steps[: index + 1]]}"
        )


def test_the_loaded_module_is_the_guard_and_its_constants_are_ours(
    original: OriginalReducer,
) -> None:
    description = original.description
    assert description["chunk"].startswith("acpAgent-")
    assert {"reduceRepeatedToolFailureGuard", "createRepeatedToolFailureGuardState"} <= set(
        description["declarations"]
    )
    constants = description["constants"]
    assert constants["REPEATED_TOOL_FAILURE_THRESHOLD"] == REPEATED_TOOL_FAILURE_THRESHOLD
    assert (
        constants["REPEATED_TOOL_FAILURE_BATCH_THRESHOLD"] == REPEATED_TOOL_FAILURE_BATCH_THRESHOLD
    )
    assert constants["INELIGIBLE_RESET_REASON_PRECEDENCE"] == [
        r.value for r in INELIGIBLE_RESET_REASON_PRECEDENCE
    ]
    assert constants["REPEATED_TOOL_FAILURE_REMINDER"] == REPEATED_TOOL_FAILURE_REMINDER
    # docs/parity.md: the original keeps the stop text bare and prefixes "System: " where it
    # appends it to history; ours is the seed's history text, the prefix included.
    bare = constants["REPEATED_TOOL_FAILURE_STOP_MESSAGE"]
    assert f"System: {bare}" == REPEATED_TOOL_FAILURE_STOP_MESSAGE


def test_an_empty_error_type_is_unclassified_here_and_a_key_in_the_original(
    original: OriginalReducer,
) -> None:
    """docs/parity.md: the seed needs a non-empty type; 0.24.4 tracks ``""`` as a key."""
    empty = Observation(
        call_id="c1",
        terminal_status="error",
        execution_status="error",
        execution_error_type="",
        policy_tool_name="read_file",
        tool_type="native",
    )
    receipt = BatchReceipt([empty])
    guard = RepeatedToolFailureGuard(GuardMode.ENFORCE)
    mine = decision_fields(guard.observe(receipt), guard)
    (raw,) = original.run([reducer_input(GuardMode.ENFORCE, receipt, None, raw=True)])
    assert (mine["kind"], mine["reason"], mine["enforcementDisabled"]) == ("reset", "unknown", True)
    assert original_fields(raw)["kind"] == "tracked"
    assert original_fields(raw)["key"] == {"policyToolName": "read_file", "executionErrorType": ""}
    # Sent as what it means here -- an unclassified (missing) type -- both agree.
    (mapped,) = original.run([reducer_input(GuardMode.ENFORCE, receipt, None)])
    assert original_fields(mapped) == mine


# -- hypothesis: arbitrary batches ----------------------------------------------------

TOOLS = ("read_file", "run_shell_command", "mcp__git__status")
ERROR_TYPES = ("file_not_found", "shell_execute_error", "path_not_in_workspace")
_ids = itertools.count()

any_observation = st.builds(
    Observation,
    call_id=st.builds(lambda: f"c{next(_ids)}"),
    terminal_status=st.sampled_from(("success", "error", "cancelled")),
    execution_status=st.sampled_from(
        (None, "success", "error", "cancelled", "not_started", "unknown", "paused")
    ),
    execution_error_type=st.sampled_from((None, "", "unknown", *ERROR_TYPES)),
    policy_tool_name=st.sampled_from((None, "", *TOOLS)),
    tool_type=st.sampled_from((None, "native", "mcp")),
    provider_duplicate=st.sampled_from((False,) * 5 + (True,)),
)
eligible_failure = st.builds(
    Observation,
    call_id=st.builds(lambda: f"c{next(_ids)}"),
    terminal_status=st.just("error"),
    execution_status=st.just("error"),
    execution_error_type=st.sampled_from(ERROR_TYPES[:2]),
    policy_tool_name=st.sampled_from(TOOLS[:2]),
    tool_type=st.sampled_from(("native", "mcp")),
)
success = st.builds(
    Observation,
    call_id=st.builds(lambda: f"c{next(_ids)}"),
    terminal_status=st.just("success"),
    execution_status=st.sampled_from(("success", "not_started")),
    policy_tool_name=st.sampled_from(TOOLS),
    tool_type=st.just("native"),
)


@st.composite
def loop_batch(draw: st.DrawFn) -> BatchReceipt:
    """Mostly the same failure again (to reach warned and latched), with some noise."""
    n = draw(st.integers(1, 8))
    key = draw(st.sampled_from([("read_file", "file_not_found"), ("run_shell_command", "x")]))
    entries = [
        Observation(
            call_id=f"c{next(_ids)}",
            terminal_status="error",
            execution_status="error",
            execution_error_type=key[1],
            policy_tool_name=key[0],
            tool_type="native",
        )
        for _ in range(n)
    ]
    entries += draw(st.lists(st.one_of(success, any_observation), max_size=2))
    return BatchReceipt(draw(st.permutations(entries)))


receipts = st.one_of(
    loop_batch(),
    loop_batch(),
    st.builds(
        BatchReceipt,
        st.lists(st.one_of(any_observation, eligible_failure, success), max_size=6),
        complete=st.sampled_from((True,) * 9 + (False,)),
    ),
)
boundaries = st.one_of(
    st.just(None),
    st.just(None),
    st.just(InputBoundary()),
    st.builds(
        InputBoundary,
        has_external_input=st.booleans(),
        has_queued_prompt=st.booleans(),
        reliable=st.sampled_from((True, True, False)),
    ),
)
steps = st.lists(st.tuples(receipts, boundaries), min_size=1, max_size=12)


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(mode=st.sampled_from(list(GuardMode)), sequence=steps)
def test_arbitrary_sequences_decide_the_same(
    original: OriginalReducer, mode: GuardMode, sequence: list[Step]
) -> None:
    results = original.run([reducer_input(mode, r, b) for r, b in sequence])
    assert_same(mode, sequence, results)


# -- the corpora the project already has ----------------------------------------------


@pytest.mark.parametrize("mode", list(GuardMode))
def test_the_model_checks_alphabet_to_depth_three_decides_the_same(
    original: OriginalReducer, mode: GuardMode
) -> None:
    names, letters = list(ALPHABET), list(ALPHABET.values())
    sequences = list(itertools.product(range(len(letters)), repeat=3))
    runs = original.run_many(sequences, [reducer_input(mode, r, b) for r, b in letters])
    assert len(runs) == len(letters) ** 3
    for sequence, results in zip(sequences, runs, strict=True):
        steps = [letters[i] for i in sequence]
        assert_same(mode, steps, results, label=str([names[i] for i in sequence]))


def test_the_bench_corpus_decides_the_same(original: OriginalReducer) -> None:
    corpus = build_corpus(batches=3000)
    runs = original.run_many(
        [[reducer_input(mode, r, b) for r, b in prompt] for mode, prompt in corpus]
    )
    kinds = set()
    for number, ((mode, prompt), results) in enumerate(zip(corpus, runs, strict=True)):
        assert_same(mode, prompt, results, label=f"prompt {number}")
        kinds.update(r["kind"] for r in results)
    # The corpus reaches every decision the guard can make in shadow, warn and enforce.
    assert kinds == {"none", "reset", "tracked", "would_warn", "warn", "would_stop", "stop"}
