"""The simulated parts of a fleet: the model, the tools, the host, the clock, the sink.

Everything else a simulated prompt runs through is real
(:mod:`~tool_failure_guard.rollout.simulate`).
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import attrs
from opentelemetry.sdk._logs import LogRecordProcessor, ReadWriteLogRecord

from tool_failure_guard.guard import REPEATED_TOOL_FAILURE_REMINDER, GuardMode
from tool_failure_guard.session.model.base import ModelError, ModelTurn, ModelUsage
from tool_failure_guard.session.persistence.history import HistoryStore
from tool_failure_guard.session.persistence.messages import Message, SettledCall
from tool_failure_guard.session.pipeline.session import GuardedSession
from tool_failure_guard.session.tools.builtin import ToolContext, ToolError
from tool_failure_guard.session.tools.executor import FunctionCall
from tool_failure_guard.telemetry.otlp_file import OtlpJsonLogExporter
from tool_failure_guard.telemetry.sink import OpenTelemetrySink

LOOP_BATCH = 4
#: A prompt's input boundary: the drain contract, an operator-declared plain-ACP host
#: (``prompt-only``), or a host without the drain (``unsupported``).
Boundary = Literal["drain", "prompt-only", "unsupported"]


class SimClock:
    def __init__(self, start: float) -> None:
        self.now = start

    def advance(self, seconds: float) -> None:
        self.now += max(0.0, seconds)

    def ns(self) -> int:
        return int(self.now * 1e9)


class MemoryHistory(HistoryStore):
    """History kept in memory: the simulated fleet measures the guard, not the disk."""

    def __init__(self) -> None:
        self.messages: dict[str, list[Message]] = {}

    def create(self, session_id: str, cwd: str) -> None:
        self.messages[session_id] = []

    def append(
        self, session_id: str, message: Message, *, pending_input: Sequence[str] | None = None
    ) -> None:
        self.messages.setdefault(session_id, []).append(message)

    def append_settled(self, session_id: str, settled: SettledCall) -> None:
        return None  # the batch's message carries every outcome; nothing is killed here

    def append_pending_input(self, session_id: str, texts: Sequence[str]) -> None:
        return None


@attrs.frozen
class SimTool:
    """A tool whose outcome the model chose: ``{"fail": "<error type>"}`` fails with that type."""

    name: str
    tool_type: Literal["native", "mcp"]
    clock: SimClock = attrs.field(eq=False)
    kind: Any = "read"
    needs_permission: bool = False
    description: str = "a simulated tool"
    parameters_schema: Mapping[str, Any] = attrs.field(factory=lambda: {"type": "object"}, eq=False)

    def validate(self, args: Mapping[str, Any]) -> Mapping[str, Any]:
        return dict(args)

    def title(self, args: Mapping[str, Any]) -> str:
        return self.name

    async def run(self, args: Mapping[str, Any], context: ToolContext) -> bytes:
        self.clock.advance(float(args.get("seconds", 0.2)))
        error = args.get("fail")
        if error:
            raise ToolError(str(error), "simulated failure")
        return b"ok"


class HostClient:
    """The client side: a drain-capable host answers an empty queue, an old host has none."""

    def __init__(self, supports_drain: bool) -> None:
        self.supports_drain = supports_drain

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        return None

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("simulated tools need no permission")

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if not self.supports_drain:
            from acp.exceptions import RequestError

            raise RequestError.method_not_found(method)
        return {"messages": [], "hasQueuedPrompt": False}


@attrs.frozen(kw_only=True)
class Owner:
    """One owner's latent traits: the heterogeneity that makes clustering matter."""

    owner_id: str
    treated: bool
    mode: GuardMode
    boundary: Boundary
    loop_rate: float
    recover_after_reminder: float
    error_rate: float
    cancel_rate: float
    token_scale: float
    latency_scale: float

    @property
    def supports_drain(self) -> bool:
        """Whether every input boundary is reliable (drain contract, or declared prompt-only)."""
        return self.boundary != "unsupported"


@attrs.frozen(kw_only=True)
class PromptPlan:
    kind: Literal["normal", "loop", "cancel", "error"]
    work_turns: int
    recovers: bool  # a loop: recovers after the reminder (warn/enforce) or by itself (off/shadow)
    spontaneous_after: int  # off/shadow: loop batches before a spontaneous recovery


class FleetModel:
    """A seeded stochastic model: follows one :class:`PromptPlan` per prompt."""

    def __init__(
        self, owner: Owner, rng: random.Random, clock: SimClock, calls_per_turn_max: int = 3
    ) -> None:
        self.owner = owner
        self.calls_per_turn_max = calls_per_turn_max
        self.rng = rng
        self.clock = clock
        self.session: GuardedSession | None = None
        self.plan: PromptPlan | None = None
        self._turn = 0
        self._calls = 0
        self._loop_batches = 0

    def start(self, plan: PromptPlan) -> None:
        self.plan, self._turn, self._loop_batches = plan, 0, 0

    def _usage(self) -> ModelUsage:
        latency = self.rng.lognormvariate(math.log(1.5), 0.5) * self.owner.latency_scale
        self.clock.advance(latency)
        return ModelUsage(
            input_tokens=int(self.rng.lognormvariate(math.log(3000), 0.4) * self.owner.token_scale),
            output_tokens=int(self.rng.lognormvariate(math.log(250), 0.5) * self.owner.token_scale),
            latency_s=latency,
        )

    def _call(self, tool: str, **args: Any) -> FunctionCall:
        self._calls += 1
        return FunctionCall(call_id=f"c{self._calls}", name=tool, args=args)

    async def generate(self, history: Sequence[Message]) -> ModelTurn:
        plan = self.plan
        assert plan is not None and self.session is not None
        self._turn += 1
        usage = self._usage()
        done = ModelTurn(text="done", usage=usage)
        if plan.kind == "error" and self._turn > min(1, plan.work_turns):
            raise ModelError("simulated provider failure")
        if plan.kind == "cancel" and self._turn > min(1, plan.work_turns):
            self.session.cancel()
            return ModelTurn(text="...", usage=usage)
        if plan.kind != "loop":
            if self._turn > plan.work_turns:
                return done
            calls = tuple(
                self._call("sim_read", seconds=self.rng.expovariate(4.0))
                for _ in range(self.rng.randint(1, self.calls_per_turn_max))
            )
            return ModelTurn(calls=calls, usage=usage)
        # A loop: the same tool failing for the same classified reason, batch after batch.
        last = history[-1] if history else None
        reminded = last is not None and any(
            part.text == REPEATED_TOOL_FAILURE_REMINDER for part in last.parts
        )
        if reminded and plan.recovers:
            return done
        unreminded = self.owner.mode in (GuardMode.OFF, GuardMode.SHADOW)
        if (unreminded or not self.owner.supports_drain) and (
            plan.recovers and self._loop_batches >= plan.spontaneous_after
        ):
            return done
        self._loop_batches += 1
        calls = tuple(
            self._call("sim_fetch", fail="mcp_tool_error", seconds=self.rng.expovariate(2.0))
            for _ in range(LOOP_BATCH)
        )
        return ModelTurn(calls=calls, usage=usage)


class BufferedProcessor(LogRecordProcessor):
    """Keeps an owner's records and exports them as one request at flush (one line per flush)."""

    def __init__(self, exporter: OtlpJsonLogExporter) -> None:
        self._exporter = exporter
        self._records: list[Any] = []

    def on_emit(self, log_record: ReadWriteLogRecord) -> None:
        self._records.append(log_record)

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        if self._records:
            records, self._records = self._records, []
            self._exporter.export(records)
        return True

    def shutdown(self) -> None:
        self.force_flush()


def inject_cancelled_counted(sink: OpenTelemetrySink, session: GuardedSession) -> None:
    """Test hook: a faulty producer that counted a cancelled call (an invariant violation)."""
    from tool_failure_guard.guard import (
        BatchReceipt,
        DecisionKind,
        Observation,
        RepeatedToolFailureGuard,
    )
    from tool_failure_guard.telemetry.sink import CallRecord

    prompt_id = (
        f"{session.session_id}########{sum(1 for m in session.history if m.kind == 'prompt') - 1}"
    )
    batch = 99
    sink.call_settled(
        CallRecord(
            prompt_id=prompt_id,
            batch_ordinal=batch,
            call_ordinal=0,
            terminal_status="cancelled",
            execution_status="error",
            execution_error_type="mcp_tool_error",
            tool_type="mcp",
            provider_duplicate=False,
        )
    )
    guard = RepeatedToolFailureGuard(GuardMode.SHADOW)
    receipt = BatchReceipt(
        [
            Observation(
                call_id="x",
                terminal_status="error",
                execution_status="error",
                execution_error_type="mcp_tool_error",
                policy_tool_name="t",
                tool_type="mcp",
            )
        ]
    )
    decision = guard.observe(receipt, None)
    assert decision.kind is DecisionKind.TRACKED
    sink.guard_decision(
        prompt_id=prompt_id,
        mode=GuardMode.SHADOW,
        decision=decision,
        guard=guard,
        failure_count_before=0,
        batch_count_before=0,
        receipt=receipt,
        batch_ordinal=batch,
    )
