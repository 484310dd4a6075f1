"""Values: validation at the boundary, the mode variable, the fixed texts."""

from __future__ import annotations

import logging

import attrs
import pytest

from tool_failure_guard.guard import (
    GUARD_MODE_ENV_VAR,
    REPEATED_TOOL_FAILURE_BATCH_THRESHOLD,
    REPEATED_TOOL_FAILURE_REMINDER,
    REPEATED_TOOL_FAILURE_STOP_MESSAGE,
    REPEATED_TOOL_FAILURE_THRESHOLD,
    BatchReceipt,
    Decision,
    DecisionKind,
    GuardMode,
    InputBoundary,
    Observation,
    Phase,
    RepeatedToolFailureGuard,
    resolve_mode,
)


def test_constants_are_the_specifications() -> None:
    assert REPEATED_TOOL_FAILURE_THRESHOLD == 8
    assert REPEATED_TOOL_FAILURE_BATCH_THRESHOLD == 2
    assert GUARD_MODE_ENV_VAR == "QWEN_CODE_ACP_REPEATED_TOOL_FAILURE_GUARD"
    assert REPEATED_TOOL_FAILURE_REMINDER == (
        "System: the same tool execution has failed repeatedly for the same classified reason. "
        "Do not repeat the same approach. Inspect the returned result, change the approach or "
        "required preconditions, or explain the blocker."
    )
    assert REPEATED_TOOL_FAILURE_STOP_MESSAGE == (
        "System: Automatic continuation stopped because the same tool execution failure "
        "continued after a corrective reminder. New user input is required to continue."
    )


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("off", GuardMode.OFF),
        ("shadow", GuardMode.SHADOW),
        ("warn", GuardMode.WARN),
        ("enforce", GuardMode.ENFORCE),
        ("  ENFORCE \n", GuardMode.ENFORCE),
        ("Warn", GuardMode.WARN),
        (None, GuardMode.SHADOW),
        ("", GuardMode.SHADOW),
        ("   ", GuardMode.SHADOW),
    ],
)
def test_resolve_mode(
    value: str | None, expected: GuardMode, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        assert resolve_mode(value) is expected
    assert caplog.records == []


def test_resolve_mode_invalid_value_warns_once_naming_variable_and_values(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING):
        assert resolve_mode("enforced") is GuardMode.SHADOW
    assert len(caplog.records) == 1
    message = caplog.records[0].getMessage()
    assert GUARD_MODE_ENV_VAR in message
    assert "'enforced'" in message
    for mode in ("off", "shadow", "warn", "enforce"):
        assert mode in message


def test_observation_rejects_unknown_terminal_status_naming_the_field() -> None:
    with pytest.raises(ValueError, match="terminal_status") as info:
        Observation(call_id="c1", terminal_status="failed")
    assert "'failed'" in str(info.value)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"call_id": ""}, "call_id"),
        ({"call_id": 7}, "call_id"),
        ({"execution_status": 3}, "execution_status"),
        ({"execution_error_type": ["x"]}, "execution_error_type"),
        ({"policy_tool_name": b"read"}, "policy_tool_name"),
        ({"tool_type": "builtin"}, "tool_type"),
        ({"provider_duplicate": "yes"}, "provider_duplicate"),
    ],
)
def test_observation_validates_every_field(kwargs: dict[str, object], field: str) -> None:
    base: dict[str, object] = {"call_id": "c1", "terminal_status": "error"}
    with pytest.raises((TypeError, ValueError), match=field):
        Observation(**{**base, **kwargs})  # type: ignore[arg-type]


def test_observation_keeps_a_future_execution_status_as_given() -> None:
    observation = Observation(call_id="c1", terminal_status="error", execution_status="paused")
    assert observation.execution_status == "paused"


def test_observation_is_keyword_only_and_frozen() -> None:
    with pytest.raises(TypeError):
        Observation("c1", "error")  # type: ignore[misc]
    observation = Observation(call_id="c1", terminal_status="error")
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        observation.call_id = "c2"  # type: ignore[misc]


def test_observation_has_no_room_for_arguments_results_or_error_text() -> None:
    names = {field.name for field in attrs.fields(Observation)}
    assert names == {
        "call_id",
        "terminal_status",
        "execution_status",
        "execution_error_type",
        "policy_tool_name",
        "tool_type",
        "provider_duplicate",
    }


def test_batch_receipt_accepts_any_iterable_and_rejects_non_observations() -> None:
    observation = Observation(call_id="c1", terminal_status="error")
    receipt = BatchReceipt(iter([observation]))
    assert receipt.observations == (observation,)
    assert receipt.complete is True
    with pytest.raises(TypeError, match=r"observations\[1\]"):
        BatchReceipt([observation, {"callId": "c2"}])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="complete"):
        BatchReceipt([], complete=1)  # type: ignore[arg-type]


def test_input_boundary_defaults_are_a_quiet_reliable_drain() -> None:
    boundary = InputBoundary()
    assert (boundary.has_external_input, boundary.has_queued_prompt, boundary.reliable) == (
        False,
        False,
        True,
    )
    with pytest.raises(TypeError, match="reliable"):
        InputBoundary(reliable=None)  # type: ignore[arg-type]


def test_guard_rejects_an_unknown_mode() -> None:
    with pytest.raises(ValueError, match="loud"):
        RepeatedToolFailureGuard("loud")


def test_decisions_are_interned_values() -> None:
    guard = RepeatedToolFailureGuard(GuardMode.SHADOW)
    first = guard.observe(BatchReceipt([]))
    second = guard.observe(BatchReceipt([]))
    assert first is second
    assert first == Decision(DecisionKind.NONE, None, Phase.IDLE, Phase.IDLE)
