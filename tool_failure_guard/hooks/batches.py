"""A prompt's settled batches as a hook keeps them, and their reduction by the one core.

A command hook is a fresh process per event, so the guard's state between
events lives in a file.  What is kept is not the guard's internals but what
the CLI reported: each settled batch's calls, each with its two axes
(:class:`RecordedCall`).  On every batch boundary the hook replays the whole
prompt through a fresh :class:`~tool_failure_guard.core.PromptProtection` and
acts on the last batch's action, so the statechart, the protections and their
order are exactly the core's: no rule is written again here.  A prompt holds
at most :data:`MAX_CALLS` calls (past the tool-call cap by far); a state past
that, or one that does not parse, is refused with :class:`ValueError` and the
host resets the streak.  Sans-IO: JSON-shaped values in, values out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import attrs

from tool_failure_guard.agent_outcomes.claude_code import Outcome
from tool_failure_guard.core import Action, CallOutcome, FunctionCall, PromptProtection
from tool_failure_guard.core.actions import Continue, Stop
from tool_failure_guard.core.outcomes import provider_duplicate, skipped_by_cap
from tool_failure_guard.guard import GuardMode

#: The most calls one prompt's state keeps (the default tool-call cap is 100).
MAX_CALLS: Final = 2000
#: The longest call id or tool name kept (characters).
MAX_NAME: Final = 256
STATE_VERSION: Final = 1


@attrs.frozen(kw_only=True)
class RecordedCall:
    """One settled call as a hook saw it: its id, tool and the outcome's two axes."""

    call_id: str
    tool: str
    status: str
    execution_status: str
    error_type: str | None

    @classmethod
    def of(cls, call_id: str, tool: str, outcome: Outcome) -> RecordedCall:
        return cls(
            call_id=call_id[:MAX_NAME],
            tool=tool[:MAX_NAME],
            status=str(outcome.status),
            execution_status=str(outcome.execution_status),
            error_type=outcome.error_type,
        )

    def to_json(self) -> list[Any]:
        return [self.call_id, self.tool, self.status, self.execution_status, self.error_type]

    @classmethod
    def from_json(cls, item: Any) -> RecordedCall:
        if not (isinstance(item, list) and len(item) == 5):
            raise ValueError("a recorded call must be [id, tool, status, execution, error_type]")
        call_id, tool, status, execution, error_type = item
        if not all(isinstance(x, str) for x in (call_id, tool, status, execution)) or not (
            error_type is None or isinstance(error_type, str)
        ):
            raise ValueError("a recorded call holds strings (error_type: a string or null)")
        return cls(
            call_id=call_id[:MAX_NAME],
            tool=tool[:MAX_NAME],
            status=status,
            execution_status=execution,
            error_type=error_type,
        )


@attrs.frozen(kw_only=True)
class PromptState:
    """One prompt's record: its key, its settled batches, the batch still open, the stop."""

    key: str
    batches: tuple[tuple[RecordedCall, ...], ...] = ()
    open: tuple[RecordedCall, ...] = ()
    stopped: bool = False

    @property
    def calls(self) -> int:
        return sum(len(b) for b in self.batches) + len(self.open)

    def record(self, call: RecordedCall) -> PromptState:
        """``call`` added to the open batch (a repeated id replaces the earlier report)."""
        if self.calls >= MAX_CALLS:
            raise ValueError(f"a prompt's state holds at most {MAX_CALLS} calls")
        kept = tuple(c for c in self.open if c.call_id != call.call_id)
        return attrs.evolve(self, open=(*kept, call))

    def settle(self) -> PromptState:
        """The open batch closed (settled); an empty one is no batch."""
        if not self.open:
            return self
        return attrs.evolve(self, batches=(*self.batches, self.open), open=())

    def to_json(self) -> dict[str, Any]:
        return {
            "version": STATE_VERSION,
            "key": self.key,
            "batches": [[c.to_json() for c in batch] for batch in self.batches],
            "open": [c.to_json() for c in self.open],
            "stopped": self.stopped,
        }

    @classmethod
    def from_json(cls, data: Any) -> PromptState:
        if not isinstance(data, dict) or data.get("version") != STATE_VERSION:
            raise ValueError(f"a prompt state is an object with version {STATE_VERSION}")
        key, batches, open_, stopped = (data.get(k) for k in ("key", "batches", "open", "stopped"))
        if not isinstance(key, str) or not isinstance(batches, list) or not isinstance(open_, list):
            raise ValueError("a prompt state holds a key, batches and an open batch")
        if not all(isinstance(b, list) for b in batches) or not isinstance(stopped, bool):
            raise ValueError("a prompt state's batches are lists; stopped is a boolean")
        state = cls(
            key=key[:MAX_NAME],
            batches=tuple(tuple(RecordedCall.from_json(c) for c in b) for b in batches),
            open=tuple(RecordedCall.from_json(c) for c in open_),
            stopped=stopped,
        )
        if state.calls > MAX_CALLS:
            raise ValueError(f"a prompt's state holds at most {MAX_CALLS} calls")
        return state


def _outcome(call: RecordedCall) -> CallOutcome:
    return CallOutcome(
        call_id=call.call_id,
        name=call.tool,
        policy_tool_name=call.tool,
        tool_type="mcp" if call.tool.startswith("mcp__") else "native",
        terminal_status=call.status,
        execution_status=call.execution_status,
        execution_error_type=call.error_type,
        error_type=call.error_type,
    )


def protection(mode: GuardMode) -> PromptProtection:
    """The run's protection as a coding-CLI hook hosts it: its limits follow the mode.

    ``off`` consults no protection, ``shadow`` consults them all and acts on none
    (a stop it would have made is :attr:`PromptProtection.would_stop`).
    """
    return PromptProtection(mode, limits_follow_mode=True)


def reduce(mode: GuardMode, batches: Sequence[Sequence[RecordedCall]]) -> Action | None:
    """Replay ``batches`` through a fresh protection: the action of the last one (or a stop)."""
    run = protection(mode)
    action: Action | None = None
    for recorded in batches:
        by_id = {c.call_id: c for c in recorded}
        admission = run.admit([FunctionCall(call_id=c.call_id, name=c.tool) for c in recorded])
        batch = run.open_batch(admission)
        for fc in admission.calls:
            if fc.call_id in admission.provider_duplicates:
                batch.settle(provider_duplicate(fc, tool=fc.name))
            elif fc.call_id in admission.over_cap:
                batch.settle(skipped_by_cap(fc, tool=fc.name))
            else:
                batch.settle(_outcome(by_id[fc.call_id]))
        action = run.after_batch(batch)
        if isinstance(action, Stop):
            return action
    return action


def reminds(action: Action | None) -> bool:
    """The action puts the reminder into the next request."""
    return isinstance(action, Continue) and bool(action.system_texts)
