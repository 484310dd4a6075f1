"""What every adapter offers alike: the typed stop, the run's report, the stop behaviour.

A developer who moves an agent from one framework to another keeps the same
vocabulary: ``stop_of(result)`` and ``report_of(result)`` answer with the
values below in all three adapters, every adapter takes the same constructor
parameters (``mode``, ``telemetry``, ``on_stop``, ``tool_call_cap``,
``invalid_params_limit``), and a stopped run ends in the framework's own idiom for
a limit:

- ``on_stop="error"`` (the default, type-safe whatever the agent's output type):
  the run raises the adapter's :class:`ProtectionStopped` subclass, which also
  subclasses the framework's own limit error, so a handler already written for
  ``UsageLimitExceeded`` / ``MaxTurnsExceeded`` / LangChain's tool-call-limit
  error catches it;
- ``on_stop="end"``: the run ends normally with the stop text as its final
  answer, where a text answer is type-correct for that agent.

Inside a framework, which has its own limits, the mode governs every protection
(``limits_follow_mode``, :func:`protection_for_run`): ``off`` changes nothing,
``shadow`` changes nothing a run does and reports what each protection would have
done (:attr:`RunReport.would_stop_loop_type`), and only ``warn``/``enforce`` act.
The tool-call cap and the invalid-parameter stop are off (None) unless the
application sets them: each framework counts turns and retries itself
(docs/integrations.md, "compared with the built-in limits").

Nothing here decides: these are the host-side values of what
:mod:`tool_failure_guard.core` already decided.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from typing import Literal, TypeAlias

import attrs

from tool_failure_guard.core import (
    LOOP_REPEATED_TOOL_FAILURE,
    PromptProtection,
    Stop,
)
from tool_failure_guard.guard import DecisionKind, FailureKey, GuardMode

#: How a stopped run ends: raise the adapter's error, or end with the stop text.
StopBehaviour: TypeAlias = Literal["error", "end"]
STOP_BEHAVIOURS: tuple[StopBehaviour, ...] = ("error", "end")

#: The logger of the records an application sees without configuring telemetry:
#: one at a run's first would-warn/warn and one at its first would-stop/stop.
LOGGER_NAME = "tool_failure_guard"


#: The modes in which an adapter's protections act (stop a run, hold a call back).
ACTING_MODES: frozenset[GuardMode] = frozenset({GuardMode.WARN, GuardMode.ENFORCE})


def limit_option(name: str, value: object) -> int | None:
    """``value`` when it is None (the protection is off) or an int of at least 1.

    Else a :class:`ValueError` naming ``name`` and the bound (a bool is no count).
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be None (off) or an int of at least 1; got {value!r}")
    return value


def holds_back_replays(mode: GuardMode) -> bool:
    """Whether a provider replay (an answered call id sent again) is answered, not run.

    Only where protections act: in ``off`` and ``shadow`` the replayed call runs as the
    framework would run it without the guard, so the run is the same.
    """
    return mode in ACTING_MODES


def stop_behaviour(value: object) -> StopBehaviour:
    """``value`` when it is a stop behaviour, else a :class:`ValueError` naming the valid ones."""
    if value == "error":
        return "error"
    if value == "end":
        return "end"
    valid = ", ".join(repr(name) for name in STOP_BEHAVIOURS)
    raise ValueError(f"on_stop must be one of {valid}; got {value!r}")


@attrs.frozen(kw_only=True)
class GuardStop:
    """The typed signal of a run a protection stopped: test it, never the text.

    ``loop_type`` is the protection that stopped the run; ``key`` is the failure
    key (policy tool name, execution error type) when the repeated-failure
    guard stopped it, else None; ``notice`` is the fixed stop text as a person
    reads it.
    """

    loop_type: str
    notice: str
    mode: GuardMode
    key: FailureKey | None = None
    #: the subagent whose agent loop the stop ended (a hook host's ``agent_id``, the Claude
    #: Agent SDK's), its ``agent_type``; None: the stop is of the run's own agent
    agent_id: str | None = None
    agent_type: str | None = None

    @classmethod
    def of(cls, action: Stop, protection: PromptProtection) -> GuardStop:
        """The stop the core decided for ``protection``'s run, as the application sees it."""
        repeated = action.loop_type == LOOP_REPEATED_TOOL_FAILURE
        return cls(
            loop_type=action.loop_type,
            notice=action.shown_text,
            mode=protection.mode,
            key=protection.guard.key if repeated else None,
        )


@attrs.frozen(kw_only=True)
class RunReport:
    """What the guard did in one run, in every mode: for logs, dashboards and tests.

    ``decisions`` holds the guard decision kind of every batch it reduced, in
    order (empty in ``off``); ``stop`` is set only when the run was stopped
    (``warn``/``enforce``); shadow's would-be actions are read from ``decisions``
    and ``would_stop_loop_type``: the loop type of the first stop a protection
    decided but the mode held back (the guard's would-stop in shadow/warn, the
    tool-call cap or the invalid-parameter stop in shadow).
    """

    mode: GuardMode
    decisions: tuple[str, ...]
    batches: int  #: settled batches (ones a protection stopped before the guard included)
    tool_calls: int
    observed: int  #: call outcomes the adapter saw
    stop: GuardStop | None
    would_stop_loop_type: str | None = None
    #: the subagent this report is of (its ``agent_id``, ``agent_type``), None: the run's agent
    agent_id: str | None = None
    agent_type: str | None = None
    #: the run's subagents' own reports, each its own agent loop (the Claude Agent SDK's);
    #: empty where a framework has none
    subagents: tuple[RunReport, ...] = ()

    @property
    def stopped_subagents(self) -> tuple[RunReport, ...]:
        """The subagents a protection stopped; the run itself went on (its ``stop`` is None
        unless its own agent was stopped too)."""
        return tuple(report for report in self.subagents if report.stop is not None)

    @property
    def reminded(self) -> bool:
        """The corrective reminder was injected (``warn``/``enforce``)."""
        return DecisionKind.WARN in self.decisions

    @property
    def would_remind(self) -> bool:
        """The reminder would have been injected (shadow) or was (warn/enforce)."""
        return DecisionKind.WOULD_WARN in self.decisions or self.reminded

    @property
    def would_stop(self) -> bool:
        """A stop was decided: would-be (shadow/warn) or real (enforce)."""
        return (
            DecisionKind.WOULD_STOP in self.decisions
            or DecisionKind.STOP in self.decisions
            or self.stop is not None
            or self.would_stop_loop_type is not None
        )


#: The attribute of an error that ended a guarded run which carries the run's report.
REPORT_ATTRIBUTE = "tool_failure_guard_report"


def attach_report(error: BaseException, report: RunReport) -> None:
    """Keep ``report`` on ``error``, an exception that ended a guarded run.

    So ``report_of(error)`` answers when the framework's own limit ended the run
    (``UsageLimitExceeded``, ``MaxTurnsExceeded``): the shadow report is there exactly
    when a looping run ran into the budget.  An error that refuses attributes keeps none.
    """
    with contextlib.suppress(AttributeError, TypeError):  # e.g. a class with __slots__
        setattr(error, REPORT_ATTRIBUTE, report)


def attached_report(value: object) -> RunReport | None:
    """The report :func:`attach_report` kept on ``value``, else None."""
    report = getattr(value, REPORT_ATTRIBUTE, None) if isinstance(value, BaseException) else None
    return report if isinstance(report, RunReport) else None


class ProtectionStopped(Exception):
    """A protection stopped the run (``on_stop="error"``): no further model request was made.

    Each adapter raises a subclass that also subclasses its framework's own
    limit error.  ``stop`` and ``report`` are the values ``stop_of`` and
    ``report_of`` would have answered; the settled tool results are kept in
    the run's history as the framework keeps them.
    """

    def __init__(self, stop: GuardStop, report: RunReport) -> None:
        super().__init__(stop.notice)
        self.stop = stop
        self.report = report

    @property
    def loop_type(self) -> str:
        return self.stop.loop_type

    @property
    def key(self) -> FailureKey | None:
        return self.stop.key

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.stop, self.report))


class WarnOnce:
    """A warning an adapter instance gives once, however many runs it guards.

    For what makes the guard unable to act (a tool's plain exception ending the run):
    said once, naming the reason and the fix, never repeated per call or per run.
    """

    __slots__ = ("_given", "_lock")

    def __init__(self) -> None:
        self._given = False
        self._lock = threading.Lock()

    @property
    def given(self) -> bool:
        return self._given

    def warn(self, logger: logging.Logger, message: str, *args: object) -> None:
        with self._lock:
            if self._given:
                return
            self._given = True
        logger.warning(message, *args)


def plain_exception_warning(framework: str, fix: str) -> str:
    """The once-per-adapter warning of a tool whose plain exception ends the run."""
    return (
        f"tool-failure-guard ({framework}): the tool %r raised %s, which ends the "
        f"{framework} run at the first call: the guard never sees a failure to count. "
        f"Fix: {fix}"
    )


class ActionLog:
    """Once per run: the log record of the first reminder and of the first stop, in any mode.

    Shadow changes nothing the model sees; these records are how an
    application can tell the guard is installed and what it would have done.
    They carry no tool names, arguments or outputs.
    """

    __slots__ = ("_agent", "_logger", "_reminded", "_route", "_stopped")

    def __init__(
        self, route: str, logger: logging.Logger | None = None, *, agent: str | None = None
    ) -> None:
        self._route = route
        #: the subagent whose agent loop this log is of (its id and type), None: the run's
        self._agent = agent
        self._logger = logger if logger is not None else logging.getLogger(LOGGER_NAME)
        self._reminded = False
        self._stopped = False

    def decided(self, kind: str, mode: GuardMode, *, batch: int, loop_type: str) -> None:
        """Record ``kind`` (a decision kind) when it is the run's first of its sort."""
        if kind in (DecisionKind.WOULD_WARN, DecisionKind.WARN):
            if self._reminded:
                return
            self._reminded = True
            what = "injected the reminder" if kind == DecisionKind.WARN else "would remind"
        elif kind in (DecisionKind.WOULD_STOP, DecisionKind.STOP):
            if self._stopped:
                return
            self._stopped = True
            what = "stopped the run" if kind == DecisionKind.STOP else "would stop the run"
            if self._agent is not None:
                what = what.replace("the run", "the subagent")
        else:
            return
        extra: dict[str, object] = {
            "tool_failure_guard_mode": mode.value,
            "tool_failure_guard_route": self._route,
            "tool_failure_guard_decision": str(kind),
            "tool_failure_guard_loop_type": loop_type,
            "tool_failure_guard_batch": batch,
        }
        if self._agent is not None:
            extra["tool_failure_guard_agent"] = self._agent
        self._logger.warning(
            "tool-failure-guard (%s, %s): %s at batch %d (%s)%s",
            mode.value,
            self._route,
            what,
            batch,
            loop_type,
            f", subagent {self._agent}" if self._agent is not None else "",
            extra=extra,
        )
