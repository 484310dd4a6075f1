"""``tool-failure-guard rollout ACTION``: exit 0 may advance, 1 may not, 2 bad input.

Exit 1 is a verdict ("may not advance") that automation acts on, so nothing
but a verdict exits 1: input the analysis cannot conclude from (a missing
Resource dimension, a mistyped field, no records, a wrong table, an
unreachable server) exits 2 with a message naming it, and writes nothing; an
error of the analysis itself (a bug) exits 3, never 1 (Python's own exit
status for an uncaught exception).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from tool_failure_guard._extras import MissingExtra
from tool_failure_guard.redaction import redact_text
from tool_failure_guard.rollout import (
    agents,
    assign,
    check,
    gates,
    load,
    output,
    qwen_code,
    qwen_fleet,
    qwen_gates,
    qwen_output,
)
from tool_failure_guard.rollout.engine import (
    ClickHouseEngine,
    ConnectExecutor,
    Engine,
    Filters,
    InputError,
    redact,
)
from tool_failure_guard.rollout.errors import first_line

EXIT_ADVANCE = 0
EXIT_HOLD = 1
EXIT_BAD_INPUT = 2
EXIT_INTERNAL_ERROR = 3


def _emit(args: argparse.Namespace, result: dict[str, Any], text: str) -> None:
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(text)


def _filters(args: argparse.Namespace) -> Filters:
    return Filters(
        since=args.since,
        until=args.until,
        environments=tuple(args.environment or ()),
        service_versions=tuple(args.service_version or ()),
    )


def open_engine(args: argparse.Namespace) -> tuple[Engine, str]:
    """The engine the options name, and how to name its source in messages."""
    if args.clickhouse:
        if args.files:
            raise InputError("give telemetry files or --clickhouse, not both")
        executor = ConnectExecutor(args.clickhouse)
        try:
            engine = ClickHouseEngine(
                executor, table=args.table, filters=_filters(args), close=executor.close
            )
        except InputError:
            executor.close()
            raise
        return engine, f"{redact(args.clickhouse)} table {args.table}"
    if not args.files:
        raise InputError("no telemetry files given (or --clickhouse URL)")
    duck = load.duckdb_engine(list(args.files), _filters(args), temp_dir=args.temp_dir)
    return duck, ", ".join(map(str, args.files))


def analyse(
    engine: Engine, source: str, args: argparse.Namespace
) -> tuple[dict[str, Any], str, list[tuple[str, Any]]]:
    """Run ``check`` or ``gates``: (result, terminal text, report figures)."""
    filters = _filters(args).sql()
    agent, left_out = agents.choose(agents.counts(engine, filters), args.agent)
    if left_out:
        print(
            f"tool-failure-guard rollout: note: {left_out} records of the other agent "
            f"left out (--agent {agent})",
            file=sys.stderr,
        )
    if agent == agents.QWEN_CODE:
        return _analyse_qwen(engine, source, args, filters)
    resource = check.preflight(engine, source)
    checked = check.check(engine, resource)
    if args.rollout_command == "check":
        result, text = checked, output.check_table(checked)
        figures = (
            [("daily_rates", output.daily_plot(check.daily_rates(engine)))] if args.report else []
        )
        return result, text, figures
    result = gates.gates(
        engine, checked, phase=args.phase, seed=args.seed, replicates=args.replicates
    )
    figures = (
        [
            ("gate_intervals", output.forest_plot(result)),
            ("daily_rates", output.daily_plot(check.daily_rates(engine))),
        ]
        if args.report
        else []
    )
    return result, output.gates_table(result), figures


def _analyse_qwen(
    engine: Engine, source: str, args: argparse.Namespace, filters: str
) -> tuple[dict[str, Any], str, list[tuple[str, Any]]]:
    """``check``/``gates`` on Qwen Code's own records (``rollout.qwen_fleet``)."""
    run = qwen_fleet.Query(engine, filters)
    resource = qwen_fleet.preflight(run, source)
    # The guard counter is read from files only, and only when nothing is filtered out
    # (a cumulative counter has no per-record time or prompt to filter on).
    totals = (
        qwen_code.counter_totals(list(args.files))
        if args.files and not filters and not args.clickhouse
        else None
    )
    checked = qwen_fleet.check(run, engine.name, resource, totals)
    if args.rollout_command == "check":
        return checked, qwen_output.check_table(checked), []
    result = qwen_gates.gates(run, checked, phase=args.phase)
    return result, qwen_output.gates_table(result), []


def _analyse(args: argparse.Namespace) -> int:
    try:
        engine, source = open_engine(args)
        try:
            result, text, figures = analyse(engine, source, args)
        finally:
            engine.close()
    except InputError as error:
        message = output.escape_controls(str(error))
        print(f"tool-failure-guard rollout: bad input: {message}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except MissingExtra as missing:  # --clickhouse without the clickhouse extra
        print(f"tool-failure-guard rollout: {missing}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.report:
        try:
            output.write_report(
                args.report, f"rollout {args.rollout_command}", text, figures, result
            )
        except OSError as error:
            print(
                f"tool-failure-guard rollout: cannot write the report to {args.report}: "
                f"{error.strerror or type(error).__name__}",
                file=sys.stderr,
            )
            return EXIT_BAD_INPUT
    _emit(args, result, text)
    return EXIT_ADVANCE if result["may_advance"] else EXIT_HOLD


def run(args: argparse.Namespace) -> int:
    command = args.rollout_command
    if command in ("check", "gates"):
        try:
            return _analyse(args)
        except BrokenPipeError:  # the reader went away (`| head`): handled by the main CLI
            raise
        except Exception as error:  # a bug: say so, and never exit 1 (a verdict)
            detail = output.escape_controls(redact_text(first_line(error)))
            print(
                f"tool-failure-guard rollout: internal error, no verdict: "
                f"{type(error).__name__}: {detail}",
                file=sys.stderr,
            )
            return EXIT_INTERNAL_ERROR
    if command == "assign":
        treated = assign.in_treatment(args.owner, args.percent, args.salt)
        result = {
            "owner": args.owner,
            "percent": args.percent,
            "salt": args.salt,
            "bucket": assign.bucket(args.owner, args.salt),
            "arm": "treatment" if treated else "control",
        }
        _emit(args, result, result["arm"])
        return 0
    from tool_failure_guard.rollout import simulate

    return simulate.main(args)
