"""``tool-failure-guard rollout ACTION``: exit 0 may advance, 1 may not, 2 bad input."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from rollout import analysis, assign, load, output

EXIT_ADVANCE = 0
EXIT_HOLD = 1
EXIT_BAD_INPUT = 2


def _emit(args: argparse.Namespace, result: dict[str, Any], text: str) -> None:
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(text)


def _analyse(args: argparse.Namespace) -> int:
    try:
        con = load.connect(list(args.files))
    except load.InputError as error:
        print(f"tool-failure-guard rollout: bad input: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    analysis.prepare(con)
    if args.rollout_command == "check":
        result = analysis.check(con)
        text = output.check_table(result)
        figures = (
            [("daily_rates", output.daily_plot(analysis.daily_rates(con)))] if args.report else []
        )
    else:
        result = analysis.gates(con, phase=args.phase, seed=args.seed, replicates=args.replicates)
        text = output.gates_table(result)
        figures = (
            [
                ("gate_intervals", output.forest_plot(result)),
                ("daily_rates", output.daily_plot(analysis.daily_rates(con))),
            ]
            if args.report
            else []
        )
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
        return _analyse(args)
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
    from rollout import simulate

    return simulate.main(args)
