"""One imported run through the shipped protection core, per mode, and the peers' rules.

Each turn with calls is one batch, driven exactly as a live host drives
:class:`~tool_failure_guard.core.PromptProtection` (admit, settle every call on
its path, ``after_batch`` with the quiet boundary: a log records no mid-turn
input), one protection per run and mode, built as the agent's host builds it
(:mod:`~tool_failure_guard.transcripts.profiles`).  A turn without calls is a model
answer: no batch.  The replay assumes the model would have made the same
calls after a reminder (it cannot know otherwise); after an enforce stop no
further request would have been made, so the turns after it are what enforce
would have saved.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import attrs

from tool_failure_guard.core import (
    CallOutcome,
    Continue,
    FunctionCall,
    Stop,
    provider_duplicate,
)
from tool_failure_guard.core.outcomes import skipped_by_cap
from tool_failure_guard.guard import DecisionKind, GuardMode
from tool_failure_guard.peer_rules import PEER_KEYS, PEER_RULES, PeerCall, Rule
from tool_failure_guard.transcripts.importers._ids import distinct_across_turns
from tool_failure_guard.transcripts.model import ImportedCall, Run, Turn
from tool_failure_guard.transcripts.profiles import Profile, for_kind

MODES = (GuardMode.SHADOW, GuardMode.WARN, GuardMode.ENFORCE)
_REMIND = frozenset({DecisionKind.WARN, DecisionKind.WOULD_WARN})
_WOULD_STOP = frozenset({DecisionKind.WOULD_STOP})


@attrs.frozen(kw_only=True)
class Point:
    """Where in a run something happened: the turn (1-based) and the executed call count."""

    turn: int
    call: int  #: 1-based number of the last call of that turn's batch, among the run's calls
    loop_type: str | None = None  #: for a stop: the protection's loop type
    would: bool = False  #: shadow/warn: the guard only counted it (no stop happened)


@attrs.frozen(kw_only=True)
class ModeResult:
    mode: str
    remind: Point | None
    stop: Point | None


@attrs.frozen(kw_only=True)
class Saved:
    """What enforce's stop leaves unrun: the turns after the stop point."""

    turns: int
    calls: int
    input_tokens: int | None  #: None where no turn after the stop records usage
    output_tokens: int | None


@attrs.frozen(kw_only=True)
class RunResult:
    """One run's replay; of the run itself only what the report shows is kept."""

    agent: str
    source: str
    run_id: str
    model: str | None
    succeeded: bool | None
    outcome_from: str | None  #: what decided ``succeeded`` (``agent``, a SWE-bench verdict)
    profile: str  #: the replay profile (:mod:`~tool_failure_guard.transcripts.profiles`)
    turns: int
    calls: int
    failed_calls: int
    input_tokens: int | None
    output_tokens: int | None
    modes: tuple[ModeResult, ...]
    saved: Saved | None  #: None when enforce would not have stopped
    peers: dict[str, int | None]  #: peer key -> 1-based call at which its rule fires
    #: the most failures after running (error / error) of one key (tool, error type) in
    #: the run, in any order: below the guard's threshold the guard cannot remind
    key_failures: int = 0
    rejected_messages: int = 0  #: records standing for a rejected message (mini-swe-agent)
    #: stop rule -> what its stop leaves unrun, for each rule that stops this run:
    #: ``guard_<mode>`` (a real stop in that mode, no would-stop) and every peer key
    stops: dict[str, Saved] = attrs.field(factory=dict)
    #: the calls of the batch where shadow would first remind or stop (``--show-content``)
    content: tuple[ImportedCall, ...] = ()

    def mode(self, name: str) -> ModeResult:
        return next(m for m in self.modes if m.mode == name)


def _function_call(call: ImportedCall) -> FunctionCall:
    return FunctionCall(call_id=call.call_id, name=call.tool)


def _outcome(call: ImportedCall) -> CallOutcome:
    return CallOutcome(
        call_id=call.call_id,
        name=call.tool,
        policy_tool_name=call.tool,
        tool_type="mcp" if call.mcp else "native",
        terminal_status=str(call.status),
        execution_status=str(call.execution_status),
        execution_error_type=call.error_type,
        error_type=call.error_type,
    )


def replay_mode(turns: Sequence[Turn], mode: GuardMode, profile: Profile) -> ModeResult:
    """Drive one :class:`~tool_failure_guard.core.PromptProtection` of ``profile`` through
    ``turns`` in ``mode``."""
    protection = profile.protection(mode)
    remind: Point | None = None
    stop: Point | None = None
    calls_so_far = 0
    for number, turn in enumerate(turns, start=1):
        if not turn.calls:
            continue
        by_id = {c.call_id: c for c in turn.calls}
        admission = protection.admit([_function_call(c) for c in turn.calls])
        batch = protection.open_batch(admission)
        for fc in admission.calls:
            if fc.call_id in admission.provider_duplicates:
                batch.settle(provider_duplicate(fc, tool=fc.name))
            elif fc.call_id in admission.over_cap:
                batch.settle(skipped_by_cap(fc, tool=fc.name))
            else:
                batch.settle(_outcome(by_id[fc.call_id]))
        calls_so_far += len(turn.calls)
        action = protection.after_batch(batch)
        step = action.guard_step if isinstance(action, (Continue, Stop)) else None
        decided = step.decision.kind if step is not None else None
        if remind is None and decided in _REMIND:
            remind = Point(turn=number, call=calls_so_far)
        if isinstance(action, Stop):
            if stop is None or stop.would:
                stop = Point(turn=number, call=calls_so_far, loop_type=action.loop_type)
            break
        if stop is None and (decided in _WOULD_STOP or protection.would_stop is not None):
            # the guard's would-stop, or a limit the mode held back (``limits_follow_mode``)
            stop = Point(
                turn=number, call=calls_so_far, loop_type=protection.would_stop, would=True
            )
    return ModeResult(mode=str(mode), remind=remind, stop=stop)


def _tokens(turns: Sequence[Turn], field: str) -> int | None:
    values = [getattr(t, field) for t in turns if getattr(t, field) is not None]
    return sum(values) if values else None


def _saved(turns: Sequence[Turn], stop: Point) -> Saved:
    after = turns[stop.turn :]
    return Saved(
        turns=len(after),
        calls=sum(len(t.calls) for t in after),
        input_tokens=_tokens(after, "input_tokens"),
        output_tokens=_tokens(after, "output_tokens"),
    )


def peer_calls(turns: Sequence[Turn]) -> tuple[list[PeerCall], list[int]]:
    """The calls the peers' rules see (every call but a rejected message's record), and
    each one's 1-based number among all the run's calls (where a rule fires, in the run)."""
    seen: list[PeerCall] = []
    numbers: list[int] = []
    every = ((turn, c) for turn, t in enumerate(turns, start=1) for c in t.calls)
    for number, (turn, c) in enumerate(every, start=1):
        if c.rejected_message:
            continue
        seen.append(
            PeerCall(
                tool=c.tool,
                arguments=c.arguments_fingerprint,
                failed=str(c.status) == "error",
                error_text=c.error_text,
                turn=turn,
            )
        )
        numbers.append(number)
    return seen, numbers


def _fires(rule: Rule, seen: list[PeerCall], numbers: list[int]) -> int | None:
    at = rule(seen)
    return None if at is None else numbers[at - 1]


def _key_failures(calls: Sequence[ImportedCall]) -> int:
    keys = Counter(
        (c.tool, c.error_type)
        for c in calls
        if str(c.status) == "error" and str(c.execution_status) == "error"
    )
    return max(keys.values(), default=0)


def _turn_of(turns: Sequence[Turn], call: int) -> int:
    """The 1-based turn holding the run's ``call``-th call."""
    total = 0
    for number, turn in enumerate(turns, start=1):
        total += len(turn.calls)
        if total >= call:
            return number
    raise ValueError(f"the run has no call {call}")


def _stops(
    turns: Sequence[Turn], modes: Sequence[ModeResult], peers: dict[str, int | None]
) -> dict[str, Saved]:
    """What each stop rule's stop saves: the turns after the one it stops in (a peer stops
    the turn of the call it fires at, after that call's batch, as the guard does)."""
    stops = {
        f"guard_{m.mode}": _saved(turns, m.stop)
        for m in modes
        if m.stop is not None and not m.stop.would
    }
    for key, call in peers.items():
        if call is not None:
            stops[key] = _saved(turns, Point(turn=_turn_of(turns, call), call=call))
    return stops


def replay_run(run: Run, profile: Profile | None = None) -> RunResult:
    """The shipped core in every mode and each peer's rule, on one run.

    ``profile``: the guard as which host runs it; None: the one the run's agent would
    have (:func:`~tool_failure_guard.transcripts.profiles.for_kind`).  A call id an
    earlier turn already used is made distinct first (whatever the importer): each such
    call ran with its own result, so it is no provider replay.
    """
    chosen = for_kind(run.agent) if profile is None else profile
    turns = distinct_across_turns(run.turns)
    modes = tuple(replay_mode(turns, mode, chosen) for mode in MODES)
    enforce = modes[-1].stop
    seen, numbers = peer_calls(turns)
    every = [c for t in turns for c in t.calls]
    peers = {PEER_KEYS[label]: _fires(rule, seen, numbers) for label, rule in PEER_RULES.items()}
    shadow = modes[0]
    point = shadow.stop or shadow.remind
    return RunResult(
        agent=run.agent,
        source=run.source,
        run_id=run.run_id,
        model=run.model,
        succeeded=run.succeeded,
        outcome_from=run.outcome_from or ("agent" if run.succeeded is not None else None),
        profile=chosen.name,
        turns=len(turns),
        calls=len(every),
        failed_calls=sum(1 for c in every if str(c.status) == "error"),
        input_tokens=_tokens(turns, "input_tokens"),
        output_tokens=_tokens(turns, "output_tokens"),
        modes=modes,
        saved=None if enforce is None or enforce.would else _saved(turns, enforce),
        peers=peers,
        stops=_stops(turns, modes, peers),
        key_failures=_key_failures(every),
        rejected_messages=sum(1 for c in every if c.rejected_message),
        content=turns[point.turn - 1].calls if point is not None else (),
    )
