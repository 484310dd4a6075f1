"""The ``rollout`` subcommands' options (no optional dependency imported here)."""

from __future__ import annotations

import argparse
import datetime
from pathlib import Path

#: The instants ``--since``/``--until`` may name: those both engines compare with a
#: record's time stamp alike (ClickHouse's ``DateTime64(9)`` holds 1900-01-01 ..
#: 2262-04-11; a bound past them overflows there, so both engines refuse it).
EARLIEST = datetime.datetime(1900, 1, 1, tzinfo=datetime.UTC)
LATEST = datetime.datetime(2262, 4, 11, tzinfo=datetime.UTC)


def instant_problem(moment: datetime.datetime) -> str | None:
    """Why ``moment`` (time zone aware) cannot bound the records, or None."""
    try:
        if EARLIEST <= moment <= LATEST:
            return None
    except OverflowError:  # an offset that pushes it past datetime's own range
        pass
    return (
        f"{moment.isoformat()} is outside the time stamps telemetry can hold "
        f"({EARLIEST.date()} .. {LATEST.date()}, UTC)"
    )


def _instant(value: str) -> datetime.datetime:
    """An ISO 8601 date or date-time; UTC unless it names an offset."""
    try:
        moment = datetime.datetime.fromisoformat(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not an ISO 8601 date or date-time (e.g. 2026-11-01 or "
            "2026-11-01T08:00:00Z)"
        ) from None
    moment = moment if moment.tzinfo else moment.replace(tzinfo=datetime.UTC)
    problem = instant_problem(moment)
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return moment


def _percent(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number") from None
    if not 0.0 <= number <= 100.0:
        raise argparse.ArgumentTypeError(f"{value} is not between 0 and 100")
    return number


def _analysis(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "files",
        nargs="*",
        type=Path,
        metavar="FILE",
        help="OTLP JSON lines files (--telemetry file:PATH, a Collector file exporter), "
        "Parquet files of the logs table, or Qwen Code's local telemetry outfile "
        "(analysed with DuckDB)",
    )
    parser.add_argument(
        "--clickhouse",
        metavar="URL",
        help="analyse in place on a ClickHouse server instead of files, e.g. "
        "http://user:password@host:8123/database (clickhouse-connect)",
    )
    parser.add_argument(
        "--table",
        default="otel_logs",
        metavar="TABLE",
        help="with --clickhouse: the Collector ClickHouse exporter's logs table "
        "(default: otel_logs; db.table allowed)",
    )
    parser.add_argument(
        "--since", type=_instant, metavar="TIME", help="only records at or after TIME (UTC)"
    )
    parser.add_argument(
        "--until", type=_instant, metavar="TIME", help="only records before TIME (UTC)"
    )
    parser.add_argument(
        "--environment",
        action="append",
        metavar="ENV",
        help="only this deployment.environment (repeatable)",
    )
    parser.add_argument(
        "--service-version",
        action="append",
        metavar="VERSION",
        help="only this service.version (repeatable)",
    )
    parser.add_argument(
        "--agent",
        choices=("tool-failure-guard", "qwen-code"),
        help="whose records to analyse: this project's agent or Qwen Code's own telemetry "
        "(default: whichever the input holds; an input holding both needs this)",
    )
    parser.add_argument(
        "--temp-dir",
        type=Path,
        metavar="DIR",
        help="DuckDB spills into a private directory under DIR, removed when the run ends "
        "(default: the system temporary directory, $TMPDIR or /tmp)",
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument(
        "--report",
        type=Path,
        metavar="DIR",
        help="also write an HTML report with plots to DIR (replaced atomically)",
    )
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed (default: 0)")


def configure(parser: argparse.ArgumentParser) -> None:
    commands = parser.add_subparsers(dest="rollout_command", required=True, metavar="ACTION")
    check = commands.add_parser(
        "check", help="Phase 1/2: invariants, would_warn/would_stop volumes, days covered"
    )
    _analysis(check)
    gates = commands.add_parser(
        "gates",
        help="Phase 3: enforce owners against warn owners (--phase warn: Phase 2, warn "
        "prompts against shadow prompts, before/after), owner-level intervals",
    )
    _analysis(gates)
    gates.add_argument(
        "--phase",
        choices=("warn", "enforce"),
        default="enforce",
        help="enforce (default): Phase 3, enforce owners against warn owners, randomised; "
        "warn: Phase 2, warn prompts against the same environment's shadow prompts "
        "(a before/after comparison, not randomised)",
    )
    gates.add_argument(
        "--replicates", type=int, default=200, help="bootstrap replicates (default: 200)"
    )
    assign = commands.add_parser(
        "assign", help="whether an owner is in the treatment (a pure, deterministic function)"
    )
    assign.add_argument("owner", metavar="OWNER", help="the pseudonymous owner id")
    assign.add_argument("--percent", type=_percent, required=True, metavar="P")
    assign.add_argument("--salt", required=True, metavar="S")
    assign.add_argument("--json", action="store_true")
    simulate = commands.add_parser(
        "simulate", help="run a synthetic fleet through the real guarded session"
    )
    simulate.add_argument(
        "--out",
        type=Path,
        required=True,
        metavar="FILE",
        help="OTLP JSON lines file to write (replaced)",
    )
    simulate.add_argument("--owners", type=int, default=200)
    simulate.add_argument("--days", type=int, default=7)
    simulate.add_argument(
        "--prompts-per-day",
        type=float,
        default=4.0,
        help="mean prompts per owner per day (default: 4)",
    )
    simulate.add_argument(
        "--phase",
        choices=("shadow", "warn", "enforce"),
        default="enforce",
        help="shadow/warn: every owner in that mode; enforce: "
        "--percent of owners enforce, the rest warn (default)",
    )
    simulate.add_argument("--percent", type=_percent, default=5.0)
    simulate.add_argument("--salt", default="wave-1")
    simulate.add_argument("--environment", default="internal")
    simulate.add_argument(
        "--completion-effect",
        type=float,
        default=0.0,
        help="treatment change in completion probability, e.g. -0.03 (treatment: enforce "
        "owners; with --phase warn every owner)",
    )
    simulate.add_argument(
        "--turns-effect",
        type=float,
        default=0.0,
        help="treatment's relative increase in a normal prompt's model turns, e.g. 0.3",
    )
    simulate.add_argument(
        "--start-day",
        type=int,
        default=0,
        help="first simulated day, 0 = 2026-11-01 (e.g. 7 for a warn fleet after a "
        "7-day shadow fleet of the same --seed, hence the same owners)",
    )
    simulate.add_argument(
        "--unsupported-share",
        type=float,
        default=0.05,
        help="share of owners on a host without the drain (default: 0.05)",
    )
    simulate.add_argument(
        "--prompt-only-share",
        type=float,
        default=0.0,
        help="share of owners on a plain ACP host declared prompt-only (default: 0)",
    )
    simulate.add_argument("--seed", type=int, default=1)
    simulate.add_argument("--workers", type=int, default=1, help="processes (default: 1)")
