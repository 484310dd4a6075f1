"""``make bench`` (rollout part): simulate speed, and check + gates over a large export.

Prints numbers, asserts nothing about time (machines here are shared):

1. ``simulate``: a fleet through the real guarded session (default 2,000
   owners × 7 days, ≈100k prompts) with two worker processes; target ≤ 5 min.
2. ``check`` + ``gates`` over ≥ 1M prompts (≥ 5M log records) of OTLP JSON
   lines, generated synthetically by DuckDB in a temporary directory (the
   same record shapes the sink writes); target ≤ 60 s and ≤ 2 GB resident.
   Reported beside the time DuckDB needs merely to scan the same files
   (read every record and count them), and beside the same analysis on the
   ClickHouse engine (chdb in-process, the records in an ``otel_logs`` table
   with the exporter's schema), with its queries and result bytes.  Each measurement runs in its own
   process and reports its own peak RSS (``VmHWM``).

Usage: ``python -m tool_failure_guard.rollout.bench [--owners N] [--prompts N] [--skip-simulate]``.
"""

from __future__ import annotations

import argparse
import json
import resource
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
from tool_failure_guard.rollout import check, gates, load, otel_logs, spill
start = time.perf_counter()
files = [Path(p) for p in sys.argv[2:]]
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
        engine = load.duckdb_engine(files)
    else:
        # The same records in a chdb table with the exporter's schema (via Parquet).
        from tool_failure_guard.rollout.engine import ChdbExecutor, ClickHouseEngine
        with tempfile.TemporaryDirectory() as tmp:
            parquet = Path(tmp) / "logs.parquet"
            con = load.connect(files)
            load.export_parquet(con, parquet)
            spill.close(con)
            executor = ChdbExecutor()
            executor.command(otel_logs.otel_logs_ddl())
            executor.command(
                "INSERT INTO otel_logs (Timestamp, EventName, ResourceAttributes, LogAttributes) "
                f"SELECT Timestamp, EventName, ResourceAttributes, LogAttributes "
                f"FROM file('{parquet}', Parquet)")
        loaded = time.perf_counter() - start
        start = time.perf_counter()
        engine = ClickHouseEngine(executor)
    resource = check.preflight(engine, "bench")
    checked = check.check(engine, resource)
    judged = gates.gates(engine, checked)
    out = {"prompts": sum(e["supported_prompts"] + e["prompt_only_prompts"]
                          + e["unsupported_host_prompts"] + e["off_prompts"]
                          for e in checked["environments"].values()),
           "may_advance": [checked["may_advance"], judged["may_advance"]]}
    if sys.argv[1] == "clickhouse":
        out["load_seconds"] = round(loaded, 1)
        out["queries"] = engine.queries
        out["result_mb"] = round(engine.result_bytes / 1e6, 2)
        out["owners"] = engine.rows("SELECT count(DISTINCT owner) FROM prompts")[0][0]
    engine.close()
out["seconds"] = round(time.perf_counter() - start, 1)
# VmHWM belongs to this process image (ru_maxrss would carry the parent's peak over fork).
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM:")]
out["peak_rss_mb"] = round(int(hwm[0].split()[1]) / 1024 if hwm
                           else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
print("RESULT " + json.dumps(out))
"""


def _child(kind: str, files: list[Path]) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", _ANALYSE, kind, *map(str, files)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-1:] or ["(no output)"]
        return {"failed": f"exit {done.returncode}: {tail[0]}"}
    line = next(x for x in reversed(done.stdout.splitlines()) if x.startswith("RESULT "))
    result: dict[str, object] = json.loads(line[len("RESULT ") :])
    return result


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


def bench_analysis(prompts: int, *, clickhouse: bool = True) -> None:
    from tool_failure_guard.rollout import spill

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "big.jsonl"
        started = time.perf_counter()
        con = spill.connect()
        con.execute(_GENERATE.format(owners=2000, prompts=prompts, path=path))
        spill.close(con)
        print(
            f"generated {path.stat().st_size / 1e9:.2f} GB of OTLP JSON lines "
            f"in {time.perf_counter() - started:.1f} s"
        )
        scan = _child("scan", [path])
        print(f"scan only: {scan}")
        full = _child("duckdb", [path])
        print(f"check + gates, DuckDB:     {full}  [targets <= 60 s, <= 2048 MB RSS]")
        if clickhouse:
            ch = _child("clickhouse", [path])
            print(
                f"check + gates, ClickHouse: {ch}  "
                "(chdb in-process; load = DuckDB -> Parquet -> otel_logs)"
            )
    if "seconds" in scan and "seconds" in full:
        ratio = float(str(full["seconds"])) / float(str(scan["seconds"]))
        print(f"check + gates (DuckDB) take {ratio:.2f}x the time of the scan")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tool_failure_guard.rollout.bench")
    parser.add_argument("--owners", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--prompts", type=int, default=1_000_000)
    parser.add_argument("--skip-simulate", action="store_true")
    parser.add_argument("--skip-analysis", action="store_true")
    parser.add_argument(
        "--skip-clickhouse", action="store_true", help="no ClickHouse (chdb) figure"
    )
    args = parser.parse_args(argv)
    if not args.skip_analysis:
        bench_analysis(args.prompts, clickhouse=not args.skip_clickhouse)
    if not args.skip_simulate:
        bench_simulate(args.owners, args.workers)
    _ = resource  # the children report their own RSS
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
