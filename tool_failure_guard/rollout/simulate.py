"""A synthetic fleet with known truth, run through the **real** guarded session in-process.

Every prompt is a real :class:`~tool_failure_guard.session.pipeline.session.GuardedSession` prompt:
the real guard, receipts, protections (cap, duplicate ids), drain boundary and
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
:func:`~tool_failure_guard.rollout.assign.in_treatment`.  The treatment effect is configurable
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
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, Literal

import attrs
from opentelemetry.metrics import NoOpMeterProvider
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk.resources import Resource

from tool_failure_guard.guard import GuardMode
from tool_failure_guard.rollout.assign import in_treatment
from tool_failure_guard.rollout.fleet import (
    Boundary,
    BufferedProcessor,
    FleetModel,
    HostClient,
    MemoryHistory,
    Owner,
    PromptPlan,
    SimClock,
    SimTool,
    inject_cancelled_counted,
)
from tool_failure_guard.session.config.declared_boundary import BoundaryKind
from tool_failure_guard.session.pipeline.drain import MidTurnInput
from tool_failure_guard.session.pipeline.session import GuardedSession, SessionOptions
from tool_failure_guard.session.tools.builtin import ToolContext
from tool_failure_guard.session.tools.executor import Executor
from tool_failure_guard.telemetry.otlp_file import OtlpJsonFile, OtlpJsonLogExporter
from tool_failure_guard.telemetry.sink import OpenTelemetrySink

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
    #: Share of owners on a plain ACP host declared ``prompt-only`` (drawn after unsupported).
    prompt_only_share: float = 0.0
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
        draw = rng.random()
        boundary: Boundary = (
            "unsupported"
            if draw < config.unsupported_share
            else "prompt-only"
            if draw < config.unsupported_share + config.prompt_only_share
            else "drain"
        )
        owners.append(
            Owner(
                owner_id=owner_id,
                treated=treated,
                mode=mode,
                boundary=boundary,
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
        meter_provider=NoOpMeterProvider(),
        logger_provider=provider,
        clock_ns=clock.ns,
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
            # A prompt-only owner's operator declared it: the agent never asks the host,
            # and its own prompt records name the kind (input_boundary).
            drain=MidTurnInput(
                session_id,
                client.ext_method,
                declared=(
                    BoundaryKind.PROMPT_ONLY
                    if owner.boundary == "prompt-only"
                    else BoundaryKind.DRAIN
                ),
                mode=owner.mode,
            ),
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
                inject_cancelled_counted(sink, session)
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
        "unsupported_owners": sum(o.boundary == "unsupported" for o in owners),
        "prompt_only_owners": sum(o.boundary == "prompt-only" for o in owners),
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
        or not 0 <= args.unsupported_share + args.prompt_only_share <= 1
    ):
        print(
            "tool-failure-guard rollout simulate: --owners, --days and --prompts-per-day "
            "must be positive, --start-day and --turns-effect not negative, and the "
            "unsupported and prompt-only shares between 0 and 1",
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
        prompt_only_share=args.prompt_only_share,
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
        f"{summary['unsupported_owners']} on hosts without drain, "
        f"{summary['prompt_only_owners']} prompt-only), {summary['prompts']} prompts "
        f"in {summary['seconds']:.1f} s -> {summary['out']}"
    )
    return 0
