"""Our values in the original's terms: the one place the parity tests translate.

The released original (Qwen Code 0.24.4) spells the guard's input and state in
camelCase, leaves absent fields ``undefined`` and labels two decisions differently in
telemetry.  Every parity test (``test_parity_reducer.py``, ``test_parity_session.py``)
compares through these functions, so a difference of spelling can never hide, or fake,
a difference of behaviour.
"""

from __future__ import annotations

from typing import Any

from tool_failure_guard.guard import (
    BatchReceipt,
    Decision,
    GuardMode,
    InputBoundary,
    Observation,
    RepeatedToolFailureGuard,
)

# -- the reducer's input -------------------------------------------------------------


def observation(o: Observation, *, raw: bool = False) -> dict[str, Any]:
    """A receipt entry as the original's observation; None fields are left out (undefined).

    An empty ``execution_error_type`` is unclassified for us, as the seed says (a
    candidate needs a non-empty type); 0.24.4 accepts ``""`` as a key.  Its equivalent
    of our empty type is therefore a missing one, which is what is sent, unless ``raw``
    (the test that asserts this difference, docs/parity.md).
    """
    entry: dict[str, Any] = {
        "callId": o.call_id,
        "terminalStatus": o.terminal_status,
        "providerDuplicate": o.provider_duplicate,
    }
    optional = {
        "executionStatus": o.execution_status,
        "executionErrorType": o.execution_error_type or (o.execution_error_type if raw else None),
        "policyToolName": o.policy_tool_name,
        "toolType": o.tool_type,
    }
    entry.update({k: v for k, v in optional.items() if v is not None})
    return entry


def reducer_input(
    mode: GuardMode, receipt: BatchReceipt, boundary: InputBoundary | None, *, raw: bool = False
) -> dict[str, Any]:
    """``reduceRepeatedToolFailureGuard``'s input for one settled batch.

    Our ``None`` boundary means a quiet one (reliable, nothing external, nothing queued).
    """
    boundary = boundary or InputBoundary()
    return {
        "mode": mode.value,
        "inputReliable": boundary.reliable,
        "hasExternalInput": boundary.has_external_input,
        "hasQueuedPrompt": boundary.has_queued_prompt,
        "batch": {
            "complete": receipt.complete,
            "observations": [observation(o, raw=raw) for o in receipt.observations],
        },
    }


# -- the reducer's answer ------------------------------------------------------------


def decision_fields(decision: Decision, guard: RepeatedToolFailureGuard) -> dict[str, Any]:
    """Our decision and the guard's state after it, in the original's fields.

    ``phase_before`` is not a field of the original's result; the test compares it with
    the phase of the original's previous state.
    """
    key = guard.key
    return {
        "kind": decision.kind.value,
        "reason": None if decision.reason is None else decision.reason.value,
        "phase": decision.phase_after.value,
        "key": None
        if key is None
        else {
            "policyToolName": key.policy_tool_name,
            "executionErrorType": key.execution_error_type,
        },
        "failureCount": guard.failure_count,
        "batchCount": guard.batch_count,
        "candidateOrdinal": guard.candidate_ordinal,
        # The original keeps the next ordinal; ours counts the streaks begun.
        "nextCandidateOrdinal": guard.last_candidate_ordinal + 1,
        "enforcementDisabled": guard.enforcement_disabled,
    }


def original_fields(result: dict[str, Any]) -> dict[str, Any]:
    """The original's ``{kind, reason, state}`` in the same shape as :func:`decision_fields`."""
    state = result["state"]
    return {
        "kind": result["kind"],
        "reason": result.get("reason"),
        "phase": state["phase"],
        "key": state.get("key"),
        "failureCount": state["failureCount"],
        "batchCount": state["batchCount"],
        "candidateOrdinal": state["candidateOrdinal"],
        "nextCandidateOrdinal": state["nextCandidateOrdinal"],
        "enforcementDisabled": state["enforcementDisabled"],
    }


# -- telemetry and the debug log -----------------------------------------------------

#: Decision kind -> telemetry label, the same in both (the original's
#: ``recordRepeatedToolFailureDecision``; ours ``docs/telemetry.md``).
TELEMETRY_DECISION = {
    "reset": "reset",
    "tracked": "tracked",
    "would_warn": "would_warn",
    "warn": "warned",
    "would_stop": "would_stop",
    "stop": "stopped",
}
#: Fields of the guard's log record both write with the same meaning.
SHARED_GUARD_LOG_FIELDS = (
    "route",
    "mode",
    "phase_before",
    "phase_after",
    "decision",
    "failure_count_bucket",
    "batch_count_bucket",
    "candidate_ordinal",
    "reset_reason",
    "terminal_status",
    "execution_status",
    "execution_error_type",
    "tool_type",
)


def shared_guard_fields(attributes: dict[str, Any]) -> dict[str, Any]:
    """The fields of one guard log record (either agent's) that both write."""
    return {k: attributes[k] for k in SHARED_GUARD_LOG_FIELDS if attributes.get(k) is not None}


def debug_line_fields(decision: str, attributes: dict[str, Any]) -> dict[str, str]:
    """What the original's ``--debug`` guard line says, from a decision kind and its record."""
    return {"decision": decision, "phase": str(attributes["phase_after"])}
