"""``stop_of(result)`` and ``report_of(result)``: what the guard did in the run behind a result.

A guarded run leaves its :class:`~tool_failure_guard.integrations._api.RunReport`
here, under the run's ``run_id``, for as long as the run's state is alive (the
entry leaves with the run's usage object, which every view of the run shares):
``AgentRunResult``, ``StreamedRunResult``, ``AgentRun`` and ``RunCancelled``
all name their run by ``run_id``.  A run that raised
:class:`ProtectionStopped` carries its report on the exception.
"""

from __future__ import annotations

import contextlib
import weakref
from typing import TYPE_CHECKING, Any

import attrs

from tool_failure_guard.integrations._api import GuardStop, RunReport, attached_report
from tool_failure_guard.integrations.pydantic_ai._stop import ProtectionStop, ProtectionStopped

if TYPE_CHECKING:  # pragma: no cover
    from tool_failure_guard.core import Action


@attrs.frozen
class Finished:
    """What one guarded run left: its report (and, for tests that ask, each batch's action)."""

    report: RunReport
    actions: tuple[Action, ...]


#: run id -> what the run left; an entry leaves when the run's state is collected.
_FINISHED: dict[str, Finished] = {}


def remember(run_id: str, finished: Finished, anchor: object) -> None:
    """Keep ``finished`` under ``run_id`` while ``anchor`` (the run's state) lives."""
    _FINISHED[run_id] = finished
    with contextlib.suppress(TypeError):  # an anchor that cannot be weakly referenced
        weakref.finalize(anchor, _forget, run_id, finished)


def _forget(run_id: str, finished: Finished) -> None:
    if _FINISHED.get(run_id) is finished:  # a later run reusing the id keeps its own entry
        del _FINISHED[run_id]


def finished_of(result: Any) -> Finished | None:
    """What the guarded run behind ``result`` left (None: no guarded run known by its id)."""
    run_id = getattr(result, "run_id", None)
    return _FINISHED.get(run_id) if isinstance(run_id, str) else None


def report_of(result: Any) -> RunReport | None:
    """The guard's :class:`RunReport` of the run behind ``result``, in every mode.

    ``result``: what a run returned (``AgentRunResult``, ``StreamedRunResult``,
    the ``AgentRun`` of ``agent.iter``), the :class:`ProtectionStopped` it raised,
    or another error that ended it (pydantic-ai's own ``UsageLimitExceeded``,
    ``UnexpectedModelBehavior``).  None when no guarded run is known for it.
    """
    if isinstance(result, ProtectionStopped):
        return result.report
    attached = attached_report(result)
    if attached is not None:
        return attached
    finished = finished_of(result)
    return finished.report if finished is not None else None


def stop_of(result: Any) -> GuardStop | None:
    """The typed stop of the run behind ``result``: None unless a protection stopped it.

    Accepts what :func:`report_of` accepts, and a run's output
    (``stop_of(result.output)``: the :class:`ProtectionStop` of ``on_stop="end"``).
    """
    if isinstance(result, ProtectionStop):
        return result.stop
    if isinstance(result, ProtectionStopped):
        return result.stop
    report = report_of(result)
    return report.stop if report is not None else None
