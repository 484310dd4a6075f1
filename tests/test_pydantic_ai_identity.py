"""The pydantic-ai adapter: what is one call across runs, and a guard that observes nothing.

Issue 23 item 5, over the real wire (``tests/pydantic_ai_harness.py``): with
``message_history`` a call is a replay only when its id, tool name and
arguments are an answered call's (a reused id with other arguments is executed
and guarded); and a run the adapter cannot observe says so during the run,
once, not only after it.
"""

from __future__ import annotations

import logging
from typing import Any

import pydantic
import pytest
from openai_server import Reply, call
from pydantic_ai import RunContext, Tool, ToolFailed
from pydantic_ai_harness import batches, guarded_run

from tool_failure_guard.integrations.pydantic_ai import RepeatedToolFailureCapability

FOUR_FAILURES = [("fetch", {"key": "k"})] * 4


class Summary(pydantic.BaseModel):
    text: str


class Missing(ToolFailed):
    error_type = "record_missing"


def fetch_failing(key: str) -> str:
    """Fetch a record (always fails the idiomatic way, typed)."""
    raise Missing(f"no record {key}")


# -- identity ---------------------------------------------------------------------------


def test_a_replayed_answered_call_of_the_history_is_never_executed_again() -> None:
    executed: list[str] = []

    def fetch(key: str) -> str:
        """Fetch a record."""
        executed.append(key)
        return "found"

    first = guarded_run(batches([("fetch", {"key": "a"})]), [fetch])
    replay = guarded_run(
        batches([("fetch", {"key": "a"})], final="Again."),  # the same call: id b1c0, key a
        [fetch],
        history=first.result.all_messages(),
    )
    assert executed == ["a"]
    (observation,) = replay.receipts[0].observations
    assert observation.provider_duplicate and observation.execution_status == "not_started"
    assert replay.result.output == "Again."


def test_an_answered_id_of_the_history_reused_with_other_arguments_is_a_new_call() -> None:
    # Providers that number call ids per message (call_0 in every turn) reuse an answered id
    # for a new call: with message_history the id alone must not make it a replay.
    executed: list[str] = []

    def fetch(key: str) -> str:
        """Fetch a record (fails for every key but "a")."""
        executed.append(key)
        if key != "a":
            raise Missing(key)
        return "found"

    first = guarded_run(batches([("fetch", {"key": "a"})]), [fetch])
    history = first.result.all_messages()
    again = [("fetch", {"key": "b"})]  # every batch reuses the answered id b1c0... b3c0
    reused = guarded_run(
        [Reply(calls=(call("b1c0", "fetch", {"key": k}),)) for k in "bcd"] + [Reply(text="End.")],
        [fetch],
        history=history,
        mode="warn",
    )
    assert executed == ["a", "b", "c", "d"]  # executed, every one
    observations = [o for r in reused.receipts for o in r.observations]
    assert [(o.provider_duplicate, o.execution_status) for o in observations] == [
        (False, "error")
    ] * 3
    assert reused.decisions == ["tracked", "tracked", "tracked"]  # guarded: counted as failures
    # the same id with the same arguments as its own answered call is still a replay
    replayed = guarded_run(
        batches(again, final="Again."), [fetch], history=reused.result.all_messages()
    )
    assert executed == ["a", "b", "c", "d"]
    (observation,) = replayed.receipts[0].observations
    assert observation.provider_duplicate


def test_a_call_id_replayed_within_the_run_is_never_executed_again() -> None:
    executed: list[str] = []

    def fetch(key: str) -> str:
        """Fetch a record."""
        executed.append(key)
        return "found"

    # A replay is the same call sent again (same id, name and arguments); the same id for
    # another call is a new call (the core's de-duplicator), executed.
    same_id = [Reply(calls=(call("x1", "fetch", {"key": key}),)) for key in ("a", "a", "b")]
    ran = guarded_run([*same_id, Reply(text="Done.")], [fetch])
    assert executed == ["a", "b"]
    observed = [o.provider_duplicate for r in ran.receipts for o in r.observations]
    assert observed == [False, True, False]


# -- fail-open made visible -----------------------------------------------------------


class ForgetfulSubclass(RepeatedToolFailureCapability):
    """A user extension that overrides the batch hook without calling ``super()``."""

    async def after_node_run(self, ctx: RunContext[Any], *, node: Any, result: Any) -> Any:
        return result


FAIL_OPEN = "the guard observes nothing for this run"


def test_a_run_that_observes_nothing_says_so_during_the_run_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    warned_by_batch: list[bool] = []

    def fetch(key: str) -> str:
        """Fetch a record; notes whether the fail-open warning was already logged."""
        warned_by_batch.append(any(FAIL_OPEN in r.getMessage() for r in caplog.records))
        raise Missing(key)

    guard = ForgetfulSubclass(mode="enforce")
    with caplog.at_level(logging.WARNING, logger="tool_failure_guard.integrations.pydantic_ai"):
        ran = guarded_run(batches(*[[("fetch", {"key": "k"})]] * 4), [fetch], guard=guard)
    assert ran.result.output == "Done."  # nothing was enforced: the guard saw nothing
    # said before the second batch ran (at the next model request), not after the run
    assert warned_by_batch == [False, True, True, True]
    warnings = [r for r in caplog.records if FAIL_OPEN in r.getMessage()]
    assert len(warnings) == 1
    assert "RepeatedToolFailureCapability" in warnings[0].getMessage()
    assert "after_node_run was not reached" in warnings[0].getMessage()


class BlindSubclass(RepeatedToolFailureCapability):
    """A user extension that overrides the admission hook without calling ``super()``."""

    async def before_node_run(self, ctx: RunContext[Any], *, node: Any) -> Any:
        return node


def test_a_tool_run_outside_any_admitted_batch_is_said_at_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    warned: list[bool] = []

    def fetch(key: str) -> str:
        """Fetch a record; notes whether the fail-open warning was already logged."""
        warned.append(any(FAIL_OPEN in r.getMessage() for r in caplog.records))
        raise Missing(key)

    with caplog.at_level(logging.WARNING, logger="tool_failure_guard.integrations.pydantic_ai"):
        ran = guarded_run(batches(*[[("fetch", {"key": "k"})]] * 2), [fetch], guard=BlindSubclass())
    assert ran.result.output == "Done."
    assert warned == [True, True]  # the first call's execution already said it
    (warning,) = [r for r in caplog.records if FAIL_OPEN in r.getMessage()]
    assert "outside any batch" in warning.getMessage()


def test_a_run_that_observes_its_batches_never_warns_fail_open(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="tool_failure_guard.integrations.pydantic_ai"):
        typed = guarded_run(
            [*batches(FOUR_FAILURES)[:1], Reply(calls=(call("o", "final_result", {"text": "x"}),))],
            [Tool(fetch_failing, name="fetch")],
            agent_options={"output_type": Summary},
        )
    assert typed.result.output == Summary(text="x")  # the output tool is no batch of the guard
    assert not [r for r in caplog.records if FAIL_OPEN in r.getMessage()]
