"""The core's per-batch path a host pays, against ``observe`` alone (a ``make bench`` figure).

One batch, as an adapter drives it: four :class:`FunctionCall` values, ``admit``,
``open_batch``, four outcomes built with the core's constructors and settled,
``after_batch``.  Each prompt has four such batches of four calls to one tool
(one success, three typed failures: the reminder, then the stop in enforce).
The bare side reduces the very receipts those batches produced with a fresh
guard's ``observe``.  Both run over the same prompts in passes, the order
alternating per pass, gc off; printed: the median per-batch time of each and
the median and spread of the per-pass ratios.  When valgrind is installed the
same two sides also run in a child under ``valgrind --tool=callgrind`` (each
pass between ``os.getpgrp()``, counters zeroed, and ``os.getppid()``, counters
dumped; a warm-up pass of each first, three passes each, alternating): the
instructions per batch repeat to within a fraction of a percent whatever the
machine's load, so they are the figure to compare on a shared machine.
"""

from __future__ import annotations

import gc
import json
import os
import statistics
import sys
import time
from typing import Any

from benches import callgrind as bench_callgrind
from tool_failure_guard.core import FunctionCall, PromptProtection, Stop, outcomes
from tool_failure_guard.guard import (
    BatchReceipt,
    GuardMode,
    InputBoundary,
    RepeatedToolFailureGuard,
)

QUIET = InputBoundary()
#: This module's import name (also under ``python -m``), for the callgrind child.
_MODULE = __spec__.name if __spec__ is not None else "benches.core"
CALLS_PER_BATCH = 4


def _args(index: int) -> dict[str, Any]:
    return {"path": f"src/module_{index}.py", "offset": index * 10, "limit": 200}


ARGS = [_args(index) for index in range(CALLS_PER_BATCH)]


def guarded_prompt(number: int, receipts: list[BatchReceipt] | None = None) -> int:
    """One prompt through the host path; the batches it settled."""
    protection = PromptProtection(GuardMode.ENFORCE)
    batches = 0
    for batch_number in range(6):
        calls = [
            FunctionCall(call_id=f"call_{number}_{batch_number}_{i}", name="read_file", args=a)
            for i, a in enumerate(ARGS)
        ]
        admission = protection.admit(calls)
        batch = protection.open_batch(admission)
        for index, call in enumerate(admission.calls):
            if index == 0:
                batch.settle(outcomes.succeeded(call, "ok", tool="read_other"))
            else:
                batch.settle(outcomes.failed(call, "file_not_found", "no such file"))
        action = protection.after_batch(batch, QUIET)
        batches += 1
        if receipts is not None:
            receipts.append(batch.receipt())
        if isinstance(action, Stop):
            break
    return batches


def _bare(prompts: list[list[BatchReceipt]]) -> float:
    start = time.perf_counter()
    for receipts in prompts:
        guard = RepeatedToolFailureGuard(GuardMode.ENFORCE)
        for receipt in receipts:
            guard.observe(receipt, QUIET)
    return time.perf_counter() - start


def _guarded(count: int) -> float:
    start = time.perf_counter()
    for number in range(count):
        guarded_prompt(number)
    return time.perf_counter() - start


def _record(prompts: int) -> list[list[BatchReceipt]]:
    recorded: list[list[BatchReceipt]] = []
    for number in range(prompts):
        receipts: list[BatchReceipt] = []
        guarded_prompt(number, receipts)
        recorded.append(receipts)
    return recorded


def _callgrind_child(prompts: int) -> None:
    """In the callgrind child: warm-up, then 3 passes of each side, one dump per pass."""
    recorded = _record(prompts)
    gc.disable()
    order: list[str] = []
    for round_ in range(-1, 3):
        for side in ("guarded", "bare") if round_ % 2 == 0 else ("bare", "guarded"):
            os.getpgrp()  # --zero-before=os_getpgrp
            _guarded(prompts) if side == "guarded" else _bare(recorded)
            os.getppid()  # --dump-before=os_getppid
            order.append(side if round_ >= 0 else "warm-up")
    print(json.dumps({"order": order, "batches": sum(len(r) for r in recorded)}))


def instructions(prompts: int = 100) -> tuple[float, float] | None:
    """Median instructions per batch (guarded, bare) under callgrind; None without valgrind."""
    if not bench_callgrind.available():
        return None
    facts, totals = bench_callgrind.run(_MODULE, ["--callgrind-child", str(prompts)], timeout=1800)
    assert isinstance(facts, dict)
    if len(totals) < len(facts["order"]):
        raise RuntimeError(f"callgrind wrote {len(totals)} dumps for {len(facts['order'])} passes")
    per: dict[str, list[float]] = {"guarded": [], "bare": []}
    for side, total in zip(facts["order"], totals, strict=False):
        if side in per:
            per[side].append(total / facts["batches"])
    return statistics.median(per["guarded"]), statistics.median(per["bare"])


def report(prompts: int = 500, passes: int = 9) -> None:
    recorded = _record(prompts)
    batches = sum(len(r) for r in recorded)
    guarded: list[float] = []
    bare: list[float] = []
    enabled = gc.isenabled()
    gc.disable()
    try:
        for number in range(passes):
            if number % 2 == 0:
                guarded.append(_guarded(prompts))
                bare.append(_bare(recorded))
            else:
                bare.append(_bare(recorded))
                guarded.append(_guarded(prompts))
    finally:
        if enabled:
            gc.enable()
    ratios = sorted(g / b for g, b in zip(guarded, bare, strict=True))
    print(
        f"core per batch (admit, settle x{CALLS_PER_BATCH}, after_batch), {passes} passes of "
        f"{batches} batches alternating, gc off: median "
        f"{statistics.median(guarded) / batches * 1e6:.1f} µs; observe alone "
        f"{statistics.median(bare) / batches * 1e6:.2f} µs; ratio median "
        f"{statistics.median(ratios):.1f} (passes {ratios[0]:.1f}-{ratios[-1]:.1f})   "
        f"target <= 30 µs: {'met' if statistics.median(guarded) / batches <= 30e-6 else 'MISSED'}"
    )
    counted = instructions()
    if counted is None:
        print("core per batch, instructions: not counted (valgrind not installed)")
    else:
        guarded_instructions, bare_instructions = counted
        print(
            f"core per batch, instructions (callgrind, median of 3 passes): "
            f"{guarded_instructions / 1000:.0f} k; observe alone {bare_instructions / 1000:.1f} k;"
            f" ratio {guarded_instructions / bare_instructions:.1f}"
        )


if __name__ == "__main__":
    if sys.argv[1:2] == ["--callgrind-child"]:
        _callgrind_child(int(sys.argv[2]))
    else:
        report()
