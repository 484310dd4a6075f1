"""One in-process :class:`GuardedSession` over the built-in tools, for the loop-level tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tool_failure_guard.guard import GuardMode
from tool_failure_guard.session.config.declared_boundary import BoundaryKind
from tool_failure_guard.session.persistence.history import HistoryStore
from tool_failure_guard.session.pipeline.drain import MidTurnInput
from tool_failure_guard.session.pipeline.session import GuardedSession, SessionOptions
from tool_failure_guard.session.tools.builtin import ToolContext, default_tools
from tool_failure_guard.session.tools.executor import Executor
from tool_failure_guard.telemetry.sink import GuardTelemetry, NullTelemetry

SESSION_ID = "s1"


def in_process_session(
    store: HistoryStore,
    project: Path,
    *,
    client: Any,
    model: Any,
    mode: GuardMode,
    telemetry: GuardTelemetry | None = None,
    drain_supported: bool = True,
    drain_timeout: float | None = None,
    options: SessionOptions | None = None,
    boundary: BoundaryKind = BoundaryKind.DRAIN,
) -> GuardedSession:
    """Create session ``s1`` in ``store`` with ``project`` as its cwd, talking to ``client``.

    Without ``drain_supported`` the session has no drain method to call (a host
    without ``craft/drainMidTurnQueue``).  ``boundary`` is the operator's
    declared input boundary (``TOOL_FAILURE_GUARD_INPUT_BOUNDARY``).
    """
    store.create(SESSION_ID, str(project))
    timeout = {} if drain_timeout is None else {"timeout": drain_timeout}
    return GuardedSession(
        session_id=SESSION_ID,
        client=client,
        model=model,
        executor_factory=lambda s: Executor(
            default_tools(), ToolContext(cwd=project), s.ask_permission
        ),
        store=store,
        telemetry=telemetry or NullTelemetry(),
        mode=mode,
        drain=MidTurnInput(
            SESSION_ID,
            client.ext_method if drain_supported else None,
            declared=boundary,
            mode=mode,
            **timeout,
        ),
        options=options or SessionOptions(),
    )


def per_call_order(updates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The updates with each stretch of tool-call updates grouped by call, in call order.

    A batch's calls run concurrently, so how their updates interleave is the
    scheduler's, not the guard's; each call's own updates, and everything between
    batches, keep the order the host saw.
    """
    ordered: list[dict[str, Any]] = []
    stretch: list[dict[str, Any]] = []
    for update in [*updates, {}]:
        if "toolCallId" in update:
            stretch.append(update)
            continue
        ordered.extend(sorted(stretch, key=lambda u: str(u["toolCallId"])))
        stretch = []
        if update:
            ordered.append(update)
    return ordered
