"""Offline replays of recorded episodes: the shipped guard, a variant, and peers' rules.

Every function here reads an episode's recorded batches and computes when a
rule would have fired; nothing is run against a model again.

- :func:`shipped_guard`: the project's own ``RepeatedToolFailureGuard`` (the
  replay path: one guard per prompt, one receipt per settled batch, a quiet
  input boundary) in a chosen mode.  On shadow / warn / enforce episodes its
  decisions must equal the recorded ones (a test checks it).
- :func:`per_key_guard`: the what-if "one streak per failure key" that the
  specification defers: one shipped guard per failure key, each fed only that
  key's tool's entries, so a failure of another tool neither ends nor restarts
  its streak.  The first key to remind reminds; the first to stop stops.  The
  shipped behaviour does not change: this exists only offline.
- :data:`PEER_RULES`: peer loop detectors' rules (gemini-cli: 5 identical
  calls; opencode's doom loop and Roo Code: 3; Goose: the same tool and error
  text 3 times), read from :mod:`tool_failure_guard.peer_rules` (the one copy
  the ``transcripts`` command shares) over an episode's executed calls.  Each
  answers the 1-based call at which it fires, or None.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tool_failure_guard import peer_rules
from tool_failure_guard.guard import BatchReceipt, GuardMode, Observation, RepeatedToolFailureGuard
from tool_failure_guard.peer_rules import PeerCall

Batch = Mapping[str, Any]
#: What a replay answers: 1-based call numbers at which it reminded / stopped (None: never).
Firing = tuple[int | None, int | None]

_REMIND = {"warn", "would_warn"}
_STOP = {"stop", "would_stop"}


def _observation(index: int, call: Mapping[str, Any]) -> Observation:
    return Observation(
        call_id=f"c{index}",
        terminal_status=str(call["terminal_status"])
        if call["terminal_status"] != "missing"
        else "error",
        execution_status=call.get("execution_status"),
        execution_error_type=call.get("execution_error_type"),
        policy_tool_name=str(call["name"]),
        tool_type=call.get("tool_type"),
        provider_duplicate=bool(call["duplicate"]),
    )


def _receipt(calls: Sequence[Mapping[str, Any]]) -> BatchReceipt:
    return BatchReceipt(tuple(_observation(i, c) for i, c in enumerate(calls)))


def _calls_through(batches: Sequence[Batch], index: int) -> int:
    """Executed calls up to and including batch ``index`` (duplicates never ran)."""
    return sum(1 for b in batches[: index + 1] for c in b["calls"] if not c["duplicate"])


def shipped_decisions(batches: Sequence[Batch], mode: str) -> list[str]:
    """The shipped guard's decision kind per batch (``warn`` etc., the guard's names)."""
    guard = RepeatedToolFailureGuard(GuardMode(mode))
    return [str(guard.observe(_receipt(b["calls"])).kind) for b in batches]


def _firing(batches: Sequence[Batch], kinds: Sequence[str]) -> Firing:
    remind = next((i for i, k in enumerate(kinds) if k in _REMIND), None)
    stop = next((i for i, k in enumerate(kinds) if k in _STOP), None)
    return (
        None if remind is None else _calls_through(batches, remind),
        None if stop is None else _calls_through(batches, stop),
    )


def shipped_guard(batches: Sequence[Batch]) -> Firing:
    """When the shipped guard (shadow: counts only) would have reminded and stopped."""
    return _firing(batches, shipped_decisions(batches, "shadow"))


def per_key_guard(batches: Sequence[Batch]) -> Firing:
    """The what-if: one shipped guard per failure key, each seeing only its tool's calls."""
    keys = {
        (c["name"], c.get("execution_error_type"))
        for b in batches
        for c in b["calls"]
        if c["terminal_status"] == "error" and c.get("execution_status") == "error"
    }
    remind: int | None = None
    stop: int | None = None
    for tool, _error in sorted(keys, key=str):
        guard = RepeatedToolFailureGuard(GuardMode.SHADOW)
        for index, batch in enumerate(batches):
            own = [c for c in batch["calls"] if c["name"] == tool]
            if not own:
                continue  # another tool's batch: this key's streak goes on
            kind = str(guard.observe(_receipt(own)).kind)
            at = _calls_through(batches, index)
            if kind in _REMIND and (remind is None or at < remind):
                remind = at
            if kind in _STOP and (stop is None or at < stop):
                stop = at
    return remind, stop


def _flat(batches: Sequence[Batch]) -> list[PeerCall]:
    return [
        PeerCall(
            tool=str(c["name"]),
            arguments=str(c["args"]),
            failed=c["terminal_status"] == "error",
            error_text=str(c["error_text"]),
        )
        for b in batches
        for c in b["calls"]
        if not c["duplicate"]
    ]


def _over_batches(rule: peer_rules.Rule) -> Callable[[Sequence[Batch]], int | None]:
    def replay(batches: Sequence[Batch]) -> int | None:
        return rule(_flat(batches))

    return replay


#: label -> rule over an episode's batches (the rules are :mod:`tool_failure_guard.peer_rules`).
PEER_RULES: dict[str, Callable[[Sequence[Batch]], int | None]] = {
    label: _over_batches(peer_rules.PEER_RULES[label])
    for label in (peer_rules.GEMINI_CLI, peer_rules.OPENCODE_ROO, peer_rules.GOOSE)
}
