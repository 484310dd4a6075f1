"""A synthetic fleet with known truth, run through the **real** guarded session in-process.

Every prompt is a real :class:`session.loop.GuardedSession` prompt: the real
guard, receipts, protections (cap, duplicate ids), drain boundary and
telemetry sink, exporting OTLP JSON lines with the same encoders as
``--telemetry file:PATH``.  Only three things are simulated:

* the **model** (:class:`FleetModel`, seeded): per-owner heterogeneity in how
  often prompts loop on a failing tool, whether a loop recovers after the
  corrective reminder, cancels, model errors, tokens and latency;
* the **tools** (:class:`SimTool`): they succeed or fail with a classified
  execution error as the model's plan says, and advance the simulated clock;
* the **clock**: a simulated 7-day timeline (:class:`SimClock`), so the
  records carry realistic timestamps and wall times.

Each owner gets a Resource with ``deployment.environment``,
``enduser.pseudo.id`` and ``service.version``; the arm comes from
:func:`rollout.assign.in_treatment`.  The treatment effect is configurable
(``completion_effect``: the treatment's change in completion probability,
realised as extra model errors; ``turns_effect``: its relative increase in a
normal prompt's model turns), so tests know the truth.  The treatment is the
enforce owners of an enforce fleet, and every owner of a warn fleet (Phase 2
compares warn against the shadow fleet of the same owners, ``start_day``
later).  History is kept in
memory (:class:`MemoryHistory`): persistence is not what is measured here.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import multiprocessing
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, Literal

import attrs
from opentelemetry.metrics import NoOpMeterProvider
from opentelemetry.sdk._logs import LoggerProvider, LogRecordProcessor, ReadWriteLogRecord
from opentelemetry.sdk.resources import Resource

from guard import REPEATED_TOOL_FAILURE_REMINDER, GuardMode
from rollout.assign import in_treatment
from session.drain import MidTurnInput
from session.executor import Executor, FunctionCall
from session.history import HistoryStore, Message, SettledCall
from session.loop import GuardedSession, SessionOptions
from session.model import ModelError, ModelTurn, ModelUsage
from session.otlp_file import OtlpJsonFile, OtlpJsonLogExporter
from session.telemetry import OpenTelemetrySink
from session.tools import ToolContext, ToolError

#: Simulated fleet start: 2026-11-01T00:00:00Z.
EPOCH = 1_793_491_200.0
DAY = 86_400.0
SERVICE_VERSION = "0.1.0-sim"
TOOL_CALL_CAP = 40
LOOP_BATCH = 4


@attrs.frozen(kw_only=True)
class FleetConfig:
    owners: int = 200
    days: int = 7
    prompts_per_day: float = 4.0
    phase: Literal["shadow", "warn", "enforce"] = "enforce"
    percent: float = 5.0
    salt: str = "wave-1"
    environment: str = "internal"
    completion_effect: float = 0.0
    #: The treatment's relative increase in a normal prompt's model turns (0.3: +30 %).
    turns_effect: float = 0.0
    #: First simulated day (0: 2026-11-01): a warn fleet after a 7-day shadow fleet starts at 7.
    start_day: int = 0
    unsupported_share: float = 0.05
    seed: int = 1
    #: Fleet-wide base rates per prompt (owners vary around them on the logit scale).
    loop_rate: float = 0.06
    error_rate: float = 0.03
    cancel_rate: float = 0.03
    #: Mean probability (logit-normal across owners) that a loop recovers after the reminder.
    recover_rate: float = 0.5
    #: After a prompt that did not complete: P(the client disconnects), P(a quick retry).
    disconnect_after_failure: float = 0.15
    retry_after_failure: float = 0.5
    #: Standard deviation of the owner random effects (0: identical owners).
    heterogeneity: float = 0.8
    #: A normal prompt: up to this many tool turns, each with up to this many calls.
    work_turns_max: int = 3
    calls_per_turn_max: int = 3
    #: Test hook: this owner's first prompt gets a counted cancelled call (a faulty producer).
    inject_cancelled_counted: str | None = None


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
    supports_drain: bool
    loop_rate: float
    recover_after_reminder: float
    error_rate: float
    cancel_rate: float
    token_scale: float
    latency_scale: float


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


def _around(rate: float, spread: float, rng: random.Random) -> float:
    """An owner's rate: the fleet rate moved by a normal random effect on the logit scale."""
    if rate <= 0.0:
        return 0.0
    if rate >= 1.0:
        return 1.0
    return _logistic(math.log(rate / (1 - rate)) + rng.gauss(0, spread))


def _owners(config: FleetConfig, rng: random.Random) -> list[Owner]:
    h = config.heterogeneity
    owners = []
    for index in range(config.owners):
        owner_id = f"sim-{config.seed}-{index:05d}"
        treated = config.phase == "enforce" and in_treatment(owner_id, config.percent, config.salt)
        if config.phase == "enforce":
            mode = GuardMode.ENFORCE if treated else GuardMode.WARN
        else:
            mode = GuardMode(config.phase)
        owners.append(
            Owner(
                owner_id=owner_id,
                treated=treated,
                mode=mode,
                supports_drain=rng.random() >= config.unsupported_share,
                # Owner-level random effects (logit / log scale): prompts of one owner correlate.
                loop_rate=_around(config.loop_rate, h, rng),
                recover_after_reminder=_around(config.recover_rate, h, rng),
                error_rate=_around(config.error_rate, h, rng),
                cancel_rate=_around(config.cancel_rate, h, rng),
                token_scale=rng.lognormvariate(0, 0.5 * h),
                latency_scale=rng.lognormvariate(0, 0.4 * h),
            )
        )
    return owners


def _logistic(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def _plan(owner: Owner, config: FleetConfig, rng: random.Random) -> PromptPlan:
    # The phase's treatment: enforce owners (Phase 3), or every owner of a warn fleet (Phase 2).
    affected = owner.treated or config.phase == "warn"
    error_rate = owner.error_rate
    if affected and config.completion_effect < 0:
        error_rate += -config.completion_effect
    draw = rng.random()
    if draw < error_rate:
        kind: Literal["normal", "loop", "cancel", "error"] = "error"
    elif draw < error_rate + owner.cancel_rate:
        kind = "cancel"
    elif draw < error_rate + owner.cancel_rate + owner.loop_rate:
        kind = "loop"
    else:
        kind = "normal"
    work_turns = rng.randint(0, config.work_turns_max)
    if affected and config.turns_effect > 0:
        # + turns_effect of the prompt's turns (work turns + the final answer) on average.
        work_turns += _poisson(rng, config.turns_effect * (work_turns + 1))
    return PromptPlan(
        kind=kind,
        work_turns=work_turns,
        recovers=rng.random() < owner.recover_after_reminder,
        spontaneous_after=rng.randint(3, 6),
    )


async def _run_owner(
    owner: Owner, config: FleetConfig, rng: random.Random, target: OtlpJsonFile, counter: list[int]
) -> None:
    clock = SimClock(EPOCH + config.start_day * DAY)
    resource = Resource.create(
        {
            "service.name": "tool-failure-guard",
            "service.version": SERVICE_VERSION,
            "deployment.environment": config.environment,
            "enduser.pseudo.id": owner.owner_id,
        }
    )
    provider = LoggerProvider(resource=resource, shutdown_on_exit=False)
    processor = BufferedProcessor(OtlpJsonLogExporter(target))
    provider.add_log_record_processor(processor)
    sink = OpenTelemetrySink(
        meter_provider=NoOpMeterProvider(), logger_provider=provider, clock_ns=clock.ns
    )
    tools = {
        "sim_read": SimTool("sim_read", "native", clock),
        "sim_fetch": SimTool("sim_fetch", "mcp", clock),
    }
    context = ToolContext(cwd=Path("."))
    first = counter[0]
    for day in range(config.start_day, config.start_day + config.days):
        prompts = _poisson(rng, config.prompts_per_day)
        if prompts == 0:
            continue
        clock.now = max(clock.now, EPOCH + day * DAY + rng.uniform(8, 12) * 3600)
        store = MemoryHistory()
        session_id = f"{owner.owner_id}-d{day}"
        store.create(session_id, ".")
        model = FleetModel(owner, rng, clock, config.calls_per_turn_max)
        client = HostClient(owner.supports_drain)
        session = GuardedSession(
            session_id=session_id,
            client=client,
            model=model,
            executor_factory=lambda s: Executor(tools, context, s.ask_permission),
            store=store,
            telemetry=sink,
            mode=owner.mode,
            drain=MidTurnInput(session_id, client.ext_method),
            options=SessionOptions(tool_call_cap=TOOL_CALL_CAP),
        )
        session.clock = lambda: clock.now
        model.session = session
        disconnected = False
        for _ in range(prompts):
            plan = _plan(owner, config, rng)
            model.start(plan)
            number = counter[0]
            counter[0] += 1
            try:
                response = await session.run_prompt(["simulated prompt"], channel=False)
                completed = response.stop_reason == "end_turn" and not (
                    response.field_meta or {}
                ).get("loopType")
            except Exception:
                completed = False
            if config.inject_cancelled_counted == owner.owner_id and number == first:
                _inject_cancelled_counted(sink, session)
            if not completed and rng.random() < config.disconnect_after_failure:
                # The user gives up on this session: the client disconnects.
                clock.advance(rng.uniform(5, 300))
                session.report_closed("disconnect")
                disconnected = True
                break
            # Next prompt: soon after a failure (a retry), else later in the day.
            retry = not completed and rng.random() < config.retry_after_failure
            gap = rng.uniform(20, 240) if retry else None
            clock.advance(gap if gap is not None else rng.expovariate(1 / 3600.0) + 600)
        if not disconnected:
            session.report_closed("clean")
        processor.force_flush()
    provider.shutdown()


def _inject_cancelled_counted(sink: OpenTelemetrySink, session: GuardedSession) -> None:
    """Test hook: a faulty producer that counted a cancelled call (an invariant violation)."""
    from guard import BatchReceipt, DecisionKind, Observation, RepeatedToolFailureGuard
    from session.telemetry import CallRecord

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


def _poisson(rng: random.Random, mean: float) -> int:
    # Knuth's method: small means only.
    limit, k, p = math.exp(-mean), 0, 1.0
    while True:
        p *= rng.random()
        if p <= limit:
            return k
        k += 1


def _run_chunk(config: FleetConfig, owners: list[Owner], path: Path) -> int:
    """Run some owners into one shard file; return their prompt count."""
    target = OtlpJsonFile(path)
    counter = [0]

    async def fleet() -> None:
        for owner in owners:
            # Per-owner seeds: the result does not depend on how owners are split up; a later
            # period of the same owners (start_day) draws its own prompts.
            later = f":{config.start_day}" if config.start_day else ""
            rng = random.Random(f"{config.seed}:{owner.owner_id}{later}")
            await _run_owner(owner, config, rng, target, counter)

    try:
        asyncio.run(fleet())
    finally:
        target.close()
    return counter[0]


def simulate(config: FleetConfig, out: Path, *, workers: int = 1) -> dict[str, Any]:
    """Run the fleet; write OTLP JSON lines to ``out`` (replaced atomically); return a summary.

    ``workers`` > 1 runs owners in that many processes (each writes a shard;
    the shards are concatenated), with the same records as one process.
    """
    owners = _owners(config, random.Random(config.seed))
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    started = time.perf_counter()
    try:
        workers = max(1, min(workers, len(owners)))
        shards = [staging / f"shard-{i}.jsonl" for i in range(workers)]
        chunks = [owners[i::workers] for i in range(workers)]
        if workers == 1:
            counts = [_run_chunk(config, owners, shards[0])]
        else:
            context = multiprocessing.get_context("fork")
            with ProcessPoolExecutor(workers, mp_context=context) as pool:
                counts = list(pool.map(_run_chunk, [config] * workers, chunks, shards))
        joined = staging / "all.jsonl"
        with joined.open("wb") as sink:
            for shard in shards:
                with shard.open("rb") as source:
                    shutil.copyfileobj(source, sink)
        joined.replace(out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return {
        "owners": len(owners),
        "treated_owners": sum(o.treated for o in owners),
        "unsupported_owners": sum(not o.supports_drain for o in owners),
        "prompts": sum(counts),
        "seconds": time.perf_counter() - started,
        "out": str(out),
    }


def main(args: argparse.Namespace) -> int:
    if (
        args.owners < 1
        or args.days < 1
        or args.prompts_per_day <= 0
        or args.start_day < 0
        or args.turns_effect < 0
    ):
        print(
            "tool-failure-guard rollout simulate: --owners, --days and --prompts-per-day "
            "must be positive, --start-day and --turns-effect not negative",
            file=sys.stderr,
        )
        return 2
    config = FleetConfig(
        owners=args.owners,
        days=args.days,
        prompts_per_day=args.prompts_per_day,
        phase=args.phase,
        percent=args.percent,
        salt=args.salt,
        environment=args.environment,
        completion_effect=args.completion_effect,
        turns_effect=args.turns_effect,
        start_day=args.start_day,
        unsupported_share=args.unsupported_share,
        seed=args.seed,
    )
    try:
        summary = simulate(config, args.out, workers=args.workers)
    except OSError as error:
        print(
            f"tool-failure-guard rollout simulate: cannot write {args.out}: "
            f"{error.strerror or type(error).__name__}",
            file=sys.stderr,
        )
        return 2
    print(
        f"simulated {summary['owners']} owners ({summary['treated_owners']} treated, "
        f"{summary['unsupported_owners']} on hosts without drain), {summary['prompts']} prompts "
        f"in {summary['seconds']:.1f} s -> {summary['out']}"
    )
    return 0
