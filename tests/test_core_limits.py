"""Limits that follow the mode: a framework or CLI host's off and shadow never change a run.

The ACP agent keeps the original's always-on protections (``limits_follow_mode``
False, the default); a host with limits of its own passes True, and then only
``warn``/``enforce`` act while ``shadow`` still says what would have stopped.
"""

from __future__ import annotations

import pytest
from test_core_prompt import calls, run_batch

from tool_failure_guard.core import (
    LOOP_INVALID_TOOL_PARAMS,
    LOOP_PROVIDER_DUPLICATE,
    LOOP_REPEATED_TOOL_FAILURE,
    LOOP_TOOL_CALL_CAP,
    Continue,
    PromptProtection,
    Stop,
    outcomes,
)
from tool_failure_guard.guard import GuardMode


def invalid(call):  # type: ignore[no-untyped-def]
    return outcomes.invalid_arguments(call, "unexpected keyword argument 'pth'")


@pytest.mark.parametrize("mode", [GuardMode.OFF, GuardMode.SHADOW])
def test_off_and_shadow_run_past_the_cap_and_invalid_parameters(mode: GuardMode) -> None:
    protection = PromptProtection(mode, tool_call_cap=100, limits_follow_mode=True)
    for _ in range(12):  # 120 successful calls: past the default cap of 100
        admission = protection.admit(calls(10))
        assert admission.over_cap == frozenset()  # no call held back
        assert isinstance(run_batch(protection, admission.calls, outcomes.succeeded), Continue)
    for _ in range(3):
        assert isinstance(run_batch(protection, calls(1), invalid), Continue)
    assert protection.stopped is None and protection.loop_type is None
    expected = None if mode is GuardMode.OFF else LOOP_TOOL_CALL_CAP
    assert protection.would_stop == expected  # shadow reports the first it held back


@pytest.mark.parametrize("mode", [GuardMode.WARN, GuardMode.ENFORCE])
def test_warn_and_enforce_act_on_the_limits_they_are_given(mode: GuardMode) -> None:
    capped = PromptProtection(mode, tool_call_cap=3, limits_follow_mode=True)
    run_batch(capped, calls(2), outcomes.succeeded)
    admission = capped.admit(calls(2))
    assert len(admission.over_cap) == 1  # the cap holds back the call past it
    action = run_batch(capped, admission.calls, outcomes.succeeded)
    assert isinstance(action, Stop) and action.loop_type == LOOP_TOOL_CALL_CAP
    invalids = PromptProtection(mode, invalid_params_limit=2, limits_follow_mode=True)
    actions = [run_batch(invalids, calls(1), invalid) for _ in range(2)]
    assert isinstance(actions[-1], Stop) and actions[-1].loop_type == LOOP_INVALID_TOOL_PARAMS


@pytest.mark.parametrize("mode", list(GuardMode))
def test_none_switches_the_cap_and_the_invalid_parameter_stop_off(mode: GuardMode) -> None:
    protection = PromptProtection(mode, tool_call_cap=None, invalid_params_limit=None)
    for _ in range(15):
        assert isinstance(run_batch(protection, calls(10), outcomes.succeeded), Continue)
    for _ in range(5):
        assert isinstance(run_batch(protection, calls(1), invalid), Continue)
    assert protection.would_stop is None and protection.stopped is None


def test_the_acp_default_keeps_the_originals_always_on_protections_in_shadow() -> None:
    protection = PromptProtection(GuardMode.SHADOW, tool_call_cap=3)
    run_batch(protection, calls(2), outcomes.succeeded)
    action = run_batch(protection, calls(2), outcomes.succeeded)
    assert isinstance(action, Stop) and action.loop_type == LOOP_TOOL_CALL_CAP


def test_shadow_replays_are_reported_not_stopped_when_limits_follow_the_mode() -> None:
    protection = PromptProtection(GuardMode.SHADOW, limits_follow_mode=True)
    answered = calls(1)
    run_batch(protection, answered, outcomes.succeeded)
    for _ in range(3):
        admission = protection.admit(answered)
        batch = protection.open_batch(admission)
        batch.settle(outcomes.provider_duplicate(admission.calls[0], tool="read_file"))
        assert isinstance(protection.after_batch(batch), Continue)
    assert protection.would_stop == LOOP_PROVIDER_DUPLICATE


@pytest.mark.parametrize("mode", [GuardMode.SHADOW, GuardMode.WARN])
def test_the_guards_would_stop_is_the_held_back_stop(mode: GuardMode) -> None:
    protection = PromptProtection(mode, limits_follow_mode=True)
    for _ in range(3):  # 4 + 4 failures, the reminder, then the same failure again
        assert isinstance(run_batch(protection, calls(4)), Continue)
    assert protection.would_stop == LOOP_REPEATED_TOOL_FAILURE
    assert protection.stopped is None


def test_limits_below_one_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match="invalid-parameter limit"):
        PromptProtection(GuardMode.ENFORCE, invalid_params_limit=0)
    with pytest.raises(ValueError, match="tool-call cap"):
        PromptProtection(GuardMode.ENFORCE, tool_call_cap=0)
