"""Counting a bench child's instructions under callgrind, for every bench that does.

Timing on these shared 2-core machines swings more than the effects the benches
look for, so the adapter, core and attachment benches also count instructions:
they start themselves again as a child under ``valgrind --tool=callgrind``
with counting zeroed at ``os.getpgrp()`` and a dump taken at each
``os.getppid()``, so each measured stretch of the child is one dump.  The child
prints, as its last line, JSON saying what each stretch was (its order); the
caller pairs that with :func:`run`'s dump totals, in the order callgrind wrote
them.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path


def available() -> bool:
    """Whether valgrind is installed (the benches print no instructions without it)."""
    return shutil.which("valgrind") is not None


def run(module: str, args: Sequence[str], *, timeout: float) -> tuple[object, list[int]]:
    """``python -m module *args`` under callgrind: its last output line as JSON, and
    the instruction totals of its dumps in the order they were taken."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        raise RuntimeError("valgrind is not installed (apt-get install -y valgrind)")
    with tempfile.TemporaryDirectory() as directory:
        out = Path(directory) / "cg.out"
        command = [
            valgrind, "--tool=callgrind", f"--callgrind-out-file={out}",
            "--zero-before=os_getpgrp", "--dump-before=os_getppid",
            sys.executable, "-m", module, *args,
        ]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"callgrind child failed: {done.stderr[-2000:]}")
        said = json.loads(done.stdout.strip().splitlines()[-1])
        dumps = sorted(
            (p for p in Path(directory).glob("cg.out.*") if p.suffix[1:].isdigit()),
            key=lambda p: int(p.suffix[1:]),
        )
        return said, [total(p) for p in dumps]


def total(path: Path) -> int:
    """The instruction total callgrind wrote into one dump."""
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if line.startswith(("totals:", "summary:")):
            return int(line.split()[1])
    raise RuntimeError(f"no totals in {path.name}")


def per_batch(
    order: object, totals: Sequence[int], labels: Sequence[str], *, batches: int, skip: str
) -> dict[str, list[float]]:
    """Each label's instructions per batch, pairing the child's ``order`` (a JSON list of
    labels, one per measured stretch) with its dump totals; stretches labelled ``skip``
    (the warm-up) are dropped."""
    if not isinstance(order, list):
        raise RuntimeError(f"callgrind child printed no list of runs: {order!r}")
    if len(totals) < len(order):
        raise RuntimeError(f"callgrind wrote {len(totals)} dumps for {len(order)} runs")
    per: dict[str, list[float]] = {label: [] for label in labels}
    for label, counted in zip(order, totals[: len(order)], strict=True):
        if label != skip:
            per[label].append(counted / batches)
    return per
