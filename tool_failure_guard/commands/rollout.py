"""``tool-failure-guard rollout``: rollout evidence from exported telemetry (optional extra)."""

from __future__ import annotations

import argparse
import sys

HELP = "rollout evidence: check invariants, judge gates, assign owners, simulate a fleet"


def configure(parser: argparse.ArgumentParser) -> None:
    # rollout.options imports no optional dependency: `--help` works without the extra.
    from tool_failure_guard.rollout.options import configure as configure_rollout

    configure_rollout(parser)


def run(args: argparse.Namespace) -> int:
    try:
        from tool_failure_guard.rollout import cli
    except ImportError as error:
        from tool_failure_guard._extras import MissingExtra

        missing = MissingExtra("rollout", error.name or "a dependency")
        print(f"tool-failure-guard rollout: {missing}", file=sys.stderr)
        return 2
    status: int = cli.run(args)
    return status
