"""A session's agent loops: one guard per loop, the main agent's and each subagent's.

Claude Code (and Qwen Code) run subagents inside the session: their hook events
carry the parent's ``session_id`` and ``prompt_id`` plus the subagent's
``agent_id``; the main agent's events carry none.  The guard's unit is one
agent loop's prompt (:class:`~tool_failure_guard.hooks.prompt.PromptSession`):
a subagent's failures never count for the parent or a sibling, the reminder
goes to the loop whose own streak reached it, and a stop ends that loop only.

A subagent stopped by the guard tells nobody by itself (Claude Code hands the
parent "(Subagent completed but returned no output.)"), so its stop leaves a
*notice* for the main loop: the main loop's next answerable event (a
``PostToolBatch``, or a ``UserPromptSubmit`` such as a background agent's
``<task-notification>``) answers the guard's stop text as ``additionalContext``,
naming the subagent.  The notice changes nothing in the main loop's own streak.

:class:`SessionLoops` holds them (bounded: :data:`MAX_LOOPS` loops, the least
recently used dropped) and :func:`handle_event` routes one event to its loop.
A host that lives as long as the session keeps a :class:`SessionLoops` in
memory; the command hook stores :meth:`SessionLoops.to_state` in the session's
state file (:mod:`tool_failure_guard.hooks.run`).  No core is imported here.
"""

from __future__ import annotations

from collections.abc import Mapping

from tool_failure_guard.hooks.events import Handled
from tool_failure_guard.hooks.prompt import PromptSession, StateDamaged

# no `typing` at run time: the hook's start-up is its cost (TYPE_CHECKING as mypy reads it)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Final, Protocol

    class CliModule(Protocol):
        """What :func:`handle_event` needs of a CLI module (``hooks.claude_code`` and kin)."""

        def handle(self, payload: Mapping[str, Any], session: PromptSession) -> Handled: ...


#: The loop id of the main agent (its events carry no ``agent_id``).
MAIN: Final = ""
#: The most loops one session keeps; past it the least recently used subagent's goes (the
#: main loop's is kept).
MAX_LOOPS: Final = 64
#: The most notices kept for the main loop (older ones go first).
MAX_NOTICES: Final = 16
#: A per-call record whose batch has not settled after this long (15 min) is dropped.
PENDING_MAX_AGE_S: Final = 900.0
#: The most characters of an ``agent_id`` / ``agent_type`` read from a payload.
_MAX_NAME: Final = 512
#: The events of the main loop whose answer reaches its model (where notices go), per CLI
#: module's ``NOTICE_EVENTS``; a module without it has none.
_NOTICE_EVENTS_ATTR: Final = "NOTICE_EVENTS"


def _name(payload: Mapping[str, Any], field: str) -> str:
    value = payload.get(field)
    if not isinstance(value, str):
        return ""
    return value[:_MAX_NAME]


def loop_id_of(payload: Mapping[str, Any]) -> str:
    """The event's loop: its ``agent_id`` (a subagent), or :data:`MAIN`."""
    return _name(payload, "agent_id")


def notice_text(agent_id: str, agent_type: str, stop_text: str, *, ended: bool = True) -> str:
    """What the main loop's model is told of a subagent the guard stopped (``ended``: the
    CLI ended it, as Claude Code does; else it was only told the stop text, as in Qwen Code)."""
    kind = f" ({agent_type})" if agent_type else ""
    if ended:
        return (
            f"tool-failure-guard stopped the subagent {agent_id}{kind}; "
            f"its result is empty because of this stop: {stop_text}"
        )
    return (
        f"tool-failure-guard stopped the subagent {agent_id}{kind} (told to stop; this CLI "
        f"lets no hook end it, so it may have gone on): {stop_text}"
    )


class SessionLoops:
    """One session's agent loops (loop id -> its prompt's guard) and the main loop's notices."""

    __slots__ = ("_loops", "_started", "mode", "notices")

    def __init__(self, mode: str) -> None:
        self.mode = str(mode)
        #: loop id -> its guard, the most recently used last
        self._loops: dict[str, PromptSession] = {}
        #: loop id -> [its prompt id, when that prompt started (epoch s)]: telemetry's wall time
        self._started: dict[str, tuple[str, float]] = {}
        #: the texts waiting for the main loop's next answerable event
        self.notices: list[str] = []

    def __len__(self) -> int:
        return len(self._loops)

    def ids(self) -> list[str]:
        """The loop ids, the least recently used first."""
        return list(self._loops)

    def get(self, loop_id: str) -> PromptSession | None:
        """The loop's guard if the session has it (nothing is created or reordered)."""
        return self._loops.get(loop_id)

    @property
    def main(self) -> PromptSession:
        return self.loop(MAIN)

    def loop(self, loop_id: str) -> PromptSession:
        """The guard of ``loop_id`` (created fresh when new), now the most recently used."""
        session = self._loops.pop(loop_id, None)
        if session is None:
            session = PromptSession(self.mode)
        self._loops[loop_id] = session
        if len(self._loops) > MAX_LOOPS:  # the least recently used subagent's loop goes
            oldest = next(key for key in self._loops if key not in (MAIN, loop_id))
            del self._loops[oldest]
            self._started.pop(oldest, None)
        return session

    def started(self, loop_id: str, now: float) -> float:
        """When the loop's current prompt started; ``now`` for a prompt not seen before."""
        session = self._loops.get(loop_id)
        prompt_id = (session.prompt_id if session is not None else None) or ""
        stored = self._started.get(loop_id)
        if stored is None or stored[0] != prompt_id:
            self._started[loop_id] = (prompt_id, now)
            return now
        return stored[1]

    def expire(self, now: float, max_age_s: float = PENDING_MAX_AGE_S) -> None:
        """Every loop's per-call records: new ones stamped, old ones dropped."""
        for session in self._loops.values():
            session.expire(now, max_age_s)

    # -- notices ------------------------------------------------------------------------

    def notify(self, text: str) -> None:
        """Keep ``text`` for the main loop's next answerable event."""
        self.notices = [*self.notices, text][-MAX_NOTICES:]

    def take_notices(self) -> list[str]:
        notices, self.notices = self.notices, []
        return notices

    # -- the stored form ----------------------------------------------------------------

    def to_state(self) -> dict[str, Any]:
        return {
            "order": list(self._loops),
            "loops": {loop_id: session.to_state() for loop_id, session in self._loops.items()},
            "started": {k: list(v) for k, v in self._started.items()},
            "notices": list(self.notices),
        }

    @classmethod
    def from_state(cls, mode: str, state: Any) -> SessionLoops:
        """The loops :meth:`to_state` stored ({} or None: none yet); :class:`StateDamaged` else."""
        loops = cls(mode)
        if not state:
            return loops
        if not isinstance(state, dict):
            raise StateDamaged("the stored loops are not an object")
        order, stored = state.get("order"), state.get("loops")
        started, notices = state.get("started") or {}, state.get("notices") or []
        if not isinstance(order, list) or not isinstance(stored, dict):
            raise StateDamaged("the stored loops lack their order or their guards")
        if len(stored) > MAX_LOOPS or set(order) != set(stored) or len(order) != len(stored):
            raise StateDamaged("the stored loops' order does not match their guards")
        if not isinstance(notices, list) or len(notices) > MAX_NOTICES:
            raise StateDamaged("the stored notices are not a bounded list")
        if not all(isinstance(text, str) for text in notices):
            raise StateDamaged("a stored notice is not text")
        if not isinstance(started, dict):
            raise StateDamaged("the stored start times are not an object")
        for loop_id in order:
            if not isinstance(loop_id, str) or len(loop_id) > _MAX_NAME:
                raise StateDamaged("a stored loop id is not short text")
            loops._loops[loop_id] = PromptSession.from_state(mode, stored[loop_id])
        for loop_id, item in started.items():
            if loop_id not in stored:
                continue
            if (
                not isinstance(item, list)
                or len(item) != 2
                or not isinstance(item[0], str)
                or not isinstance(item[1], int | float)
            ):
                raise StateDamaged("a stored start time is not [prompt id, time]")
            loops._started[loop_id] = (item[0], float(item[1]))
        loops.notices = list(notices)
        return loops


def handle_event(module: CliModule, payload: Mapping[str, Any], loops: SessionLoops) -> Handled:
    """The meaning of one event: ``module.handle`` against the event's own loop.

    A subagent's newly decided stop (the core's ``Stop``, however the CLI module
    answers it to the subagent) leaves a notice for the main loop; the main
    loop's next event among the module's ``NOTICE_EVENTS`` answers the notices
    as ``additionalContext`` (beside its own reminder, if any; a stop of the main
    loop itself is answered as it is, and the notices are dropped with the run).
    """
    loop_id = loop_id_of(payload)
    session = loops.loop(loop_id)
    handled = module.handle(payload, session)
    event = payload.get("hook_event_name")
    if loop_id != MAIN:
        settled = handled.settled
        # a stop decided now (not a stored one answered again): the main loop is told
        if settled is not None and settled.batch is not None:
            from tool_failure_guard.core import Stop

            if isinstance(settled.action, Stop):
                ended = getattr(module, "SUBAGENT_STOP_ENDS_IT", True) is True
                agent_type = _name(payload, "agent_type")
                text = notice_text(loop_id, agent_type, settled.action.shown_text, ended=ended)
                loops.notify(text)
        return handled
    if not loops.notices or event not in getattr(module, _NOTICE_EVENTS_ATTR, ()):
        return handled
    notices = loops.take_notices()
    answer = handled.answer
    if answer is not None and answer.get("continue") is False:
        return handled  # the main loop itself stops: no request left to tell
    texts = list(notices)
    if answer is not None:
        specific = answer.get("hookSpecificOutput")
        context = specific.get("additionalContext") if isinstance(specific, dict) else None
        if isinstance(context, str) and context:
            texts = [context, *texts]
    context = "\n\n".join(texts)
    merged = {"hookSpecificOutput": {"hookEventName": event, "additionalContext": context}}
    return Handled(answer=merged, settled=handled.settled, prompt_ended=handled.prompt_ended)
