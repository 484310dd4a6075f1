"""The repeated tool-failure guard as a statechart.

Theory of operation
===================

One guard lives for one interactive foreground ACP prompt.  Every time a tool
batch of that prompt has *fully settled* (every admitted call has a terminal
result), the session hands the guard a batch receipt and the state of the
input boundary.  The receipt classifier (``guard.classify_batch``) reduces that
to a *verdict*; the verdict and the guard's current streak are summarised as
five booleans, the *facts*; and the facts pick exactly one transition of the
single event ``settle`` below.

The chart has four phases:

``idle``
    No candidate.  Nothing has failed repeatedly, or a reset just happened.
``tracking``
    One candidate failure key ``(policy tool name, execution error type)`` is
    being counted: its eligible failures and the complete batches they came in.
``warned``
    The candidate reached the threshold (8 failures across at least 2
    batches); the corrective reminder was requested once for this streak.
``latched``
    The same candidate failed again in the next complete batch after the
    reminder.  Final: the guard makes no further decisions in this prompt.

Among the transitions leaving one phase the first whose conditions all hold
fires (declaration order matters).  The conditions are *named* so that the
diagrams show them and so that the runtime can derive its table from them:

``has_reset_reason``
    The batch carries a reset reason of its own (boundary, incomplete batch,
    cancelled / not started / unknown / post-execution / contract-violating
    outcome, or more than one distinct eligible failure key).
``eligible``
    After successes cleared their own tool's failures, exactly one eligible
    failure key remains: the batch has a candidate.
``key_match``
    That candidate is the key currently being tracked.
``threshold_reached``
    Adding this batch to the streak reaches 8 failures and 2 batches.
``candidate_succeeded``
    The tracked candidate's own tool succeeded in this batch (a success of
    another tool neither advances nor resets).

Each transition names the action that updates the streak (``on=``).  Actions
are implemented once, in :mod:`guard`, for both the derived runtime and the
python-statemachine engine that the model checks run beside it.

This module only declares.  It holds no counters, does no IO and decides
nothing about modes: ``off`` never reaches the chart, and whether a reminder
or a stop is merely logged (shadow) or acted on is the guard's business.
"""

from __future__ import annotations

from typing import Any

from statemachine import Event, State, StateChart

#: The one event: a fully settled tool batch of the prompt was reduced.
SETTLE = "settle"

#: The named guard conditions, in the order the facts tuple carries them.
CONDITIONS: tuple[str, ...] = (
    "has_reset_reason",
    "eligible",
    "key_match",
    "threshold_reached",
    "candidate_succeeded",
)

#: The named actions a transition may run.
ACTIONS: tuple[str, ...] = ("hold", "reset", "start_streak", "count", "remind", "latch")


class RepeatedToolFailureChart(StateChart[Any]):
    """Phases, the ``settle`` event, its guarded transitions and their actions.

    Conditions read the ``facts`` keyword given to ``send``: a mapping from
    condition name to bool.  Actions are resolved on the ``model=`` object,
    which is how the engine runs the very same action code as the runtime.
    """

    # Nothing may be silently ignored: an unmatched event and an exception in
    # a condition are both bugs in this chart or in its driver.
    allow_event_without_transition = False
    catch_errors_as_events = False

    idle = State("idle", initial=True)
    tracking = State("tracking")
    warned = State("warned")
    latched = State("latched", final=True)

    settle = Event(
        # idle: a candidate starts a streak; anything else changes no phase
        # (a reset from idle may still record a downgrade of enforcement).
        idle.to.itself(cond="has_reset_reason", on="reset")
        | idle.to(tracking, cond="eligible", on="start_streak")
        | idle.to.itself(on="hold")
        # tracking: reset, reach the threshold, count, or switch candidates.
        | tracking.to(idle, cond="has_reset_reason", on="reset")
        | tracking.to(warned, cond="eligible and key_match and threshold_reached", on="remind")
        | tracking.to.itself(cond="eligible and key_match", on="count")
        | tracking.to.itself(cond="eligible", on="start_streak")
        | tracking.to(idle, cond="candidate_succeeded", on="reset")
        | tracking.to.itself(on="hold")
        # warned: the same failure in the next batch latches; a different
        # candidate starts a new streak, which may earn its own reminder.
        | warned.to(idle, cond="has_reset_reason", on="reset")
        | warned.to(latched, cond="eligible and key_match", on="latch")
        | warned.to(tracking, cond="eligible", on="start_streak")
        | warned.to(idle, cond="candidate_succeeded", on="reset")
        | warned.to.itself(on="hold"),
        name=SETTLE,
    )

    def has_reset_reason(self, facts: dict[str, bool], **_: Any) -> bool:
        return facts["has_reset_reason"]

    def eligible(self, facts: dict[str, bool], **_: Any) -> bool:
        return facts["eligible"]

    def key_match(self, facts: dict[str, bool], **_: Any) -> bool:
        return facts["key_match"]

    def threshold_reached(self, facts: dict[str, bool], **_: Any) -> bool:
        return facts["threshold_reached"]

    def candidate_succeeded(self, facts: dict[str, bool], **_: Any) -> bool:
        return facts["candidate_succeeded"]
