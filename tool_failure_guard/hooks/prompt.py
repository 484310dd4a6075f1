"""One session's current prompt as a hook host keeps it, and its reduction by the one core.

A hook process lives for one event, so it cannot keep a
:class:`~tool_failure_guard.core.PromptProtection` alive from batch to batch.
It keeps the prompt's *settled batches* instead (each call's two outcome axes
and error type, never its text) and rebuilds the protection by replaying them
through the core before it reduces the new batch
(:mod:`~tool_failure_guard.hooks.replay`): the decisions are the core's, and no
rule is written again here.  A host that lives as long as the session (the
Claude Agent SDK adapter) keeps the rebuilt protection and replays nothing.

:class:`PromptSession` is the state of one session: the prompt it is in, the
per-call records since the last settled batch (what the CLI's per-call hooks
saw, in the CLI module's own JSON form: they run before the batch's hook), and
the settled batches.  A new prompt starts a fresh guard.  This module imports
no core: a per-call event never loads it, which is most of a hook's cost.
:meth:`PromptSession.from_state` reads what :meth:`PromptSession.to_state`
wrote and raises :class:`StateDamaged` for anything else, which the caller
turns into a reset.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

# no `typing` at run time: the hook's start-up is its cost (TYPE_CHECKING as mypy reads it)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Final

    from tool_failure_guard.core import CallOutcome, PromptProtection
    from tool_failure_guard.hooks.replay import Settled

#: The most batches one prompt's state keeps; a longer prompt starts its streak over.
MAX_BATCHES: Final = 2000
#: The most calls one batch may carry (a bigger batch is refused as bad input).
MAX_CALLS_PER_BATCH: Final = 1000
#: The most per-call records kept before their batch settles.
MAX_PENDING: Final = 1000


class StateDamaged(ValueError):
    """A stored prompt state is not what :meth:`PromptSession.to_state` writes."""


class PromptSession:
    """One session's current prompt: id, per-call records, settled batches."""

    def __init__(self, mode: str) -> None:
        self.mode = str(mode)  #: a guard mode's name (``shadow``, ``warn``, ``enforce``)
        self.prompt_id: str | None = None
        #: call id -> what the CLI's per-call hook recorded (JSON values)
        self.pending: dict[str, list[Any]] = {}
        #: call id -> when its record was kept (epoch s; :meth:`expire` drops old ones)
        self.pending_at: dict[str, float] = {}
        #: the settled batches, each call as :func:`~tool_failure_guard.hooks.replay.encode`
        self.batches: list[list[list[Any]]] = []
        self._protection: PromptProtection | None = None

    # -- the prompt ------------------------------------------------------------------

    def enter_prompt(self, prompt_id: str | None) -> bool:
        """Be in prompt ``prompt_id``; a different one starts a fresh guard (True).

        None (an event without a prompt id) stays in the current prompt.
        """
        if prompt_id is None or prompt_id == self.prompt_id:
            return False
        self.new_prompt(prompt_id)
        return True

    def new_prompt(self, prompt_id: str | None) -> None:
        """A fresh guard: the previous prompt's records and batches are dropped."""
        self.prompt_id = prompt_id
        self.pending = {}
        self.pending_at = {}
        self.batches = []
        self._protection = None

    def record(self, call_id: str, record: list[Any]) -> None:
        """What a per-call hook saw of ``call_id``, kept until its batch settles."""
        if len(self.pending) >= MAX_PENDING and call_id not in self.pending:
            raise ValueError(f"more than {MAX_PENDING} per-call records without a settled batch")
        self.pending[call_id] = record

    def take(self, call_id: str) -> list[Any] | None:
        self.pending_at.pop(call_id, None)
        return self.pending.pop(call_id, None)

    def drop_pending(self) -> None:
        """Forget every per-call record (their batch settled or never will)."""
        self.pending = {}
        self.pending_at = {}

    def expire(self, now: float, max_age_s: float) -> None:
        """Stamp new per-call records with ``now``; drop those older than ``max_age_s``.

        A record whose batch never settles (an interrupted or refused batch, a crash)
        holds a failure's error text: it is kept no longer than the bound.  A record
        dropped before its batch settles reads as a success there: the streak resets,
        never a wrong stop.
        """
        stamps = {call_id: self.pending_at.get(call_id, now) for call_id in self.pending}
        old = [call_id for call_id, at in stamps.items() if not 0 <= now - at <= max_age_s]
        for call_id in old:
            del self.pending[call_id]
            del stamps[call_id]
        self.pending_at = stamps

    # -- the reduction (loads the core) ---------------------------------------------------

    @property
    def protection(self) -> PromptProtection:
        """The prompt's protection: kept, or rebuilt by replaying the stored batches."""
        protection = self._protection
        if protection is None:
            from tool_failure_guard.hooks.replay import replayed

            protection = self._protection = replayed(self.mode, self.batches)
        return protection

    def settle(self, outcomes: Sequence[CallOutcome]) -> Settled:
        """Reduce one settled batch by the core (a prompt already stopped stays stopped)."""
        from tool_failure_guard.hooks.replay import Settled, encode, reduce

        if len(outcomes) > MAX_CALLS_PER_BATCH:
            raise ValueError(
                f"a batch of {len(outcomes)} calls is more than the bound {MAX_CALLS_PER_BATCH}"
            )
        protection = self.protection
        stopped = protection.stopped
        if stopped is not None:
            return Settled(action=stopped, protection=protection, batch=None)
        if len(self.batches) >= MAX_BATCHES:
            # the streak starts over rather than the state growing without bound
            self.new_prompt(self.prompt_id)
            protection = self.protection
        action, batch = reduce(protection, outcomes)
        self.batches.append([encode(outcome) for outcome in outcomes])
        return Settled(action=action, protection=protection, batch=batch)

    # -- the stored form -----------------------------------------------------------------

    def to_state(self) -> dict[str, Any]:
        return {
            "prompt_id": self.prompt_id,
            "pending": self.pending,
            "pending_at": self.pending_at,
            "batches": self.batches,
        }

    @classmethod
    def from_state(cls, mode: str, state: Mapping[str, Any]) -> PromptSession:
        """The session :meth:`to_state` stored; {} is a new session."""
        session = cls(mode)
        if not state:
            return session
        prompt_id = state.get("prompt_id")
        pending = state.get("pending")
        batches = state.get("batches")
        if prompt_id is not None and not isinstance(prompt_id, str):
            raise StateDamaged("the stored prompt id is not text")
        if not isinstance(pending, dict) or not isinstance(batches, list):
            raise StateDamaged("the stored per-call records or batches are of the wrong kind")
        if len(batches) > MAX_BATCHES or len(pending) > MAX_PENDING:
            raise StateDamaged("the stored state is past its bounds")
        if not all(isinstance(record, list) for record in pending.values()):
            raise StateDamaged("a stored per-call record is not a list")
        stamps = state.get("pending_at") or {}
        if not isinstance(stamps, dict) or not all(
            isinstance(at, int | float) and not isinstance(at, bool) for at in stamps.values()
        ):
            raise StateDamaged("the stored per-call record times are not numbers")
        for batch in batches:
            if not isinstance(batch, list) or len(batch) > MAX_CALLS_PER_BATCH:
                raise StateDamaged("a stored batch is not a list of calls within the bound")
            for row in batch:
                _check_row(row)
        session.prompt_id = prompt_id
        session.pending = pending
        session.pending_at = {k: float(v) for k, v in stamps.items() if k in pending}
        session.batches = batches
        return session


_FIELDS: Final = 8


def _check_row(row: Any) -> None:
    """Raise :class:`StateDamaged` unless ``row`` is a stored call (``replay.encode``'s form)."""
    if not isinstance(row, list) or len(row) != _FIELDS:
        raise StateDamaged(f"a stored call is not a list of {_FIELDS} fields")
    if not all(value is None or isinstance(value, str) for value in row):
        raise StateDamaged("a stored call has a field that is neither text nor null")
    if not row[0] or not row[1] or not row[4] or not row[5]:
        raise StateDamaged("a stored call lacks its id, name or statuses")
