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
  after checking that both produced identical decisions.

It prints numbers; it asserts nothing about time (machines here are shared).
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import sys
import time
import timeit
import tracemalloc
from collections.abc import Callable

from guard import (
    BatchReceipt,
    Decision,
    GuardMode,
    InputBoundary,
    Observation,
    RepeatedToolFailureGuard,
)

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
    from guard.engine import EngineGuard

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
    from tool_failure_guard.bench_history import settled_record_cost

    median_ms, p90_ms = settled_record_cost()
    print(
        f"persisting one settled call outcome (write + fsync, here): median {median_ms:.2f} ms, "
        f"p90 {p90_ms:.2f} ms"
    )
    return 0 if identical else 1
