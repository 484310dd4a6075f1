"""``make bench`` (rollout part): simulate speed, and check + gates over a large export.

Prints numbers, asserts nothing about time (machines here are shared):

1. ``simulate``: a fleet through the real guarded session (default 2,000
   owners × 7 days, ≈100k prompts) with two worker processes; target ≤ 5 min.
2. ``check`` + ``gates`` over 100k prompts by default (``--prompts 100000``; how cost
   grows: ``--prompts 100000,1000000``, which ``make bench-growth`` runs; ≈5.5 log
   records per prompt) of OTLP JSON lines, generated synthetically by
   DuckDB in a temporary directory (the same record shapes the sink writes);
   target ≤ 60 s and ≤ 2 GB resident at 1M.  Load (OTLP JSON -> DuckDB's
   ``logs``; for chdb, DuckDB -> Parquet -> ``otel_logs``) and analysis (the
   relations and every query of ``check`` + ``gates``) are timed apart, on
   DuckDB and on ClickHouse (chdb in-process: ``clickhouse`` with the relations
   inlined in every query, as on a server; ``clickhouse-tables`` with them as the
   session's temporary tables), ``--repeat`` times interleaved
   (the order rotating); each figure is the median with its min-max spread, and
   chdb / DuckDB is the ratio of analysis times within one repetition.  Beside
   them: the time DuckDB needs merely to scan the files, and how each median grows
   from the first size to the next.  ``--baseline DIR`` runs another checkout's
   code interleaved beside this one (its load and analysis ratios are printed, wall and
   CPU: on a shared machine the CPU seconds, all of the process's threads, move less).
   Each measurement runs in its own process and reports its own peak RSS (``VmHWM``).

Usage: ``python -m benches.rollout [--prompts N,M] [--repeat K]
[--baseline DIR] [--skip-simulate] [--skip-clickhouse]``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_GENERATE = """
COPY (
WITH prompts AS (
    SELECT i AS n, i % {owners} AS owner, (i // {owners}) % 7 AS day,
           CASE WHEN hash(i % {owners}) % 100 < 5 THEN 'enforce' ELSE 'warn' END AS mode,
           random() AS r, 1 + CAST(floor(random() * 8) AS INT) AS calls
    FROM range({prompts}) t(i)
),
records AS (
    SELECT owner, day, n, 0 AS k, struct_pack(
        timeUnixNano := CAST(CAST((1793491200 + day * 86400 + (n % 50000)) AS HUGEINT)
                             * 1000000000 AS VARCHAR),
        eventName := 'tool_failure_guard.prompt',
        attributes := [
            {{'key': 'prompt_id', 'value': {{'stringValue': 's' || n || '########0'}}}},
            {{'key': 'route', 'value': {{'stringValue': 'acp_foreground'}}}},
            {{'key': 'mode', 'value': {{'stringValue': mode}}}},
            {{'key': 'stop_reason', 'value': {{'stringValue':
                CASE WHEN r < 0.05 THEN 'cancelled' ELSE 'end_turn' END}}}},
            {{'key': 'model_turns', 'value': {{'intValue': CAST(calls + 1 AS VARCHAR)}}}},
            {{'key': 'tool_calls', 'value': {{'intValue': CAST(calls AS VARCHAR)}}}},
            {{'key': 'tool_call_cap', 'value': {{'intValue': '100'}}}},
            {{'key': 'batches', 'value': {{'intValue': CAST(calls AS VARCHAR)}}}},
            {{'key': 'input_tokens', 'value': {{'intValue': CAST(2000 + n % 997 AS VARCHAR)}}}},
            {{'key': 'output_tokens', 'value': {{'intValue': CAST(200 + n % 97 AS VARCHAR)}}}},
            {{'key': 'wall_time_ms', 'value': {{'intValue': CAST(1000 + n % 7919 AS VARCHAR)}}}},
            {{'key': 'drain_supported', 'value': {{'boolValue': r > 0.02}}}}
        ]) AS rec
    FROM prompts
    UNION ALL
    SELECT owner, day, n, c + 1, struct_pack(
        timeUnixNano := CAST(CAST((1793491200 + day * 86400 + (n % 50000)) AS HUGEINT)
                             * 1000000000 AS VARCHAR),
        eventName := 'tool_failure_guard.tool_call',
        attributes := [
            {{'key': 'prompt_id', 'value': {{'stringValue': 's' || n || '########0'}}}},
            {{'key': 'batch_ordinal', 'value': {{'intValue': CAST(c + 1 AS VARCHAR)}}}},
            {{'key': 'call_ordinal', 'value': {{'intValue': '0'}}}},
            {{'key': 'terminal_status', 'value': {{'stringValue': 'success'}}}},
            {{'key': 'execution_status', 'value': {{'stringValue': 'success'}}}},
            {{'key': 'tool_type', 'value': {{'stringValue': 'native'}}}},
            {{'key': 'provider_duplicate', 'value': {{'boolValue': false}}}}
        ])
    FROM prompts, range(calls) s(c)
)
SELECT [struct_pack(
    resource := struct_pack(attributes := [
        {{'key': 'deployment.environment', 'value': {{'stringValue': 'internal'}}}},
        {{'key': 'enduser.pseudo.id', 'value': {{'stringValue': 'owner-' || owner}}}},
        {{'key': 'service.version', 'value': {{'stringValue': '0.1.0'}}}}
    ]),
    scopeLogs := [struct_pack(logRecords := list(rec ORDER BY n, k))]
)] AS resourceLogs
FROM records GROUP BY owner, day, n // 200
) TO '{path}' (FORMAT json)
"""

_ANALYSE = """
import json, resource, sys, tempfile, time
from pathlib import Path
from tool_failure_guard.rollout import check, gates, load, otel_logs
from tool_failure_guard.rollout.engine import DuckDBEngine
import duckdb
import tool_failure_guard
try:
    from tool_failure_guard.rollout import spill
except ImportError:  # a --baseline checkout from before the spill directory
    spill = None
start, cpu = time.perf_counter(), time.process_time()
files = [Path(p) for p in sys.argv[2:]]
# Where the package itself lies (in older checkouts rollout/ is a link, so load.py resolves
# outside the checkout).
out = {"code": str(Path(tool_failure_guard.__file__).resolve().parents[1])}
if sys.argv[1] == "scan":
    con = spill.connect()
    source = " UNION ALL ".join(
        f"SELECT resourceLogs FROM {load._json_source(p)}" for p in files)
    n = con.execute(
        "SELECT sum(len(s.logRecords)) FROM (SELECT unnest(rl.scopeLogs) AS s FROM "
        f"(SELECT unnest(resourceLogs) AS rl FROM ({source})))").fetchone()[0]
    out = {"records": int(n)}
    spill.close(con)
else:
    if sys.argv[1] == "duckdb":
        con = load.connect(files)  # OTLP JSON -> the logs table
        out["load_seconds"] = round(time.perf_counter() - start, 2)
        out["load_cpu_seconds"] = round(time.process_time() - cpu, 2)
        start, cpu = time.perf_counter(), time.process_time()
        engine = DuckDBEngine(con)  # the relations, materialised: part of the analysis
    else:
        # The same records in a chdb table with the exporter's schema (via Parquet).
        from tool_failure_guard.rollout.engine import ChdbExecutor, ClickHouseEngine
        with tempfile.TemporaryDirectory() as tmp:
            parquet = Path(tmp) / "logs.parquet"
            con = load.connect(files)
            load.export_parquet(con, parquet)
            spill.close(con) if spill else con.close()
            executor = ChdbExecutor()
            executor.command(otel_logs.otel_logs_ddl())
            executor.command(
                "INSERT INTO otel_logs (Timestamp, EventName, ResourceAttributes, LogAttributes) "
                f"SELECT Timestamp, EventName, ResourceAttributes, LogAttributes "
                f"FROM file('{parquet}', Parquet)")
        out["load_seconds"] = round(time.perf_counter() - start, 2)
        out["load_cpu_seconds"] = round(time.process_time() - cpu, 2)
        start, cpu = time.perf_counter(), time.process_time()
        if sys.argv[1] == "clickhouse-tables":  # the relations as the session's tables
            engine = ClickHouseEngine(executor, session_tables=True)
        else:  # as on a server: the relations inlined in every query
            engine = ClickHouseEngine(executor)
    resource = check.preflight(engine, "bench")
    checked = check.check(engine, resource)
    judged = gates.gates(engine, checked)
    out["prompts"] = sum(e["supported_prompts"] + e["prompt_only_prompts"]
                         + e["unsupported_host_prompts"] + e["off_prompts"]
                         for e in checked["environments"].values())
    out["may_advance"] = [checked["may_advance"], judged["may_advance"]]
    if sys.argv[1].startswith("clickhouse"):
        out["queries"] = engine.queries
        out["result_mb"] = round(engine.result_bytes / 1e6, 2)
out["seconds"] = round(time.perf_counter() - start, 2)
out["cpu_seconds"] = round(time.process_time() - cpu, 2)
if sys.argv[1] != "scan":
    engine.close()
# VmHWM belongs to this process image (ru_maxrss would carry the parent's peak over fork).
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM:")]
out["peak_rss_mb"] = round(int(hwm[0].split()[1]) / 1024 if hwm
                           else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
print("RESULT " + json.dumps(out))
"""

Result = dict[str, object]


def _child(kind: str, files: list[Path], code: Path | None = None) -> Result:
    """Run one measurement in a fresh process (``code``: import the project from there)."""
    env = dict(os.environ)
    if code is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(code), env.get("PYTHONPATH")]))
    # -P: no current directory first on the path, so a --baseline checkout's code is what
    # runs even when the bench is started from this checkout (as make bench is).
    done = subprocess.run(
        [sys.executable, "-P", "-c", _ANALYSE, kind, *map(str, files)],
        capture_output=True,
        text=True,
        env=env,
    )
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-1:] or ["(no output)"]
        return {"failed": f"exit {done.returncode}: {tail[0]}"}
    line = next(x for x in reversed(done.stdout.splitlines()) if x.startswith("RESULT "))
    result: Result = json.loads(line[len("RESULT ") :])
    ran = Path(str(result.pop("code", "")))
    if code is not None and not ran.is_relative_to(code.resolve()):
        return {"failed": f"ran the code in {ran}, not the baseline {code}"}
    return result


def _spread(values: list[float]) -> str:
    """``median (min–max, n)`` of ``values``."""
    if not values:
        return "-"
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f}, n={len(values)})"


def _numbers(runs: list[Result], key: str) -> list[float]:
    return [float(str(r[key])) for r in runs if key in r]


def bench_simulate(owners: int, workers: int) -> None:
    from tool_failure_guard.rollout.simulate import FleetConfig, simulate

    with tempfile.TemporaryDirectory() as tmp:
        config = FleetConfig(owners=owners, days=7, prompts_per_day=7.0, percent=5.0, seed=7)
        summary = simulate(config, Path(tmp) / "fleet.jsonl", workers=workers)
        size = (Path(tmp) / "fleet.jsonl").stat().st_size
    print(
        f"simulate: {summary['owners']} owners x 7 days, {summary['prompts']} prompts through "
        f"the real session in {summary['seconds']:.1f} s with {workers} workers "
        f"({1000 * summary['seconds'] / max(1, summary['prompts']):.2f} ms/prompt wall; "
        f"{size / 1e6:.0f} MB of OTLP JSON)  [target <= 300 s]"
    )


def bench_analysis(
    prompts: int, *, clickhouse: bool = True, repeat: int = 3, baseline: Path | None = None
) -> dict[str, float]:
    """Load and analysis apart, per engine, ``repeat`` interleaved repetitions; medians."""
    from tool_failure_guard.rollout import spill

    kinds = ["duckdb", *(["clickhouse", "clickhouse-tables"] if clickhouse else [])]
    codes: list[tuple[str, Path | None]] = [("", None)]
    if baseline is not None:
        codes.append(("@baseline", baseline))
    runs: dict[str, list[Result]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "big.jsonl"
        started = time.perf_counter()
        con = spill.connect()
        con.execute(_GENERATE.format(owners=2000, prompts=prompts, path=path))
        spill.close(con)
        print(
            f"{prompts} prompts: generated {path.stat().st_size / 1e9:.2f} GB of OTLP JSON "
            f"lines in {time.perf_counter() - started:.1f} s"
        )
        scan = _child("scan", [path])
        print(f"  scan only: {scan}")
        order = [
            (kind + label, kind, code)
            for kind in kinds
            for label, code in codes
            if code is None or kind != "clickhouse-tables"  # new in this version
        ]
        for rep in range(repeat):
            # Interleaved, the order rotating per repetition: a burst of load from other
            # jobs lands on every side alike.
            shift = rep % len(order)
            for name, kind, code in order[shift:] + order[:shift]:
                result = _child(kind, [path], code)
                runs.setdefault(name, []).append(result)
                print(f"  [{rep + 1}/{repeat}] {name}: {result}", flush=True)
    summary: dict[str, float] = {}
    print(f"  {prompts} prompts, median (min-max, n) over {repeat} interleaved repetitions:")
    for name, results in runs.items():
        loads, seconds = _numbers(results, "load_seconds"), _numbers(results, "seconds")
        rss = _numbers(results, "peak_rss_mb")
        cpus = [_numbers(results, "load_cpu_seconds"), _numbers(results, "cpu_seconds")]
        print(
            f"    {name:22} load {_spread(loads)} s   analysis {_spread(seconds)} s   "
            f"peak RSS {_spread(rss)} MB"
        )
        if cpus[0] or cpus[1]:
            print(f"    {'':22} CPU: load {_spread(cpus[0])} s   analysis {_spread(cpus[1])} s")
        if loads:
            summary[f"{name} load"] = statistics.median(loads)
        if seconds:
            summary[f"{name} analysis"] = statistics.median(seconds)
    for kind, label, code in [(k, la, c) for k in kinds[1:] for la, c in codes]:
        ch, dd = runs.get(kind + label, []), runs.get("duckdb" + label, [])
        ratios = [
            float(str(c["seconds"])) / float(str(d["seconds"]))
            for c, d in zip(ch, dd, strict=False)
            if "seconds" in c and "seconds" in d
        ]
        if ratios:
            print(
                f"    analysis {kind}{label} / duckdb{label}: {_spread(ratios)}  [goal <= 1.5] "
                f"{'' if code is None else f'(code from {code})'}"
            )
    if baseline is not None:
        new, old = runs.get("duckdb", []), runs.get("duckdb@baseline", [])
        for key, what in (
            ("load_seconds", "load, wall"),
            ("load_cpu_seconds", "load, CPU"),
            ("seconds", "analysis, wall"),
            ("cpu_seconds", "analysis, CPU"),
        ):
            ratios = [
                float(str(n[key])) / float(str(o[key]))
                for n, o in zip(new, old, strict=False)
                if key in n and key in o and float(str(o[key])) > 0
            ]
            if ratios:
                goal = "  [goal <= 0.5]" if key.startswith("load") else ""
                print(f"    DuckDB {what}, this code / baseline: {_spread(ratios)}{goal}")
    return summary


def bench_growth(sizes: list[int], summaries: list[dict[str, float]]) -> None:
    """How each median grows from the smallest size to each larger one."""
    first = summaries[0]
    for size, summary in zip(sizes[1:], summaries[1:], strict=True):
        factor = size / sizes[0]
        parts = [
            f"{name} x{summary[name] / first[name]:.1f}"
            for name in summary
            if name in first and first[name] > 0
        ]
        print(f"growth {sizes[0]} -> {size} prompts (x{factor:g} the data): " + ", ".join(parts))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benches.rollout")
    parser.add_argument("--owners", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--prompts",
        default="100000",
        help="comma-separated fleet sizes; growth is reported against the first "
        "(make bench-growth: 100000,1000000)",
    )
    parser.add_argument("--repeat", type=int, default=3, help="interleaved repetitions per size")
    parser.add_argument(
        "--baseline",
        type=Path,
        help="a checkout of another version: its load and analysis run interleaved beside",
    )
    parser.add_argument("--skip-simulate", action="store_true")
    parser.add_argument("--skip-analysis", action="store_true")
    parser.add_argument(
        "--skip-clickhouse", action="store_true", help="no ClickHouse (chdb) figure"
    )
    args = parser.parse_args(argv)
    if not args.skip_analysis:
        sizes = [int(n) for n in str(args.prompts).split(",") if n.strip()]
        summaries = [
            bench_analysis(
                n,
                clickhouse=not args.skip_clickhouse,
                repeat=max(1, args.repeat),
                baseline=args.baseline if i == 0 else None,
            )
            for i, n in enumerate(sizes)
        ]
        if len(sizes) > 1:
            bench_growth(sizes, summaries)
    if not args.skip_simulate:
        bench_simulate(args.owners, args.workers)
    _ = resource  # the children report their own RSS
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
