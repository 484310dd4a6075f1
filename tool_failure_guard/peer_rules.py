"""Peer loop detectors' rules, re-stated on a flat sequence of executed calls.

Offline only: the evaluation's replays (:mod:`tool_failure_guard.evaluation.replays`)
and the ``transcripts`` command both read these, so each rule exists once.
They are re-statements of each peer's *documented* (or, for Qwen Code, bundled)
rule, not their code:

- gemini-cli: the same tool name and arguments 5 calls in a row;
- opencode's doom loop and Roo Code: the same 3 calls in a row;
- Goose: the same tool returning the same error text (its first 100
  characters) 3 times in a row;
- Qwen Code 0.24.4's own identical-call check (``LoopDetectionService.
  checkToolCallLoop`` in the bundle, ``TOOL_CALL_LOOP_THRESHOLD = 5``): the
  same key (canonical tool name + key-sorted arguments) 5 calls in a row,
  counted per prompt, among its always-on safeties.  Its one exemption (the
  stateful read tool ``task_list``, whose changing results restart the count)
  needs the results, which a log's fingerprint does not keep: here
  ``task_list`` calls never count (they break a streak), the side that can
  only make the rule fire later, never earlier.

Today's rules (issue 39), each read in its public source, never copied:

- Qwen Code's open change QwenLM/qwen-code#10916
  (https://github.com/QwenLM/qwen-code/pull/10916, "halt turns on repeated identical
  tool errors", read at its reviewed heads): the turn halts when the same tool-error
  signature (a SHA-256 of the error text) comes back in 3 *rounds* in a row, without a
  reminder.  A round is one batch of results fed to the model together (its
  ``recordToolErrorBatch``: one ToolResult message, one executed batch); identical
  errors of sibling calls in one round count once; the streak is one slot: a round
  whose signature differs restarts it at 1, each distinct signature of a mixed round
  in first-occurrence order (an open review finding may change that); a round with no
  error keeps it (its test "keeps the streak alive across a fully successful round");
  cancellations are not errors; a new prompt resets it.  Here a round is a batch, the
  signature the recorded error text (a digest only stands for it), a failed call
  without recorded text leaves the round's evidence out;
- Cline's consecutive-mistake limit (cline/cline at 21cb8d25,
  https://github.com/cline/cline/blob/21cb8d2525bcedf1f4b6890b27a74a14fe7451e4/sdk/packages/core/src/runtime/orchestration/session-runtime-orchestrator.ts,
  ``safety/mistake-tracker.ts``): a turn in which tool calls failed and none
  succeeded is a mistake, a turn with a successful call resets the count, and at the
  limit (3 in the CLI, ``--retries``; 6 in the SDK core's default) it stops (asks the
  user, or stops in yolo mode).  Its API errors count too; a log does not keep them.
  Its identical-call check (soft 3, hard 5 in a row, ``safety/loop-detection.ts``) is
  gemini-cli's rule below at 5;
- Crush's loop detection (charmbracelet/crush at 37f36e93,
  https://github.com/charmbracelet/crush/blob/37f36e93824e5c4f892e4a817f7f628e2682fe14/internal/agent/loop_detection.go):
  each step's signature is a SHA-256 of every call's tool name, input and output;
  once 10 steps ran, the run stops when a signature appears more than 5 times in the
  last 10 steps.  A log keeps the error text of a failed call, not the output of a
  successful one, so a step with a call whose output is not recorded never matches
  another: on logs the rule can only fire later than Crush would, never earlier.

Not replayable from a log: Gemini CLI's model-judged loop check (an LLM reads the
recent history), and any rule that needs what the log lacks (Cline's API errors).

Each rule answers the 1-based number of the call at which it fires, or None.  A rule
over rounds fires at the last call of the round where it fires.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import attrs


@attrs.frozen
class PeerCall:
    """One executed call as the peers' rules see it."""

    tool: str
    arguments: str  #: the arguments, or a stable digest of them (only equality matters)
    failed: bool  #: terminal status error
    error_text: str | None = None
    #: the 1-based turn (batch) of the run it belongs to; None: each call its own round
    turn: int | None = None


Rule = Callable[[Sequence[PeerCall]], int | None]

#: Qwen Code's stateful read tools: its identical-call count needs their results.
QWEN_STATEFUL_READ_TOOLS = frozenset({"task_list"})
#: ``TOOL_CALL_LOOP_THRESHOLD`` in Qwen Code 0.24.4's bundle.
QWEN_TOOL_CALL_LOOP_THRESHOLD = 5


def _streak(n: int, signature: Callable[[PeerCall], object | None]) -> Rule:
    """Fires at the n-th call in a row with the same ``signature``; None breaks the streak."""

    def rule(calls: Sequence[PeerCall]) -> int | None:
        streak, last = 0, None
        for number, call in enumerate(calls, start=1):
            current = signature(call)
            if current is None:
                streak, last = 0, None
                continue
            streak = streak + 1 if current == last else 1
            last = current
            if streak >= n:
                return number
        return None

    return rule


def identical_calls(n: int, *, exempt: frozenset[str] = frozenset()) -> Rule:
    """Fires at the n-th identical (tool name + arguments) call in a row.

    A call of an ``exempt`` tool never counts and ends the streak.
    """
    return _streak(n, lambda call: None if call.tool in exempt else (call.tool, call.arguments))


def same_error_text(n: int, chars: int = 100) -> Rule:
    """Fires when the same tool returned the same error text (first ``chars``) n times in a row."""
    return _streak(
        n,
        lambda call: (call.tool, str(call.error_text or "")[:chars]) if call.failed else None,
    )


def _rounds(calls: Sequence[PeerCall]) -> list[tuple[int, int, list[PeerCall]]]:
    """``(turn, number of its last call, its calls)`` per round: the calls of one turn."""
    rounds: list[tuple[int, int, list[PeerCall]]] = []
    for number, call in enumerate(calls, start=1):
        if rounds and call.turn is not None and rounds[-1][0] == call.turn:
            rounds[-1][2].append(call)
            rounds[-1] = (call.turn, number, rounds[-1][2])
        else:
            turn = call.turn if call.turn is not None else len(rounds) + 1
            rounds.append((turn, number, [call]))
    return rounds


def repeated_error_rounds(n: int) -> Rule:
    """Qwen Code #10916: the same error text in ``n`` rounds in a row (module docstring)."""

    def rule(calls: Sequence[PeerCall]) -> int | None:
        streak: str | None = None
        count = 0
        for _turn, last, members in _rounds(calls):
            texts = [c.error_text for c in members if c.failed and c.error_text is not None]
            for text in dict.fromkeys(texts):  # distinct, in first-occurrence order
                count = count + 1 if text == streak else 1
                streak = text
                if count >= n:
                    return last
        return None

    return rule


def consecutive_mistakes(n: int) -> Rule:
    """Cline: ``n`` turns in a row whose calls failed with none succeeding."""

    def rule(calls: Sequence[PeerCall]) -> int | None:
        count = 0
        for _turn, last, members in _rounds(calls):
            if any(not c.failed for c in members):
                count = 0
            else:
                count += 1
                if count >= n:
                    return last
        return None

    return rule


def repeated_steps(window: int, most: int) -> Rule:
    """Crush: a step signature (tool, input, output of every call) seen more than ``most``
    times in the last ``window`` turns, once ``window`` turns ran."""

    def signature(members: list[PeerCall]) -> object | None:
        if any(not c.failed or c.error_text is None for c in members):
            return None  # an output the log does not keep: matches nothing
        return tuple((c.tool, c.arguments, c.error_text) for c in members)

    def rule(calls: Sequence[PeerCall]) -> int | None:
        seen: list[tuple[int, object | None]] = []
        for turn, last, members in _rounds(calls):
            seen.append((turn, signature(members)))
            if turn < window:
                continue
            recent = [s for t, s in seen if t > turn - window and s is not None]
            if recent and max(recent.count(s) for s in set(recent)) > most:
                return last
        return None

    return rule


GEMINI_CLI = "gemini-cli (5 identical calls)"
OPENCODE_ROO = "opencode doom loop / Roo Code (3 identical calls)"
GOOSE = "Goose (same tool, same error text x3)"
QWEN_CODE = "Qwen Code 0.24.4 (5 identical calls, its own check)"
QWEN_REPEATED_ERROR = "Qwen Code PR #10916 (same error text, 3 rounds in a row)"
CLINE = "Cline (3 turns in a row of only failed calls)"
CRUSH = "Crush (same tool+input+output step >5 times in the last 10)"
#: Crush's ``loopDetectionWindowSize`` and ``loopDetectionMaxRepeats``.
CRUSH_WINDOW, CRUSH_MAX_REPEATS = 10, 5

#: label -> rule; the labels say whose rule each one re-states.
PEER_RULES: dict[str, Rule] = {
    GEMINI_CLI: identical_calls(5),
    OPENCODE_ROO: identical_calls(3),
    GOOSE: same_error_text(3),
    QWEN_CODE: identical_calls(QWEN_TOOL_CALL_LOOP_THRESHOLD, exempt=QWEN_STATEFUL_READ_TOOLS),
    QWEN_REPEATED_ERROR: repeated_error_rounds(3),
    CLINE: consecutive_mistakes(3),
    CRUSH: repeated_steps(CRUSH_WINDOW, CRUSH_MAX_REPEATS),
}
#: Short names for ``--json`` and tables.
PEER_KEYS: dict[str, str] = {
    GEMINI_CLI: "gemini_cli",
    OPENCODE_ROO: "opencode_roo",
    GOOSE: "goose",
    QWEN_CODE: "qwen_code",
    QWEN_REPEATED_ERROR: "qwen_code_repeated_error",
    CLINE: "cline_mistakes",
    CRUSH: "crush_repeated_steps",
}
