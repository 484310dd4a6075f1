"""The bench's seeded corpus of prompts, and the same corpus as replay input.

The corpus mixes the shapes sessions produce (a tool that keeps failing,
successes of other tools in between, cancellations, pre-execution failures,
unknown outcomes, provider duplicates, external input, unreliable drains);
:func:`wire_lines` writes it as ``replay`` reads it.  See
:mod:`benches.guard` for how it is timed.
"""

import json
import random
from collections.abc import Iterator

from tool_failure_guard.guard import (
    BatchReceipt,
    GuardMode,
    InputBoundary,
    Observation,
)

Prompt = tuple[GuardMode, list[tuple[BatchReceipt, InputBoundary]]]

_TOOLS = ("read_file", "run_shell_command", "edit", "list_directory", "mcp__git__status")
_ERRORS = ("file_not_found", "shell_execute_error", "edit_no_occurrence_found", "mcp_tool_error")
_QUIET = InputBoundary()


def _observation(rng: random.Random, call: int, looping: tuple[str, str]) -> Observation:
    roll = rng.random()
    call_id = f"call-{call}"
    tool_type = "mcp" if looping[0].startswith("mcp__") else "native"
    if roll < 0.55:  # the looping tool fails again
        return Observation(
            call_id=call_id,
            terminal_status="error",
            execution_status="error",
            execution_error_type=looping[1],
            policy_tool_name=looping[0],
            tool_type=tool_type,
        )
    if roll < 0.85:  # another tool succeeds in between
        return Observation(
            call_id=call_id,
            terminal_status="success",
            execution_status="success",
            policy_tool_name=rng.choice(_TOOLS[2:4]),
            tool_type="native",
        )
    if roll < 0.89:
        return Observation(
            call_id=call_id, terminal_status="cancelled", execution_status="cancelled"
        )
    if roll < 0.93:
        return Observation(
            call_id=call_id,
            terminal_status="error",
            execution_status="not_started",
            execution_error_type="invalid_tool_params",
            policy_tool_name=looping[0],
        )
    if roll < 0.95:
        return Observation(call_id=call_id, terminal_status="error", execution_status=None)
    if roll < 0.98:
        return Observation(
            call_id=call_id,
            terminal_status="error",
            execution_status="error",
            execution_error_type=rng.choice(_ERRORS),
            policy_tool_name=rng.choice(_TOOLS),
            tool_type="native",
        )
    return Observation(
        call_id=f"call-{call - 1}",
        terminal_status="error",
        execution_status="not_started",
        provider_duplicate=True,
    )


def build_corpus(batches: int = 10_000, seed: int = 20261130) -> list[Prompt]:
    """Seeded prompts totalling at least ``batches`` settled batches."""
    rng = random.Random(seed)
    corpus: list[Prompt] = []
    total = 0
    modes = (GuardMode.SHADOW, GuardMode.WARN, GuardMode.ENFORCE)
    while total < batches:
        looping = (rng.choice(_TOOLS), rng.choice(_ERRORS))
        prompt: list[tuple[BatchReceipt, InputBoundary]] = []
        call = 0
        for _ in range(rng.randint(1, 24)):
            size = rng.choice((1, 1, 2, 2, 3, 4, 6))
            observations = []
            for _ in range(size):
                call += 1
                observations.append(_observation(rng, call, looping))
            roll = rng.random()
            if roll < 0.02:
                boundary = InputBoundary(has_external_input=True)
            elif roll < 0.03:
                boundary = InputBoundary(reliable=False)
            else:
                boundary = _QUIET
            prompt.append((BatchReceipt(observations, complete=rng.random() > 0.01), boundary))
        corpus.append((rng.choice(modes), prompt))
        total += len(prompt)
    return corpus


def wire_lines(corpus: list[Prompt], *, compact: bool = True) -> Iterator[str]:
    """The corpus as replay input: one JSON line per batch, prompts one after another.

    ``compact`` leaves out keys at their defaults (``complete: true``, no boundary
    flags, null statuses and names, ``providerDuplicate: false``), as a producer
    that writes only what it knows would; otherwise every key is spelled out.
    """
    for number, (mode, batches) in enumerate(corpus):
        prompt = f"prompt-{number}"
        for index, (receipt, boundary) in enumerate(batches):
            line: dict[str, object] = {"prompt": prompt}
            if index == 0:
                line["mode"] = mode.value
            flags = {
                "complete": receipt.complete,
                "hasExternalInput": boundary.has_external_input,
                "hasQueuedPrompt": boundary.has_queued_prompt,
                "inputReliable": boundary.reliable,
            }
            defaults = {k: v for k, v in flags.items() if v == (k in ("complete", "inputReliable"))}
            line.update({k: v for k, v in flags.items() if not (compact and k in defaults)})
            observations = []
            for o in receipt.observations:
                entry: dict[str, object] = {
                    "callId": o.call_id,
                    "policyToolName": o.policy_tool_name,
                    "toolType": o.tool_type,
                    "terminalStatus": o.terminal_status,
                    "executionStatus": o.execution_status,
                    "executionErrorType": o.execution_error_type,
                    "providerDuplicate": o.provider_duplicate,
                }
                if compact:
                    entry = {k: v for k, v in entry.items() if v is not None and v is not False}
                observations.append(entry)
            line["observations"] = observations
            yield json.dumps(line)
