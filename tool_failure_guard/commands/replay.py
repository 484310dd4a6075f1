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
problem.  The input side (the schema, both parsers) is
:mod:`tool_failure_guard.commands.replay_input`; this module writes the
decisions and is the command.
"""

from __future__ import annotations

import argparse
import json
import json.encoder
import sys
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

from tool_failure_guard.commands.replay_input import (
    ReplayBatch,
    ReplayError,
    fast_batch,
    parse_batch,
)
from tool_failure_guard.guard import Decision, GuardMode, RepeatedToolFailureGuard
from tool_failure_guard.line_input import (
    CorruptInput,
    InputLineError,
    bounded_lines,
    open_lines,
)

HELP = "reduce JSON Lines batch receipts through the guard and print its decisions"

__all__ = [
    "HELP",
    "ReplayBatch",
    "ReplayError",
    "configure",
    "decision_line",
    "decision_record",
    "format_summary",
    "parse_batch",
    "replay",
    "run",
]


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
        fast = fast_batch(text)
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


def _transcript_kind(file: str) -> str | None:
    """The kind of agent transcript ``file`` is (an importer claims it), or None."""
    if file == "-":
        return None
    from tool_failure_guard.transcripts.importers import importer
    from tool_failure_guard.transcripts.model import TranscriptError
    from tool_failure_guard.transcripts.walk import available_kinds, sniff

    try:
        return sniff(Path(file), [(kind, importer(kind)) for kind in available_kinds()])
    except (TranscriptError, OSError, ValueError):
        return None


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
        kind = _transcript_kind(args.file)
        if kind is not None:
            print(
                f"replay: {args.file} is a {kind} transcript, not batch receipts: "
                f"read it with `tool-failure-guard transcripts {args.file}`",
                file=sys.stderr,
            )
        return 2
    finally:
        sys.stdout.flush()
    if summary is not None:
        print(format_summary(summary), file=sys.stderr)
    return 0
