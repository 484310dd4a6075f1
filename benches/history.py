"""What persisting one settled call outcome costs (``call_settled``: one write + fsync).

Part of ``tool-failure-guard bench``.  The records go to a temporary directory
under the current directory (fsync on a tmpfs would cost nothing and say
nothing); the response text is 1 KiB, a typical short tool result.  It prints
numbers and asserts nothing about time.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

from tool_failure_guard.session.persistence.history import HistoryStore
from tool_failure_guard.session.persistence.messages import Part, SettledCall


def settled_record_cost(records: int = 200, where: Path | None = None) -> tuple[float, float]:
    """Median and p90 wall time, in ms, of persisting one settled outcome."""
    with tempfile.TemporaryDirectory(dir=where or Path.cwd()) as root:
        store = HistoryStore(Path(root))
        store.create("bench", root)
        samples = []
        for index in range(records):
            settled = SettledCall(
                prompt_id="bench########0",
                part=Part(
                    kind="function_response",
                    call_id=f"call-{index}",
                    name="write_file",
                    status="success",
                    text="x" * 1024,
                ),
            )
            start = time.perf_counter_ns()
            store.append_settled("bench", settled)
            samples.append(time.perf_counter_ns() - start)
    median = statistics.median(samples) / 1e6
    p90 = statistics.quantiles(samples, n=10)[8] / 1e6
    return median, p90
