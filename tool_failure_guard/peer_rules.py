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

Each rule answers the 1-based number of the call at which it fires, or None.
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


GEMINI_CLI = "gemini-cli (5 identical calls)"
OPENCODE_ROO = "opencode doom loop / Roo Code (3 identical calls)"
GOOSE = "Goose (same tool, same error text x3)"
QWEN_CODE = "Qwen Code 0.24.4 (5 identical calls, its own check)"

#: label -> rule; the labels say whose rule each one re-states.
PEER_RULES: dict[str, Rule] = {
    GEMINI_CLI: identical_calls(5),
    OPENCODE_ROO: identical_calls(3),
    GOOSE: same_error_text(3),
    QWEN_CODE: identical_calls(QWEN_TOOL_CALL_LOOP_THRESHOLD, exempt=QWEN_STATEFUL_READ_TOOLS),
}
#: Short names for ``--json`` and tables.
PEER_KEYS: dict[str, str] = {
    GEMINI_CLI: "gemini_cli",
    OPENCODE_ROO: "opencode_roo",
    GOOSE: "goose",
    QWEN_CODE: "qwen_code",
}
