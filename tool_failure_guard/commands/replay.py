"""``tool-failure-guard replay``: JSON Lines batch receipts in, decisions out.

One input line is one fully settled batch, camelCase like the ACP wire::

    {"prompt": "p1", "mode": "enforce", "complete": true,
     "hasExternalInput": false, "hasQueuedPrompt": false, "inputReliable": true,
     "observations": [{"callId": "c1", "policyToolName": "read_file",
                       "toolType": "native", "terminalStatus": "error",
                       "executionStatus": "error",
                       "executionErrorType": "file_not_found",
                       "providerDuplicate": false}]}

Each distinct ``prompt`` gets its own guard for the whole input.  Output is one
JSON line per input line.  Input is data, not configuration, so it is held to
a strict schema: an unknown key, a wrong type or an invalid value stops the
run with ``line N: <what is wrong>`` and exit status 2, after every earlier
line's decision was written.

It streams: a line is read, reduced and its decision written before the next
is read, so memory grows with the number of distinct prompts (one guard each),
never with the file's length.  Per line, a fast path checks the common shape
with exact type tests and builds the output text from precomputed fragments
(character for character what ``json.dumps`` of :func:`decision_record` gives);
any line it is unsure of goes through :func:`parse_batch`, which names the
problem.
"""

from __future__ import annotations

import argparse
import json
import json.encoder
import sys
from collections import Counter
from collections.abc import Iterable
from typing import IO, Any

import attrs

from tool_failure_guard.guard import (
    BatchReceipt,
    Decision,
    GuardMode,
    InputBoundary,
    Observation,
    RepeatedToolFailureGuard,
)
from tool_failure_guard.line_input import (
    CorruptInput,
    InputLineError,
    bounded_lines,
    open_lines,
)

HELP = "reduce JSON Lines batch receipts through the guard and print its decisions"


class ReplayError(ValueError):
    """A line of replay input is malformed; the message says what is wrong."""


@attrs.frozen
class ReplayBatch:
    """One parsed input line."""

    prompt: str
    mode: GuardMode | None
    receipt: BatchReceipt
    boundary: InputBoundary


_BATCH_KEYS = {
    "prompt": str,
    "mode": str,
    "complete": bool,
    "hasExternalInput": bool,
    "hasQueuedPrompt": bool,
    "inputReliable": bool,
    "observations": list,
}
_OBSERVATION_KEYS: dict[str, tuple[str, type | tuple[type, ...]]] = {
    "callId": ("call_id", str),
    "terminalStatus": ("terminal_status", str),
    "executionStatus": ("execution_status", (str, type(None))),
    "executionErrorType": ("execution_error_type", (str, type(None))),
    "policyToolName": ("policy_tool_name", (str, type(None))),
    "toolType": ("tool_type", (str, type(None))),
    "providerDuplicate": ("provider_duplicate", bool),
}
_JSON_TYPE_NAMES = {str: "a string", bool: "a boolean", list: "an array"}


def _type_name(expected: type | tuple[type, ...]) -> str:
    if isinstance(expected, tuple):
        return " or ".join("null" if t is type(None) else _JSON_TYPE_NAMES[t] for t in expected)
    return _JSON_TYPE_NAMES[expected]


def _check_keys(where: str, data: dict[str, Any], allowed: Iterable[str]) -> None:
    unknown = sorted(set(data) - set(allowed))
    if unknown:
        raise ReplayError(f"{where}unknown key {unknown[0]!r} (allowed: {', '.join(allowed)})")


def parse_batch(text: str) -> ReplayBatch:
    """Parse one JSON line into a batch; raise :class:`ReplayError` naming the problem."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ReplayError(f"not valid JSON: {exc.msg} at column {exc.colno}") from None
    except RecursionError:
        raise ReplayError("JSON nested too deeply") from None
    if not isinstance(data, dict):
        raise ReplayError(f"expected a JSON object, got {type(data).__name__}")
    _check_keys("", data, _BATCH_KEYS)
    for name in ("prompt", "observations"):
        if name not in data:
            raise ReplayError(f"missing required key {name!r}")
    for name, expected in _BATCH_KEYS.items():
        if name in data and not isinstance(data[name], expected):
            raise ReplayError(f"{name!r} must be {_type_name(expected)}, got {data[name]!r}")
    if not data["prompt"]:
        raise ReplayError("'prompt' must be a non-empty string")
    mode: GuardMode | None = None
    if "mode" in data:
        try:
            mode = GuardMode(data["mode"])
        except ValueError:
            valid = ", ".join(m.value for m in GuardMode)
            raise ReplayError(f"'mode' must be one of {valid}, got {data['mode']!r}") from None
    observations = [
        _parse_observation(index, item) for index, item in enumerate(data["observations"])
    ]
    boundary = InputBoundary(
        has_external_input=data.get("hasExternalInput", False),
        has_queued_prompt=data.get("hasQueuedPrompt", False),
        reliable=data.get("inputReliable", True),
    )
    receipt = BatchReceipt(observations, complete=data.get("complete", True))
    return ReplayBatch(prompt=data["prompt"], mode=mode, receipt=receipt, boundary=boundary)


def _parse_observation(index: int, item: Any) -> Observation:
    where = f"observations[{index}]: "
    if not isinstance(item, dict):
        raise ReplayError(f"{where}expected a JSON object, got {type(item).__name__}")
    _check_keys(where, item, _OBSERVATION_KEYS)
    kwargs: dict[str, Any] = {}
    for wire, (field, expected) in _OBSERVATION_KEYS.items():
        if wire not in item:
            if wire in ("callId", "terminalStatus"):
                raise ReplayError(f"{where}missing required key {wire!r}")
            continue
        if not isinstance(item[wire], expected):
            raise ReplayError(f"{where}{wire!r} must be {_type_name(expected)}, got {item[wire]!r}")
        kwargs[field] = item[wire]
    try:
        return Observation(**kwargs)
    except (TypeError, ValueError) as exc:
        raise ReplayError(f"{where}{_wire_message(str(exc))}") from None


def _wire_message(message: str) -> str:
    """Name fields the way the input spelled them."""
    for wire, (field, _) in _OBSERVATION_KEYS.items():
        message = message.replace(field, wire)
    return message


# -- the per-line fast path ---------------------------------------------------
#
# Most lines are well-formed.  _fast_batch checks a line against the same schema
# as parse_batch with exact type tests and set inclusions, and answers None at
# the first doubt; the caller then hands the line to parse_batch, which finds
# the problem and names it.  So the fast path never decides what an error says,
# and a line it accepts is one parse_batch accepts too (the values are still
# built through the guard's validating constructors).

_ABSENT: Any = object()
_BATCH_KEY_SET = frozenset(_BATCH_KEYS)
_OBSERVATION_KEY_SET = frozenset(_OBSERVATION_KEYS)
_MODES: dict[str, GuardMode] = {mode.value: mode for mode in GuardMode}
#: The eight possible boundaries, interned; the quiet one is None (observe's default).
_BOUNDARIES: dict[tuple[bool, bool, bool], InputBoundary | None] = {
    (external, queued, reliable): InputBoundary(
        has_external_input=external, has_queued_prompt=queued, reliable=reliable
    )
    for external in (False, True)
    for queued in (False, True)
    for reliable in (False, True)
}
_BOUNDARIES[False, False, True] = None

FastBatch = tuple[str, GuardMode | None, BatchReceipt, InputBoundary | None]


def _fast_batch(text: str) -> FastBatch | None:
    """The batch of a well-formed line; None when anything is off (parse_batch says what)."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if type(data) is not dict or not data.keys() <= _BATCH_KEY_SET:
        return None
    prompt = data.get("prompt")
    items = data.get("observations")
    if type(prompt) is not str or not prompt or type(items) is not list:
        return None
    mode: GuardMode | None = None
    named = data.get("mode", _ABSENT)
    if named is not _ABSENT:
        if type(named) is not str or named not in _MODES:
            return None
        mode = _MODES[named]
    complete = data.get("complete", True)
    external = data.get("hasExternalInput", False)
    queued = data.get("hasQueuedPrompt", False)
    reliable = data.get("inputReliable", True)
    if (
        type(complete) is not bool
        or type(external) is not bool
        or type(queued) is not bool
        or type(reliable) is not bool
    ):
        return None
    # Observation's validators hold each value to exactly what parse_batch
    # demands of it (a string, a string or null, a boolean, a known status or
    # tool type); what they refuse goes to parse_batch for its message.
    observations = []
    try:
        for item in items:
            if type(item) is not dict or not item.keys() <= _OBSERVATION_KEY_SET:
                return None
            get = item.get
            observations.append(
                Observation(
                    call_id=get("callId", ""),
                    terminal_status=get("terminalStatus", ""),
                    execution_status=get("executionStatus"),
                    execution_error_type=get("executionErrorType"),
                    policy_tool_name=get("policyToolName"),
                    tool_type=get("toolType"),
                    provider_duplicate=get("providerDuplicate", False),
                )
            )
        receipt = BatchReceipt(observations, complete=complete)
    except (TypeError, ValueError):
        return None
    return prompt, mode, receipt, _BOUNDARIES[external, queued, reliable]


_encode = json.encoder.encode_basestring_ascii  # what json.dumps uses for strings
#: decision -> the output line's text from after the prompt up to the key.
_MIDDLES: dict[Decision, str] = {}


def _middle(decision: Decision) -> str:
    text = _MIDDLES.get(decision)
    if text is None:
        reason = "null" if decision.reason is None else _encode(decision.reason.value)
        text = _MIDDLES[decision] = (
            f', "decision": {_encode(decision.kind.value)}, "reason": {reason}, '
            f'"phase": {_encode(decision.phase_after.value)}, "key": '
        )
    return text


def decision_line(prompt: str, decision: Decision, guard: RepeatedToolFailureGuard) -> str:
    """``json.dumps(decision_record(...)) + "\n"``, character for character, built faster."""
    key = guard.key
    if key is None:
        key_text = "null"
    else:
        key_text = (
            f'{{"policyToolName": {_encode(key.policy_tool_name)}, '
            f'"executionErrorType": {_encode(key.execution_error_type)}}}'
        )
    disabled = "true" if guard.enforcement_disabled else "false"
    return (
        f'{{"prompt": {_encode(prompt)}{_middle(decision)}{key_text}, '
        f'"failureCount": {guard.failure_count}, "batchCount": {guard.batch_count}, '
        f'"candidateOrdinal": {guard.candidate_ordinal}, "enforcementDisabled": {disabled}}}\n'
    )


def decision_record(
    prompt: str, decision: Decision, guard: RepeatedToolFailureGuard
) -> dict[str, Any]:
    """The output line for one batch."""
    key = guard.key
    return {
        "prompt": prompt,
        "decision": decision.kind.value,
        "reason": decision.reason.value if decision.reason is not None else None,
        "phase": guard.phase.value,
        "key": None
        if key is None
        else {
            "policyToolName": key.policy_tool_name,
            "executionErrorType": key.execution_error_type,
        },
        "failureCount": guard.failure_count,
        "batchCount": guard.batch_count,
        "candidateOrdinal": guard.candidate_ordinal,
        "enforcementDisabled": guard.enforcement_disabled,
    }


def replay(
    lines: Iterable[str],
    out: IO[str],
    default_mode: GuardMode = GuardMode.SHADOW,
    summary: Counter[tuple[str, str | None]] | None = None,
) -> None:
    """Replay ``lines``, writing one decision line each; raise ReplayError("line N: ...")."""
    guards: dict[str, RepeatedToolFailureGuard] = {}
    write = out.write
    for number, text in enumerate(lines, start=1):
        if not text or text.isspace():
            continue
        fast = _fast_batch(text)
        if fast is None:
            try:
                batch = parse_batch(text)
            except ReplayError as exc:
                raise ReplayError(f"line {number}: {exc}") from None
            fast = batch.prompt, batch.mode, batch.receipt, batch.boundary
        prompt, mode, receipt, boundary = fast
        guard = guards.get(prompt)
        if guard is None:
            guard = guards[prompt] = RepeatedToolFailureGuard(mode or default_mode)
        elif mode is not None and mode is not guard.mode:
            raise ReplayError(
                f"line {number}: prompt {prompt!r} started in mode {guard.mode.value!r}; "
                f"a guard's mode is fixed for its prompt, got {mode.value!r}"
            )
        decision = guard.observe(receipt, boundary)
        write(decision_line(prompt, decision, guard))
        if summary is not None:
            reason = decision.reason.value if decision.reason is not None else None
            summary[decision.kind.value, reason] += 1


def format_summary(summary: Counter[tuple[str, str | None]]) -> str:
    """Counts per decision and reason, most frequent first."""
    rows = [f"{'decision':<12} {'reason':<24} {'count':>7}"]
    for (kind, reason), count in sorted(
        summary.items(), key=lambda kv: (-kv[1], kv[0][0], kv[0][1] or "")
    ):
        rows.append(f"{kind:<12} {reason or '-':<24} {count:>7}")
    rows.append(f"{'total':<12} {'':<24} {sum(summary.values()):>7}")
    return "\n".join(rows)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "file", nargs="?", default="-", help="JSON Lines input, .gz too (default: stdin)"
    )
    parser.add_argument(
        "--mode",
        choices=[mode.value for mode in GuardMode],
        default=GuardMode.SHADOW.value,
        help="mode for prompts whose lines name none (default: shadow)",
    )
    parser.add_argument(
        "--summary",
        action="store_true",
        help="after the decisions, print counts per decision and reason to stderr",
    )


def run(args: argparse.Namespace) -> int:
    summary: Counter[tuple[str, str | None]] | None = Counter() if args.summary else None
    try:
        if args.file == "-":
            replay(bounded_lines(sys.stdin), sys.stdout, GuardMode(args.mode), summary)
        else:
            with open_lines(args.file) as lines:
                replay(lines, sys.stdout, GuardMode(args.mode), summary)
    except InputLineError as exc:
        sys.stdout.flush()
        print(str(exc), file=sys.stderr)
        return 2
    except CorruptInput as exc:
        sys.stdout.flush()
        print(f"replay: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"replay: cannot read {args.file}: {exc.strerror}", file=sys.stderr)
        return 2
    except UnicodeDecodeError as exc:
        print(f"replay: {args.file} is not UTF-8 text: {exc.reason}", file=sys.stderr)
        return 2
    except ReplayError as exc:
        sys.stdout.flush()
        print(str(exc), file=sys.stderr)
        return 2
    finally:
        sys.stdout.flush()
    if summary is not None:
        print(format_summary(summary), file=sys.stderr)
    return 0
