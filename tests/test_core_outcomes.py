"""The core's outcome constructors: each settle path lands in the contract's class."""

from __future__ import annotations

import pytest

from tool_failure_guard.core import outcomes
from tool_failure_guard.core.outcomes import CallOutcome, FunctionCall, error_type_of
from tool_failure_guard.guard import Observation, ObservationClass, classify_observation

CALL = FunctionCall(call_id="c1", name="read_file", args={"path": "missing.txt"})


def observed(outcome: CallOutcome) -> ObservationClass:
    return classify_observation(
        Observation(
            call_id=outcome.call_id,
            terminal_status=outcome.terminal_status,
            execution_status=outcome.execution_status,
            execution_error_type=outcome.execution_error_type,
            policy_tool_name=outcome.policy_tool_name,
            tool_type=outcome.tool_type,
        )
    )


@pytest.mark.parametrize(
    ("outcome", "axes", "cls"),
    [
        (outcomes.succeeded(CALL, "text"), ("success", "success", None), "success"),
        (
            outcomes.raised(CALL, FileNotFoundError(2, "gone")),
            ("error", "error", "file_not_found"),
            "eligible_failure",
        ),
        (
            outcomes.failed(CALL, "execution_timeout", "timed out"),
            ("error", "error", "execution_timeout"),
            "eligible_failure",
        ),
        (
            outcomes.invalid_arguments(CALL, "path: required"),
            ("error", "not_started", "invalid_tool_params"),
            "not_started",
        ),
        (
            outcomes.unknown_tool(CALL),
            ("error", "not_started", "tool_not_registered"),
            "not_started",
        ),
        (outcomes.cancelled_before(CALL), ("cancelled", "not_started", None), "cancelled"),
        (outcomes.cancelled_during(CALL), ("cancelled", "cancelled", None), "cancelled"),
        (outcomes.rejected(CALL), ("cancelled", "not_started", None), "cancelled"),
        (
            outcomes.post_processing_failed(outcomes.succeeded(CALL, "x"), "hook failed"),
            ("error", "success", None),
            "post_execution_failure",
        ),
    ],
)
def test_each_path_settles_on_its_row_of_the_contract(
    outcome: CallOutcome, axes: tuple[str, str, str | None], cls: str
) -> None:
    assert (outcome.terminal_status, outcome.execution_status, outcome.execution_error_type) == (
        axes
    )
    assert observed(outcome) == cls
    assert outcome.call_id == "c1" and outcome.name == "read_file"


def test_a_known_tool_defaults_its_identity_to_the_call_name_an_unknown_one_has_none() -> None:
    assert outcomes.succeeded(CALL).policy_tool_name == "read_file"
    assert outcomes.succeeded(CALL, tool="fs.read", tool_type="mcp").policy_tool_name == "fs.read"
    unknown = outcomes.unknown_tool(CALL)
    assert (unknown.policy_tool_name, unknown.tool_type) == (None, None)
    assert "read_file" in unknown.output


class Typed(Exception):
    def __init__(self, error_type: object) -> None:
        super().__init__("the message says file_not_found but is never read")
        self.error_type = error_type


class OwnError(ConnectionRefusedError):
    pass


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (Typed("quota_exceeded"), "quota_exceeded"),
        (FileNotFoundError(), "file_not_found"),
        (IsADirectoryError(), "is_a_directory"),
        (NotADirectoryError(), "not_a_directory"),
        (PermissionError(), "permission_denied"),
        (TimeoutError(), "timeout"),
        (OwnError(), "connection_error"),  # the nearest listed class along the MRO
        (ValueError("file_not_found"), "unhandled_exception"),  # never parsed from text
        (RuntimeError(), "unhandled_exception"),
        # an error_type that is not a classified reason falls back to the class rule
        (Typed("Not A Type!"), "unhandled_exception"),
        (Typed(""), "unhandled_exception"),
        (Typed(42), "unhandled_exception"),
        (Typed("x" * 65), "unhandled_exception"),
    ],
)
def test_a_raised_exception_is_typed_by_its_attribute_else_its_class(
    exc: BaseException, expected: str
) -> None:
    assert error_type_of(exc) == expected
    assert outcomes.raised(CALL, exc).execution_error_type == expected


def test_a_typed_exception_whose_class_is_listed_keeps_its_own_type() -> None:
    exc = PermissionError("denied")
    exc.error_type = "sandbox_refused"  # type: ignore[attr-defined]
    assert error_type_of(exc) == "sandbox_refused"


def test_raised_reports_the_exception_class_and_message_to_the_model() -> None:
    outcome = outcomes.raised(CALL, KeyError("k"))
    assert outcome.output == "KeyError: 'k'"
    assert outcomes.raised(CALL, KeyError("k"), message="lookup failed").output == "lookup failed"


def test_a_failed_outcome_needs_a_classified_type() -> None:
    with pytest.raises(ValueError, match="error_type must be lower-case snake_case"):
        outcomes.failed(CALL, "File Not Found", "x")


def test_post_processing_can_only_fail_after_a_successful_execution() -> None:
    with pytest.raises(ValueError, match="after a successful execution"):
        outcomes.post_processing_failed(outcomes.raised(CALL, OSError()), "hook failed")
    after = outcomes.post_processing_failed(outcomes.succeeded(CALL, "ok"), "bad image")
    assert (after.error_type, after.output) == ("post_processing_failed", "bad image")


def test_a_provider_duplicate_is_never_executed() -> None:
    dup = outcomes.provider_duplicate(CALL, tool="read_file")
    assert (dup.terminal_status, dup.execution_status, dup.execution_error_type) == (
        "error",
        "not_started",
        None,
    )
    assert dup.error_type == "duplicate_call_id"


def test_session_executor_re_exports_the_core_values() -> None:
    from tool_failure_guard.session.tools import executor

    assert executor.FunctionCall is FunctionCall and executor.CallOutcome is CallOutcome
