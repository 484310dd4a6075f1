"""The Claude Agent SDK adapter's sessions in memory: each its own, none kept without bound.

One :class:`~tool_failure_guard.integrations.claude_agent_sdk.RepeatedToolFailureHooks`
serves every query of an application, often several at once (the documented
module-level object).  Each hook event names its session (``session_id``), and
the guard of that session is the only one it touches: one query's failures,
reminder or stop never reach another's.

A session is *live* while its query runs: its prompt's
:class:`~tool_failure_guard.hooks.prompt.PromptSession` with the live protection.
When :meth:`Sessions.end` is called (``RepeatedToolFailureHooks.query`` does at
its stream's end) the live state is released and only the session's final
:class:`~tool_failure_guard.integrations._api.RunReport` is kept, among at most
:data:`MAX_FINISHED` reports.  Hooks wired by the application itself have no
query end to hear: there at most :data:`MAX_LIVE` sessions stay live, and the
least recently active one past that bound is ended (its report kept) as if its
query had ended.  A long-lived server therefore holds a bounded number of
sessions whatever it runs.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Final

from tool_failure_guard.guard import GuardMode
from tool_failure_guard.hooks.prompt import PromptSession
from tool_failure_guard.integrations._api import ActionLog, GuardStop, RunReport

#: The most sessions kept live (hooks wired by the application, whose query end is not heard).
MAX_LIVE: Final = 1000
#: The most finished sessions whose report is kept (for ``report_of(session_id)``).
MAX_FINISHED: Final = 1000


class Prompt:
    """One session's current prompt: its guard and what the application reads afterwards."""

    def __init__(self, mode: GuardMode, route: str, clock: Callable[[], float]) -> None:
        self.session = PromptSession(mode)
        self.route = route
        self.decisions: list[str] = []
        self.tool_calls = 0
        self.observed = 0
        self.stop: GuardStop | None = None
        self.actions = ActionLog(route)
        self.started = clock()

    def fresh(self, clock: Callable[[], float]) -> None:
        """A new prompt of the session: its report starts over with its guard."""
        self.decisions, self.tool_calls, self.observed, self.stop = [], 0, 0, None
        self.actions = ActionLog(self.route)
        self.started = clock()

    def report(self, mode: GuardMode) -> RunReport:
        return RunReport(
            mode=mode,
            decisions=tuple(self.decisions),
            batches=self.session.protection.batches,
            tool_calls=self.tool_calls,
            observed=self.observed,
            stop=self.stop,
        )


def empty_report(mode: GuardMode) -> RunReport:
    """The report of a session the guard never saw an event of."""
    return RunReport(mode=mode, decisions=(), batches=0, tool_calls=0, observed=0, stop=None)


class Sessions:
    """The live sessions by id (least recently active first) and the finished ones' reports.

    Guarded by a lock: an application may run queries on several threads, each
    with its own event loop, against one guard.
    """

    def __init__(
        self,
        mode: GuardMode,
        route: str,
        clock: Callable[[], float],
        *,
        max_live: int = MAX_LIVE,
        max_finished: int = MAX_FINISHED,
    ) -> None:
        self.mode = mode
        self._route = route
        self._clock = clock
        self._max_live = max_live
        self._max_finished = max_finished
        self._live: OrderedDict[str, Prompt] = OrderedDict()
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

    def live(self, session_id: str) -> Prompt:
        """The session's prompt, made when it is new; the least recently active past the
        bound is ended."""
        with self._lock:
            self.last = session_id
            prompt = self._live.get(session_id)
            if prompt is not None:
                self._live.move_to_end(session_id)
                return prompt
            self._finished.pop(session_id, None)  # a session resumed after its query ended
            prompt = self._live[session_id] = Prompt(self.mode, self._route, self._clock)
            while len(self._live) > self._max_live:
                oldest, ended = self._live.popitem(last=False)
                self._keep(oldest, ended.report(self.mode))
            return prompt

    def end(self, session_id: str) -> RunReport | None:
        """Release the session's live state; its report (None: never seen) stays readable."""
        with self._lock:
            prompt = self._live.pop(session_id, None)
            if prompt is None:
                return self._finished.get(session_id)
            report = prompt.report(self.mode)
            self._keep(session_id, report)
            return report

    def report(self, session_id: str) -> RunReport | None:
        """The report of the session's current (or last) prompt, live or finished."""
        with self._lock:
            prompt = self._live.get(session_id)
            if prompt is not None:
                return prompt.report(self.mode)
            return self._finished.get(session_id)

    def _keep(self, session_id: str, report: RunReport) -> None:
        self._finished[session_id] = report
        self._finished.move_to_end(session_id)
        while len(self._finished) > self._max_finished:
            self._finished.popitem(last=False)
