"""``python -m benches`` (`make bench`): what one settled batch costs the guard.

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
  after checking that both produced identical decisions; whole-corpus passes
  of both are interleaved, with the median and spread of their ratios;
* the core's per-batch host path against ``observe`` alone
  (:mod:`~benches.core`), and the start-up CPU (and,
  with valgrind, instructions) of ``import tool_failure_guard``, of its first use
  and of the agent answering ``initialize`` against ``python -c pass``
  (:mod:`~benches.startup`);
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
import statistics
import sys
import tempfile
import time
import timeit
import tracemalloc
from collections.abc import Callable

from benches.corpus import Prompt, build_corpus, wire_lines
from benches.yardstick import (
    Comparison,
    compare,
    observe_against_yardstick,
    yardstick_agrees,
)
from tool_failure_guard.guard import (
    Decision,
    GuardMode,
    RepeatedToolFailureGuard,
)

HELP = "measure the guard's per-batch cost against the python-statemachine engine"


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
    from tool_failure_guard.commands.replay import replay

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
        print("python -m benches: --batches and --rounds must be positive", file=sys.stderr)
        return 2
    from tool_failure_guard._extras import AGENT_MODULES, MissingExtra, require_extra

    try:  # it times the agent's start-up and history too
        require_extra("agent", *AGENT_MODULES)
    except MissingExtra as missing:
        print(f"python -m benches: {missing}", file=sys.stderr)
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
    # Whole-corpus passes of both, interleaved (the order alternating per pass), so
    # load on a shared machine falls on both; the median of each and of the ratios.
    runtime_passes: list[float] = []
    engine_passes: list[float] = []
    for number in range(5):
        pair = [(runtime_passes, RepeatedToolFailureGuard), (engine_passes, EngineGuard)]
        for passes, make in pair if number % 2 == 0 else reversed(pair):
            passes.append(_whole_corpus_seconds(corpus, make))
    runtime_total = statistics.median(runtime_passes)
    engine_total = statistics.median(engine_passes)
    engine_ratios = sorted(e / r for e, r in zip(engine_passes, runtime_passes, strict=True))

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
        f"whole corpus, one guard per prompt, {len(engine_passes)} interleaved passes: derived "
        f"table median {runtime_total * 1000:.1f} ms, engine median {engine_total * 1000:.0f} ms"
    )
    engine_ratio = statistics.median(engine_ratios)
    print(
        f"engine / derived table: whole corpus median {engine_ratio:.0f}x (passes "
        f"{engine_ratios[0]:.0f}-{engine_ratios[-1]:.0f}x; >= 50x expected: "
        f"{verdict(engine_ratio >= 50)}); "
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

    from benches import core as bench_core
    from benches import startup as bench_startup

    bench_core.report()
    bench_startup.report()

    from benches.history import settled_record_cost

    median_ms, p90_ms = settled_record_cost()
    print(
        f"persisting one settled call outcome (write + fsync, here): median {median_ms:.2f} ms, "
        f"p90 {p90_ms:.2f} ms"
    )
    from benches.transcripts import report as report_transcripts

    report_transcripts()  # `transcripts` on 20,000 batches
    from benches.adapters import (
        report_adapters,  # each framework, bare vs guarded
    )
    from benches.logging_cost import guard_records_held

    with guard_records_held():  # its runs remind and stop on purpose: no WARNING spray
        adapters_ok = report_adapters()
    return 0 if identical and agrees and adapters_ok else 1
