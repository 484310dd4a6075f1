"""The Claude Agent SDK adapter's sessions in memory: each its own, none kept without bound.

One :class:`~tool_failure_guard.integrations.claude_agent_sdk.RepeatedToolFailureHooks`
serves every query of an application, often several at once (the documented
module-level object).  Each hook event names its session (``session_id``), and
the guard of that session is the only one it touches: one query's failures,
reminder or stop never reach another's.

Inside a session each agent loop has its own guard, the main agent's and each
subagent's (``agent_id``), held by the hooks' own
:class:`~tool_failure_guard.hooks.loops.SessionLoops` and routed by
:func:`~tool_failure_guard.hooks.loops.handle_event`, as in the command hook: a
subagent's failures never count for its parent, its stop ends that subagent only,
and the main agent's next request carries the notice of it.  What the application
reads is :class:`SessionGuard.report`: the main agent's
:class:`~tool_failure_guard.integrations._api.RunReport`, its subagents' reports in
``subagents``.

A session is *live* while its query runs: its loops' guards with their live
protections.  When :meth:`Sessions.end` is called (``RepeatedToolFailureHooks.query``
does at its stream's end) the live state is released and only the session's final
report is kept, among at most :data:`MAX_FINISHED` reports.  Hooks wired by the
application itself have no query end to hear: there at most :data:`MAX_LIVE`
sessions stay live, and the least recently active one past that bound is ended (its
report kept) as if its query had ended.  A long-lived server therefore holds a
bounded number of sessions whatever it runs.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Final

import attrs

from tool_failure_guard.core import LOOP_REPEATED_TOOL_FAILURE, Continue, Stop
from tool_failure_guard.guard import DecisionKind, GuardMode
from tool_failure_guard.hooks.events import Handled
from tool_failure_guard.hooks.loops import MAIN, SessionLoops
from tool_failure_guard.hooks.prompt import PromptSession
from tool_failure_guard.integrations._api import ActionLog, GuardStop, RunReport

#: The most sessions kept live (hooks wired by the application, whose query end is not heard).
MAX_LIVE: Final = 1000
#: The most finished sessions whose report is kept (for ``report_of(session_id)``).
MAX_FINISHED: Final = 1000


class LoopRecord:
    """What one agent loop's current prompt did, as the application reads it afterwards.

    The guard itself is the loop's :class:`~tool_failure_guard.hooks.prompt.PromptSession`
    in the session's :class:`~tool_failure_guard.hooks.loops.SessionLoops`; this is its
    report: the decision of each batch, the calls, the stop.
    """

    def __init__(self, route: str, now: float, agent_id: str, agent_type: str) -> None:
        self.agent_id = agent_id
        self.agent_type = agent_type
        self.decisions: list[str] = []
        self.tool_calls = 0
        self.observed = 0
        self.stop: GuardStop | None = None
        label = f"{agent_id} ({agent_type})" if agent_type else agent_id
        self.actions = ActionLog(route, agent=label if agent_id != MAIN else None)
        self.started = now

    def settled(self, handled: Handled, mode: GuardMode) -> None:
        """Record the batch the event settled (if any): its decision, its calls, a stop."""
        settled = handled.settled
        if settled is None or settled.batch is None:
            return
        batch = settled.batch
        self.tool_calls += len(batch.admission.executable)
        self.observed += len(batch.settled())
        action = settled.action
        ordinal = settled.protection.batches
        step = action.guard_step if isinstance(action, Continue | Stop) else None
        if step is not None:
            kind = step.decision.kind
            self.decisions.append(kind.value)
            self.actions.decided(kind, mode, batch=ordinal, loop_type=LOOP_REPEATED_TOOL_FAILURE)
        if isinstance(action, Stop):
            stop = GuardStop.of(action, settled.protection)
            if self.agent_id != MAIN:
                stop = attrs.evolve(
                    stop, agent_id=self.agent_id, agent_type=self.agent_type or None
                )
            self.stop = stop
            self.actions.decided(DecisionKind.STOP, mode, batch=ordinal, loop_type=action.loop_type)

    def report(
        self, mode: GuardMode, session: PromptSession, subagents: tuple[RunReport, ...] = ()
    ) -> RunReport:
        return RunReport(
            mode=mode,
            decisions=tuple(self.decisions),
            batches=session.protection.batches,
            tool_calls=self.tool_calls,
            observed=self.observed,
            stop=self.stop,
            agent_id=self.agent_id or None,
            agent_type=(self.agent_type or None) if self.agent_id else None,
            subagents=subagents,
        )


def empty_report(mode: GuardMode) -> RunReport:
    """The report of a session the guard never saw an event of."""
    return RunReport(mode=mode, decisions=(), batches=0, tool_calls=0, observed=0, stop=None)


class SessionGuard:
    """One session: its agent loops' guards (the hooks' own :class:`SessionLoops`) and
    each loop's record of its current prompt."""

    def __init__(self, mode: GuardMode, route: str) -> None:
        self.mode = mode
        self.route = route
        self.loops = SessionLoops(mode)
        self.records: dict[str, LoopRecord] = {}

    def record(
        self,
        loop_id: str,
        agent_type: str,
        before: tuple[str | None, int] | None,
        now: float,
    ) -> LoopRecord:
        """The loop's record after an event; fresh when the event began a new prompt of the
        loop (``before``: the loop's prompt id and batches before the event, None: new)."""
        session = self.loops.get(loop_id)
        record = self.records.get(loop_id)
        after = (session.prompt_id, len(session.batches)) if session is not None else None
        began = before is None or after is None or after[0] != before[0] or after[1] < before[1]
        if record is None or began:
            record = LoopRecord(self.route, now, loop_id, agent_type)
        self.records.pop(loop_id, None)
        self.records[loop_id] = record
        if len(self.records) > len(self.loops):  # a loop the session dropped past its bound
            kept = set(self.loops.ids())
            self.records = {key: value for key, value in self.records.items() if key in kept}
        return record

    def report(self) -> RunReport:
        """The report of the session's current prompt: the main agent's, with its subagents'."""
        main = self.loops.get(MAIN)
        prompt_id = main.prompt_id if main is not None else None
        current = sorted(
            (
                (record, session)
                for loop_id, record in self.records.items()
                if loop_id != MAIN
                and (session := self.loops.get(loop_id)) is not None
                and session.prompt_id == prompt_id
            ),
            key=lambda pair: pair[0].started,  # in the order they began
        )
        subagents = tuple(record.report(self.mode, session) for record, session in current)
        own = self.records.get(MAIN)
        if main is None or own is None:
            return attrs.evolve(empty_report(self.mode), subagents=subagents)
        return own.report(self.mode, main, subagents)


class Sessions:
    """The live sessions by id (least recently active first) and the finished ones' reports.

    Guarded by a lock: an application may run queries on several threads, each
    with its own event loop, against one guard.
    """

    def __init__(
        self,
        mode: GuardMode,
        route: str,
        *,
        max_live: int = MAX_LIVE,
        max_finished: int = MAX_FINISHED,
    ) -> None:
        self.mode = mode
        self._route = route
        self._max_live = max_live
        self._max_finished = max_finished
        self._live: OrderedDict[str, SessionGuard] = OrderedDict()
        self._finished: OrderedDict[str, RunReport] = OrderedDict()
        self._lock = threading.Lock()
        #: the session of the last event handled (the default of ``report_of()``)
        self.last: str | None = None

    def __len__(self) -> int:
        """How many sessions are live (their guard held in memory)."""
        return len(self._live)

    @property
    def finished(self) -> int:
        """How many finished sessions' reports are kept."""
        return len(self._finished)

    def live(self, session_id: str) -> SessionGuard:
        """The session's prompt, made when it is new; the least recently active past the
        bound is ended."""
        with self._lock:
            self.last = session_id
            prompt = self._live.get(session_id)
            if prompt is not None:
                self._live.move_to_end(session_id)
                return prompt
            self._finished.pop(session_id, None)  # a session resumed after its query ended
            prompt = self._live[session_id] = SessionGuard(self.mode, self._route)
            while len(self._live) > self._max_live:
                oldest, ended = self._live.popitem(last=False)
                self._keep(oldest, ended.report())
            return prompt

    def end(self, session_id: str) -> RunReport | None:
        """Release the session's live state; its report (None: never seen) stays readable."""
        with self._lock:
            prompt = self._live.pop(session_id, None)
            if prompt is None:
                return self._finished.get(session_id)
            report = prompt.report()
            self._keep(session_id, report)
            return report

    def report(self, session_id: str) -> RunReport | None:
        """The report of the session's current (or last) prompt, live or finished."""
        with self._lock:
            prompt = self._live.get(session_id)
            if prompt is not None:
                return prompt.report()
            return self._finished.get(session_id)

    def _keep(self, session_id: str, report: RunReport) -> None:
        self._finished[session_id] = report
        self._finished.move_to_end(session_id)
        while len(self._finished) > self._max_finished:
            self._finished.popitem(last=False)
