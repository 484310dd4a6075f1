"""What the framework adapters cost: each framework bare against guarded, side by side.

Part of ``make bench`` (``tool-failure-guard bench`` ends with it), or alone:
``python -m benches.adapters [--frameworks langchain,...]``.

For LangChain v1 (``create_agent``), pydantic-ai and the OpenAI Agents SDK
(:mod:`~benches.hosts`), one agent per variant --
``bare`` (the framework alone), ``shadow`` and ``enforce`` (guarded by this
project's adapter) -- makes whole runs of ``batches`` model turns of 4
parallel tool calls (three that return, one that fails, the failing tool
alternating so no streak grows), then a final text.  The model is scripted in
process (``inproc``) and, separately, over HTTP to a local OpenAI-compatible
server (``http``, :mod:`~benches.wire`).

* **time**: after a warm-up run of each, ``rounds`` rounds each run every
  variant once, the order rotating per round (A/B interleaved on a shared
  machine); per-batch µs is a run's time over its batches; the bench prints
  the median and the spread, and the median (and spread) of the per-round
  guarded / bare ratios;
* **peak memory**: ``tracemalloc``'s peak over one run above what was live
  before it (gc collected first), median of 3 interleaved rounds, in process;
* **instructions**: the in-process runs again in a child process under
  ``valgrind --tool=callgrind`` (when valgrind is installed): each run is
  bracketed by ``os.getpgrp()`` (counters zeroed: ``--zero-before``) and
  ``os.getppid()`` (counters dumped: ``--dump-before``), so a dump holds one
  run's instructions exactly (a first round is dumped and dropped: the first
  dumped run counts more); repeatable under load, where timing is not.
* **guarded really**: every guarded run must have reduced all its batches;
  with a tool that fails the same way in every call, ``enforce`` must stop the
  run and ``shadow`` must not; a bench that finds otherwise exits non-zero.

It prints numbers; it asserts nothing about time.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import os
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from benches import callgrind as bench_callgrind
from benches.wire import serve

FRAMEWORKS = ("langchain", "pydantic_ai", "openai_agents")
VARIANTS = ("bare", "shadow", "enforce")
TRANSPORTS = ("inproc", "http")
#: The hosts, loaded when the bench runs: each framework is an optional extra, and nothing
#: outside ``integrations`` imports an adapter (tests/test_langchain_adapter.py).
HOSTS_MODULE = "benches.hosts"
#: Its ``Runner``: ``run()`` makes one whole run and returns its ``Ran``; ``close()``.
Runner = Any

GUARDED = ("shadow", "enforce")
#: The label of a callgrind dump that is not counted.
WARM = "warm-up"
#: Batches of the run that checks enforce stops (and shadow does not).
STOP_CHECK_BATCHES = 6


@attrs.frozen
class Spread:
    """The median of some samples and their range."""

    median: float
    low: float
    high: float

    @classmethod
    def of(cls, samples: Sequence[float]) -> Spread:
        return cls(statistics.median(samples), min(samples), max(samples))

    def text(self, digits: int) -> str:
        return f"{self.median:.{digits}f} [{self.low:.{digits}f}-{self.high:.{digits}f}]"


@attrs.frozen
class Figures:
    """One framework's figures: per variant, and guarded / bare."""

    framework: str
    batches: int
    #: transport -> variant -> per-batch µs
    micros: dict[str, dict[str, Spread]]
    #: transport -> guarded variant -> per-round guarded / bare time ratio
    ratios: dict[str, dict[str, Spread]]
    #: variant -> peak bytes of one in-process run
    peak: dict[str, float]
    #: variant -> instructions per batch (None: not measured)
    instructions: dict[str, Spread] | None
    #: variant -> (batches run, batches the guard reduced, stopped) on the failing workload
    stop_check: dict[str, tuple[int, int | None, bool]]
    guarded_ok: bool

    def peak_ratio(self, variant: str) -> float:
        return self.peak[variant] / self.peak["bare"]

    def instruction_ratio(self, variant: str) -> float | None:
        if self.instructions is None:
            return None
        return self.instructions[variant].median / self.instructions["bare"].median


def _runners(
    framework: str, transport: str, *, batches: int, workload: str, base_url: str
) -> dict[str, Runner]:
    host = importlib.import_module(HOSTS_MODULE).HOSTS[framework]
    return {
        v: host(v, transport, batches=batches, workload=workload, base_url=base_url)
        for v in VARIANTS
    }


def _close(runners: dict[str, Runner]) -> None:
    for runner in runners.values():
        runner.close()


def _rotated(round_: int) -> list[str]:
    shift = round_ % len(VARIANTS)
    return list(VARIANTS[shift:] + VARIANTS[:shift])


def _timed(
    runners: dict[str, Runner], batches: int, rounds: int
) -> tuple[dict[str, Spread], dict[str, Spread], bool]:
    ok = True
    for variant, runner in runners.items():  # warm-up, and the guarded check
        ran = runner.run()
        expected = None if variant == "bare" else batches
        ok = ok and ran.batches == batches and ran.guarded == expected and not ran.stopped
    samples: dict[str, list[float]] = {v: [] for v in VARIANTS}
    ratios: dict[str, list[float]] = {v: [] for v in GUARDED}
    for round_ in range(rounds):
        took: dict[str, float] = {}
        for variant in _rotated(round_):
            gc.collect()
            start = time.perf_counter()
            runners[variant].run()
            took[variant] = time.perf_counter() - start
            samples[variant].append(took[variant] / batches * 1e6)
        for variant in GUARDED:
            ratios[variant].append(took[variant] / took["bare"])
    return (
        {v: Spread.of(s) for v, s in samples.items()},
        {v: Spread.of(r) for v, r in ratios.items()},
        ok,
    )


def _peaks(runners: dict[str, Runner], rounds: int = 3) -> dict[str, float]:
    peaks: dict[str, list[float]] = {v: [] for v in VARIANTS}
    for round_ in range(rounds):
        for variant in _rotated(round_):
            gc.collect()
            tracemalloc.start()
            try:
                before = tracemalloc.get_traced_memory()[0]
                tracemalloc.reset_peak()
                runners[variant].run()
                peaks[variant].append(tracemalloc.get_traced_memory()[1] - before)
            finally:
                tracemalloc.stop()
    return {v: statistics.median(p) for v, p in peaks.items()}


StopFacts = dict[str, tuple[int, int | None, bool]]


def _stop_check(framework: str, base_url: str) -> tuple[StopFacts, bool]:
    runners = _runners(
        framework, "inproc", batches=STOP_CHECK_BATCHES, workload="failing", base_url=base_url
    )
    try:
        seen = {v: runners[v].run() for v in VARIANTS}
    finally:
        _close(runners)
    facts = {v: (r.batches, r.guarded, r.stopped) for v, r in seen.items()}
    bare, shadow, enforce = seen["bare"], seen["shadow"], seen["enforce"]
    ok = (
        bare.batches == STOP_CHECK_BATCHES
        and bare.guarded is None
        and shadow.batches == STOP_CHECK_BATCHES == shadow.guarded
        and not shadow.stopped
        and enforce.stopped
        and enforce.guarded == enforce.batches < STOP_CHECK_BATCHES
    )
    return facts, ok


# -- instructions, under callgrind --------------------------------------------------------


def _child(framework: str, batches: int, rounds: int) -> None:
    """In the callgrind child: one dump per run, the order printed as JSON."""
    runners = _runners(framework, "inproc", batches=batches, workload="mixed", base_url="")
    for runner in runners.values():
        runner.run()  # warm-up: lazy imports and caches are not a batch's cost
    order: list[str] = []
    # Round -1 is measured and dropped: the first dumped run counts more than later ones
    # (by up to 3x, whatever the variant), so it is not a batch's cost either.
    for round_ in range(-1, rounds):
        for variant in _rotated(round_):
            gc.collect()
            os.getpgrp()  # --zero-before=os_getpgrp
            runners[variant].run()
            os.getppid()  # --dump-before=os_getppid
            order.append(variant if round_ >= 0 else WARM)
    _close(runners)
    print(json.dumps(order))


def _instructions(framework: str, batches: int, rounds: int) -> dict[str, Spread] | None:
    if not bench_callgrind.available():
        return None
    child = ["--callgrind-child", framework, "--batches", str(batches), "--rounds", str(rounds)]
    order, totals = bench_callgrind.run("benches.adapters", child, timeout=3600)
    per = bench_callgrind.per_batch(order, totals, VARIANTS, batches=batches, skip=WARM)
    return {v: Spread.of(s) for v, s in per.items()}


# -- the figures, and printing them -------------------------------------------------------


def measure(
    framework: str,
    *,
    batches: int,
    rounds: int,
    instructions: bool,
    instruction_rounds: int = 3,
    memory_rounds: int = 3,
) -> Figures:
    micros: dict[str, dict[str, Spread]] = {}
    ratios: dict[str, dict[str, Spread]] = {}
    ok = True
    with serve() as base_url:
        for transport in TRANSPORTS:
            runners = _runners(
                framework, transport, batches=batches, workload="mixed", base_url=base_url
            )
            try:
                micros[transport], ratios[transport], timed_ok = _timed(runners, batches, rounds)
                ok = ok and timed_ok
                if transport == "inproc":
                    peak = _peaks(runners, memory_rounds)
            finally:
                _close(runners)
        stop_check, stop_ok = _stop_check(framework, base_url)
    counted = _instructions(framework, batches, instruction_rounds) if instructions else None
    return Figures(
        framework=framework,
        batches=batches,
        micros=micros,
        ratios=ratios,
        peak=peak,
        instructions=counted,
        stop_check=stop_check,
        guarded_ok=ok and stop_ok,
    )


def show(figures: Figures, print_: Callable[[str], None] = print) -> None:
    f = figures
    print_(f"adapter {f.framework}: runs of {f.batches} batches of 4 parallel calls")
    for transport in TRANSPORTS:
        m, r = f.micros[transport], f.ratios[transport]
        print_(
            f"  {transport}, µs per batch, median [range]: bare {m['bare'].text(0)}, "
            + ", ".join(f"{v} {m[v].text(0)} (/ bare {r[v].text(2)})" for v in GUARDED)
        )
    print_(
        f"  peak memory of one run (tracemalloc): bare {f.peak['bare'] / 1024:.0f} KiB, "
        + ", ".join(
            f"{v} {f.peak[v] / 1024:.0f} KiB (/ bare {f.peak_ratio(v):.2f})" for v in GUARDED
        )
    )
    if f.instructions is None:
        print_("  instructions: not counted (valgrind not installed, or --no-instructions)")
    else:
        i = f.instructions
        print_(
            "  instructions per batch (callgrind, in process): "
            f"bare {i['bare'].median / 1e6:.2f} M, "
            + ", ".join(
                f"{v} {i[v].median / 1e6:.2f} M (/ bare {f.instruction_ratio(v):.3f})"
                for v in GUARDED
            )
        )
    stop = f.stop_check
    print_(
        f"  guarded: every guarded run reduced all its batches; a tool failing every call: "
        f"enforce stopped after {stop['enforce'][0]} of {STOP_CHECK_BATCHES} batches, "
        f"shadow ran {stop['shadow'][0]}, bare {stop['bare'][0]}: "
        f"{'yes' if f.guarded_ok else 'NO'}"
    )


#: The package each framework's extra installs.
PACKAGES = {
    "langchain": "langchain.agents",
    "pydantic_ai": "pydantic_ai",
    "openai_agents": "agents",
}


def _missing(framework: str) -> str | None:
    try:
        importlib.import_module(PACKAGES[framework])
    except ImportError:
        return PACKAGES[framework]
    return None


def report_adapters(
    frameworks: Sequence[str] = FRAMEWORKS,
    *,
    batches: int = 20,
    rounds: int = 7,
    instructions: bool = True,
) -> bool:
    """Measure and print every framework's figures; False when a guarded run was not guarded."""
    ok = True
    for framework in frameworks:
        missing = _missing(framework)
        if missing is not None:
            print(f"adapter {framework}: not measured ({missing} is not installed)")
            continue
        figures = measure(framework, batches=batches, rounds=rounds, instructions=instructions)
        show(figures)
        ok = ok and figures.guarded_ok
    return ok


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benches.adapters")
    parser.add_argument("--frameworks", default=",".join(FRAMEWORKS))
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--no-instructions", action="store_true")
    parser.add_argument("--callgrind-child", choices=FRAMEWORKS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.batches < 1 or args.rounds < 1:
        print("bench_adapters: --batches and --rounds must be positive", file=sys.stderr)
        return 2
    if args.callgrind_child:
        _child(args.callgrind_child, args.batches, args.rounds)
        return 0
    frameworks = [name.strip() for name in args.frameworks.split(",") if name.strip()]
    unknown = sorted(set(frameworks) - set(FRAMEWORKS))
    if unknown or not frameworks:
        print(
            f"bench_adapters: unknown framework(s) {', '.join(unknown) or '(none)'}; "
            f"known: {', '.join(FRAMEWORKS)}",
            file=sys.stderr,
        )
        return 2
    ok = report_adapters(
        frameworks, batches=args.batches, rounds=args.rounds, instructions=not args.no_instructions
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
