"""``tool-failure-guard bench``: what one settled batch costs the guard.

Method (also in docs/performance.md):

* a generated, seeded corpus of prompts (at least 10,000 batches) mixes the
  shapes sessions produce: a tool that keeps failing, successes of other
  tools in between, cancellations, pre-execution failures, unknown outcomes,
  provider duplicates, external input and unreliable drains;
* receipts are built before timing: the session builds them anyway;
* ``observe`` is timed batch by batch with ``perf_counter_ns`` over several
  rounds (a fresh guard per prompt each round); the median is reported with
  the timer's own median overhead, which it includes;
* guard creation is timed with ``timeit`` (best of several repeats);
* memory per live guard is ``tracemalloc``'s growth while 10,000 guards that
  have each reduced a prompt are kept alive, divided by 10,000;
* the same corpus is then driven through the python-statemachine engine
  (``guard.engine.EngineGuard``) and the ratio of the two medians is printed,
  after checking that both produced identical decisions;
* a yardstick -- :class:`YardstickReducer`, a plain hand-written reducer that
  exists only here -- is checked to reach the guard's decisions and state on
  every batch, then both are timed over the same prepared receipts (reducers
  made before timing, gc off) in passes that alternate the two every 50
  prompts; the ratio of each side's best time per chunk is printed with the
  spread of whole-pass ratios;
* the corpus is written as replay input (JSON Lines in chunk files of 50
  prompts, once with keys at their defaults left out, once with every key
  spelled out) and ``replay`` is timed against bare ``json.loads`` +
  ``json.dumps`` of the same lines, both streaming each file and writing to
  ``os.devnull``, alternating per chunk; ratio and spread as above.

It prints numbers; it asserts nothing about time (machines here are shared).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import statistics
import sys
import tempfile
import time
import timeit
import tracemalloc
from collections.abc import Callable, Iterator
from typing import Protocol, TypeVar

import attrs

from tool_failure_guard.guard import (
    INELIGIBLE_RESET_REASON_PRECEDENCE,
    REPEATED_TOOL_FAILURE_BATCH_THRESHOLD,
    REPEATED_TOOL_FAILURE_THRESHOLD,
    BatchReceipt,
    Decision,
    DecisionKind,
    GuardMode,
    InputBoundary,
    Observation,
    Phase,
    RepeatedToolFailureGuard,
    ResetReason,
)
from tool_failure_guard.guard._values import decision as interned

_T = TypeVar("_T")

HELP = "measure the guard's per-batch cost against the python-statemachine engine"

Prompt = tuple[GuardMode, list[tuple[BatchReceipt, InputBoundary]]]

_TOOLS = ("read_file", "run_shell_command", "edit", "list_directory", "mcp__git__status")
_ERRORS = ("file_not_found", "shell_execute_error", "edit_no_occurrence_found", "mcp_tool_error")
_QUIET = InputBoundary()


def _observation(rng: random.Random, call: int, looping: tuple[str, str]) -> Observation:
    roll = rng.random()
    call_id = f"call-{call}"
    tool_type = "mcp" if looping[0].startswith("mcp__") else "native"
    if roll < 0.55:  # the looping tool fails again
        return Observation(
            call_id=call_id,
            terminal_status="error",
            execution_status="error",
            execution_error_type=looping[1],
            policy_tool_name=looping[0],
            tool_type=tool_type,
        )
    if roll < 0.85:  # another tool succeeds in between
        return Observation(
            call_id=call_id,
            terminal_status="success",
            execution_status="success",
            policy_tool_name=rng.choice(_TOOLS[2:4]),
            tool_type="native",
        )
    if roll < 0.89:
        return Observation(
            call_id=call_id, terminal_status="cancelled", execution_status="cancelled"
        )
    if roll < 0.93:
        return Observation(
            call_id=call_id,
            terminal_status="error",
            execution_status="not_started",
            execution_error_type="invalid_tool_params",
            policy_tool_name=looping[0],
        )
    if roll < 0.95:
        return Observation(call_id=call_id, terminal_status="error", execution_status=None)
    if roll < 0.98:
        return Observation(
            call_id=call_id,
            terminal_status="error",
            execution_status="error",
            execution_error_type=rng.choice(_ERRORS),
            policy_tool_name=rng.choice(_TOOLS),
            tool_type="native",
        )
    return Observation(
        call_id=f"call-{call - 1}",
        terminal_status="error",
        execution_status="not_started",
        provider_duplicate=True,
    )


def build_corpus(batches: int = 10_000, seed: int = 20261130) -> list[Prompt]:
    """Seeded prompts totalling at least ``batches`` settled batches."""
    rng = random.Random(seed)
    corpus: list[Prompt] = []
    total = 0
    modes = (GuardMode.SHADOW, GuardMode.WARN, GuardMode.ENFORCE)
    while total < batches:
        looping = (rng.choice(_TOOLS), rng.choice(_ERRORS))
        prompt: list[tuple[BatchReceipt, InputBoundary]] = []
        call = 0
        for _ in range(rng.randint(1, 24)):
            size = rng.choice((1, 1, 2, 2, 3, 4, 6))
            observations = []
            for _ in range(size):
                call += 1
                observations.append(_observation(rng, call, looping))
            roll = rng.random()
            if roll < 0.02:
                boundary = InputBoundary(has_external_input=True)
            elif roll < 0.03:
                boundary = InputBoundary(reliable=False)
            else:
                boundary = _QUIET
            prompt.append((BatchReceipt(observations, complete=rng.random() > 0.01), boundary))
        corpus.append((rng.choice(modes), prompt))
        total += len(prompt)
    return corpus


# -- the yardstick: a plain hand-written reducer, for comparison only ----------
#
# NOT the runtime.  Sessions never use it; the runtime's transitions are derived
# from the statechart (guard._table).  It is the reducer one would write by hand
# in plain CPython, the way the original TypeScript reducer is written: classify
# each entry with if/else, then a branch per phase.  The bench checks that it
# reaches the same decisions as the guard on the whole corpus, then times both
# side by side over the same prepared receipts.

_YS_PRECEDENCE = {reason: rank for rank, reason in enumerate(INELIGIBLE_RESET_REASON_PRECEDENCE)}


class YardstickReducer:
    """Yardstick only: a plain hand-written reducer with the guard's decisions."""

    __slots__ = ("batches", "disabled", "failures", "key", "mode", "ordinal", "phase", "streaks")

    def __init__(self, mode: GuardMode) -> None:
        self.mode = mode
        self.phase = Phase.IDLE
        self.key: tuple[str, str] | None = None
        self.failures = 0
        self.batches = 0
        self.disabled = False
        self.ordinal = 0  # the active candidate's; 0 in idle
        self.streaks = 0

    def observe(self, receipt: BatchReceipt, boundary: InputBoundary | None = None) -> Decision:
        phase = self.phase
        if self.mode is GuardMode.OFF or phase is Phase.LATCHED:
            return interned(DecisionKind.NONE, None, phase, phase)
        reason: ResetReason | None = None
        downgrade = False
        if boundary is not None and not boundary.reliable:
            reason, downgrade = ResetReason.UNRELIABLE_INPUT, True
        elif boundary is not None and boundary.has_external_input:
            reason = ResetReason.EXTERNAL_INPUT
        elif boundary is not None and boundary.has_queued_prompt:
            reason = ResetReason.QUEUED_PROMPT
        elif not receipt.complete:
            reason = ResetReason.INCOMPLETE
        succeeded: set[str] = set()
        candidate: tuple[str, str] | None = None
        count = 0
        if reason is None:
            failed: list[tuple[str, str]] = []
            for o in receipt.observations:
                if o.provider_duplicate:
                    continue
                terminal, execution = o.terminal_status, o.execution_status
                if terminal == "cancelled":
                    found = ResetReason.CANCELLED
                elif terminal == "success":
                    if execution == "success" or execution == "not_started":
                        if o.policy_tool_name:
                            succeeded.add(o.policy_tool_name)
                            continue
                        found = ResetReason.UNKNOWN
                    elif execution == "error" or execution == "cancelled":
                        found = ResetReason.CONTRACT_VIOLATION
                    else:
                        found = ResetReason.UNKNOWN
                elif execution == "error":
                    error_type = o.execution_error_type
                    if o.policy_tool_name and error_type and error_type != "unknown":
                        failed.append((o.policy_tool_name, error_type))
                        continue
                    found = ResetReason.UNKNOWN
                elif execution == "cancelled":
                    found = ResetReason.CANCELLED
                elif execution == "not_started":
                    found = ResetReason.NOT_STARTED
                elif execution == "success":
                    found = ResetReason.POST_EXECUTION_FAILURE
                else:
                    found = ResetReason.UNKNOWN
                if found is ResetReason.UNKNOWN or found is ResetReason.CONTRACT_VIOLATION:
                    downgrade = True
                if reason is None or _YS_PRECEDENCE[found] < _YS_PRECEDENCE[reason]:
                    reason = found
            if reason is None:
                for failure in failed:
                    if failure[0] in succeeded:
                        continue
                    if candidate is None:
                        candidate = failure
                    elif failure != candidate:
                        reason = ResetReason.MIXED
                        break
                    count += 1
        if reason is not None:
            newly_disabled = downgrade and not self.disabled
            if downgrade:
                self.disabled = True
            if phase is Phase.IDLE and not newly_disabled:
                return interned(DecisionKind.NONE, None, phase, phase)
            return self._reset(reason, phase)
        if candidate is None:
            if self.key is not None and self.key[0] in succeeded:
                return self._reset(ResetReason.SUCCESS, phase)
            return interned(DecisionKind.NONE, None, phase, phase)
        if candidate != self.key:
            self.key, self.failures, self.batches = candidate, count, 1
            self.streaks += 1
            self.ordinal = self.streaks
            self.phase = Phase.TRACKING
            return interned(DecisionKind.TRACKED, None, phase, Phase.TRACKING)
        self.failures += count
        self.batches += 1
        if phase is Phase.WARNED:
            self.phase = Phase.LATCHED
            if self.mode is GuardMode.ENFORCE and not self.disabled:
                return interned(DecisionKind.STOP, None, phase, Phase.LATCHED)
            return interned(DecisionKind.WOULD_STOP, None, phase, Phase.LATCHED)
        if (
            self.failures >= REPEATED_TOOL_FAILURE_THRESHOLD
            and self.batches >= REPEATED_TOOL_FAILURE_BATCH_THRESHOLD
        ):
            self.phase = Phase.WARNED
            kind = DecisionKind.WOULD_WARN if self.mode is GuardMode.SHADOW else DecisionKind.WARN
            return interned(kind, None, phase, Phase.WARNED)
        return interned(DecisionKind.TRACKED, None, phase, phase)

    def _reset(self, reason: ResetReason, phase: Phase) -> Decision:
        self.key, self.failures, self.batches, self.ordinal = None, 0, 0, 0
        self.phase = Phase.IDLE
        return interned(DecisionKind.RESET, reason, phase, Phase.IDLE)


class _Reducer(Protocol):
    def observe(self, receipt: BatchReceipt, boundary: InputBoundary | None = None) -> Decision: ...


def _observe_seconds(corpus: list[Prompt], make: Callable[[GuardMode], _Reducer]) -> float:
    """Seconds of ``observe`` over ``corpus``; fresh reducers are made before timing."""
    pairs = [(make(mode).observe, batches) for mode, batches in corpus]
    clock = time.perf_counter
    start = clock()
    for observe, batches in pairs:
        for receipt, boundary in batches:
            observe(receipt, boundary)
    return clock() - start


@attrs.frozen
class Comparison:
    """Paired timings of two contenders over the same chunks of work.

    ``first[p][c]`` / ``second[p][c]`` are the seconds of pass ``p`` on chunk ``c``.
    """

    first: list[list[float]]
    second: list[list[float]]

    @property
    def best_ratio(self) -> float:
        """Sum over chunks of each side's fastest pass, first over second.

        On a shared machine a pre-emption lands on one side of one chunk; the
        per-chunk minimum drops it, as ``timeit``'s best-of-repeats does.
        """
        return self.best_total(True) / self.best_total(False)

    @property
    def pass_ratios(self) -> list[float]:
        """Each whole pass's ratio, sorted: the spread, pre-emptions included."""
        return sorted(sum(f) / sum(s) for f, s in zip(self.first, self.second, strict=True))

    def best_total(self, first: bool) -> float:
        """Sum over chunks of one side's fastest pass (the first side's when ``first``)."""
        passes = self.first if first else self.second
        return sum(min(row[chunk] for row in passes) for chunk in range(len(passes[0])))


def compare(
    chunks: list[_T], first: Callable[[_T], float], second: Callable[[_T], float], passes: int
) -> Comparison:
    """Time ``first`` and ``second`` on every chunk, their order alternating chunk by chunk."""
    first_times: list[list[float]] = []
    second_times: list[list[float]] = []
    for _ in range(passes):
        first_row: list[float] = []
        second_row: list[float] = []
        for number, chunk in enumerate(chunks):
            if number % 2:
                second_row.append(second(chunk))
                first_row.append(first(chunk))
            else:
                first_row.append(first(chunk))
                second_row.append(second(chunk))
        first_times.append(first_row)
        second_times.append(second_row)
    return Comparison(first_times, second_times)


def observe_against_yardstick(corpus: list[Prompt], passes: int = 9, chunk: int = 50) -> Comparison:
    """The guard (first) and the yardstick (second) over the same receipts, gc off."""
    chunks = [corpus[i : i + chunk] for i in range(0, len(corpus), chunk)]
    enabled = gc.isenabled()
    gc.disable()
    try:
        return compare(
            chunks,
            lambda part: _observe_seconds(part, RepeatedToolFailureGuard),
            lambda part: _observe_seconds(part, YardstickReducer),
            passes,
        )
    finally:
        if enabled:
            gc.enable()


def yardstick_agrees(
    corpus: list[Prompt], make: Callable[[GuardMode], YardstickReducer] = YardstickReducer
) -> bool:
    """The yardstick reaches the guard's decision and state on every batch of the corpus."""
    for mode, batches in corpus:
        guard = RepeatedToolFailureGuard(mode)
        yardstick = make(mode)
        for receipt, boundary in batches:
            if guard.observe(receipt, boundary) is not yardstick.observe(receipt, boundary):
                return False
            key = guard.key
            state = (
                guard.phase,
                None if key is None else (key.policy_tool_name, key.execution_error_type),
                guard.failure_count,
                guard.batch_count,
                guard.candidate_ordinal,
                guard.enforcement_disabled,
            )
            expected = (
                yardstick.phase,
                yardstick.key,
                yardstick.failures,
                yardstick.batches,
                yardstick.ordinal,
                yardstick.disabled,
            )
            if state != expected:
                return False
    return True


def wire_lines(corpus: list[Prompt], *, compact: bool = True) -> Iterator[str]:
    """The corpus as replay input: one JSON line per batch, prompts one after another.

    ``compact`` leaves out keys at their defaults (``complete: true``, no boundary
    flags, null statuses and names, ``providerDuplicate: false``), as a producer
    that writes only what it knows would; otherwise every key is spelled out.
    """
    for number, (mode, batches) in enumerate(corpus):
        prompt = f"prompt-{number}"
        for index, (receipt, boundary) in enumerate(batches):
            line: dict[str, object] = {"prompt": prompt}
            if index == 0:
                line["mode"] = mode.value
            flags = {
                "complete": receipt.complete,
                "hasExternalInput": boundary.has_external_input,
                "hasQueuedPrompt": boundary.has_queued_prompt,
                "inputReliable": boundary.reliable,
            }
            defaults = {k: v for k, v in flags.items() if v == (k in ("complete", "inputReliable"))}
            line.update({k: v for k, v in flags.items() if not (compact and k in defaults)})
            observations = []
            for o in receipt.observations:
                entry: dict[str, object] = {
                    "callId": o.call_id,
                    "policyToolName": o.policy_tool_name,
                    "toolType": o.tool_type,
                    "terminalStatus": o.terminal_status,
                    "executionStatus": o.execution_status,
                    "executionErrorType": o.execution_error_type,
                    "providerDuplicate": o.provider_duplicate,
                }
                if compact:
                    entry = {k: v for k, v in entry.items() if v is not None and v is not False}
                observations.append(entry)
            line["observations"] = observations
            yield json.dumps(line)


def _bare_json_pass(path: str) -> float:
    """Seconds to json.loads and json.dumps every line of ``path``, streaming, output discarded."""
    loads, dumps = json.loads, json.dumps
    with open(path, encoding="utf-8") as lines, open(os.devnull, "w", encoding="utf-8") as out:
        write = out.write
        start = time.perf_counter()
        for text in lines:
            write(dumps(loads(text)) + "\n")
        return time.perf_counter() - start


def _replay_pass(path: str) -> float:
    """Seconds to replay ``path`` (strict schema, one guard per prompt), output discarded."""
    from tool_failure_guard.replay import replay

    with open(path, encoding="utf-8") as lines, open(os.devnull, "w", encoding="utf-8") as out:
        start = time.perf_counter()
        replay(lines, out)
        return time.perf_counter() - start


def replay_against_json(
    corpus: list[Prompt], directory: str, *, compact: bool, passes: int = 5, chunk: int = 50
) -> tuple[Comparison, float]:
    """``replay`` (first) and bare JSON (second) on the same files; also bytes per line.

    The corpus is written as chunk files of ``chunk`` whole prompts each, and
    every chunk file is streamed by both, so the two see the same lines.
    """
    paths: list[str] = []
    size = 0
    for number, start in enumerate(range(0, len(corpus), chunk)):
        path = os.path.join(directory, f"receipts-{number}.jsonl")
        with open(path, "w", encoding="utf-8") as handle:
            for text in wire_lines(corpus[start : start + chunk], compact=compact):
                handle.write(text + "\n")
        size += os.path.getsize(path)
        paths.append(path)
    lines = sum(len(batches) for _, batches in corpus)
    return compare(paths, _replay_pass, _bare_json_pass, passes), size / lines


def _drive(
    corpus: list[Prompt], make: Callable[[GuardMode], RepeatedToolFailureGuard]
) -> tuple[list[int], list[Decision]]:
    clock = time.perf_counter_ns
    durations: list[int] = []
    decisions: list[Decision] = []
    for mode, batches in corpus:
        guard = make(mode)
        for receipt, boundary in batches:
            start = clock()
            decision = guard.observe(receipt, boundary)
            durations.append(clock() - start)
            decisions.append(decision)
    return durations, decisions


def _whole_corpus_seconds(
    corpus: list[Prompt], make: Callable[[GuardMode], RepeatedToolFailureGuard]
) -> float:
    """One pass, guard creation included, no per-batch clock reads."""
    start = time.perf_counter()
    for mode, batches in corpus:
        guard = make(mode)
        for receipt, boundary in batches:
            guard.observe(receipt, boundary)
    return time.perf_counter() - start


def _timer_overhead_ns() -> float:
    clock = time.perf_counter_ns
    samples = []
    for _ in range(20_000):
        start = clock()
        samples.append(clock() - start)
    return statistics.median(samples)


def _memory_per_guard(corpus: list[Prompt], count: int = 10_000) -> float:
    prompts = [corpus[i % len(corpus)] for i in range(count)]
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    live = []
    for mode, batches in prompts:
        guard = RepeatedToolFailureGuard(mode)
        for receipt, boundary in batches:
            guard.observe(receipt, boundary)
        live.append(guard)
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    # the list holding them is bookkeeping of the measurement, not of a guard
    list_bytes = sys.getsizeof(live)
    return (after - before - list_bytes) / count


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--batches", type=int, default=10_000, help="corpus size (>= 10000)")
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds over the corpus")
    parser.add_argument("--seed", type=int, default=20261130)


def run(args: argparse.Namespace) -> int:
    if args.batches < 1 or args.rounds < 1:
        print("bench: --batches and --rounds must be positive", file=sys.stderr)
        return 2
    from tool_failure_guard.guard.engine import EngineGuard

    corpus = build_corpus(args.batches, args.seed)
    n_batches = sum(len(batches) for _, batches in corpus)
    n_obs = sum(len(r.observations) for _, batches in corpus for r, _ in batches)
    print(
        f"corpus: {len(corpus)} prompts, {n_batches} batches, {n_obs} observations "
        f"(seed {args.seed})"
    )

    overhead = _timer_overhead_ns()
    samples: list[int] = []
    decisions: list[Decision] = []
    for _ in range(args.rounds):
        durations, decisions = _drive(corpus, RepeatedToolFailureGuard)
        samples.extend(durations)
    runtime_median = statistics.median(samples) / 1000
    runtime_p99 = statistics.quantiles(samples, n=100)[98] / 1000

    creation = (
        min(
            timeit.repeat(
                lambda: RepeatedToolFailureGuard(GuardMode.ENFORCE), number=100_000, repeat=5
            )
        )
        / 100_000
        * 1e6
    )
    memory = _memory_per_guard(corpus)

    engine_samples, engine_decisions = _drive(corpus, EngineGuard)
    engine_median = statistics.median(engine_samples) / 1000
    engine_creation = (
        min(timeit.repeat(lambda: EngineGuard(GuardMode.ENFORCE), number=200, repeat=3)) / 200 * 1e6
    )
    identical = engine_decisions == decisions
    runtime_total = min(_whole_corpus_seconds(corpus, RepeatedToolFailureGuard) for _ in range(3))
    engine_total = _whole_corpus_seconds(corpus, EngineGuard)

    def verdict(ok: bool) -> str:
        return "met" if ok else "MISSED"

    kinds: dict[str, int] = {}
    for decision in decisions:
        kinds[decision.kind.value] = kinds.get(decision.kind.value, 0) + 1
    print("decisions: " + ", ".join(f"{k}={v}" for k, v in sorted(kinds.items())))
    print(f"timer overhead (median, included below): {overhead / 1000:.3f} µs")
    print(
        f"observe, derived table: median {runtime_median:.2f} µs, p99 {runtime_p99:.2f} µs "
        f"per batch over {len(samples)} timed batches   target <= 6 µs: "
        f"{verdict(runtime_median <= 6)}"
    )
    print(f"guard creation: {creation:.3f} µs   target <= 2 µs: {verdict(creation <= 2)}")
    print(f"memory per live guard: {memory:.0f} bytes   target <= 512: {verdict(memory <= 512)}")
    print(
        f"observe, python-statemachine engine: median {engine_median:.1f} µs per batch; "
        f"engine guard creation {engine_creation:.0f} µs"
    )
    print(
        f"whole corpus, one guard per prompt: derived table {runtime_total * 1000:.1f} ms, "
        f"engine {engine_total * 1000:.0f} ms"
    )
    print(
        f"engine / derived table: whole corpus {engine_total / runtime_total:.0f}x "
        f"(>= 50x expected: {verdict(engine_total / runtime_total >= 50)}); "
        f"median per batch {engine_median / runtime_median:.0f}x; "
        f"creation {engine_creation / creation:.0f}x"
    )
    print(f"engine and derived table decisions identical: {'yes' if identical else 'NO'}")

    agrees = yardstick_agrees(corpus)
    observed = observe_against_yardstick(corpus, max(args.rounds, 9))
    spread = observed.pass_ratios
    observe_ratio = observed.best_ratio
    print(
        f"observe vs yardstick (a plain hand-written reducer, bench only), {len(spread)} "
        f"passes alternating every 50 prompts, gc off: guard "
        f"{observed.best_total(True) / n_batches * 1e6:.2f} µs, yardstick "
        f"{observed.best_total(False) / n_batches * 1e6:.2f} µs per batch (best per chunk)"
    )
    print(
        f"observe / yardstick ratio: {observe_ratio:.2f} (whole passes "
        f"{spread[0]:.2f}-{spread[-1]:.2f}, median {statistics.median(spread):.2f})   "
        f"target <= 1.2: {verdict(observe_ratio <= 1.2)}"
    )
    print(f"yardstick decisions and state identical to the guard's: {'yes' if agrees else 'NO'}")

    with tempfile.TemporaryDirectory() as directory:
        for compact in (True, False):
            replayed, size = replay_against_json(
                corpus, directory, compact=compact, passes=max(args.rounds, 5)
            )
            spread = replayed.pass_ratios
            replay_ratio = replayed.best_ratio
            shape = "keys at defaults left out" if compact else "every key spelled out"
            print(
                f"replay, {shape} ({size:.0f} bytes per line), {len(spread)} passes "
                f"alternating every 50 prompts: replay "
                f"{replayed.best_total(True) / n_batches * 1e6:.1f} µs, bare json.loads + "
                f"json.dumps {replayed.best_total(False) / n_batches * 1e6:.1f} µs per line"
            )
            print(
                f"replay / bare JSON ratio: {replay_ratio:.2f} (whole passes "
                f"{spread[0]:.2f}-{spread[-1]:.2f}, median {statistics.median(spread):.2f})   "
                f"target <= 2.5: {verdict(replay_ratio <= 2.5)}"
            )

    from tool_failure_guard.bench_history import settled_record_cost

    median_ms, p90_ms = settled_record_cost()
    print(
        f"persisting one settled call outcome (write + fsync, here): median {median_ms:.2f} ms, "
        f"p90 {p90_ms:.2f} ms"
    )
    return 0 if identical and agrees else 1
