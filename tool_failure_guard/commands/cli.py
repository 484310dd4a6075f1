"""``tool-failure-guard``: one console script, one module per subcommand.

Each subcommand module exposes ``HELP`` (one line), ``configure(parser)`` and
``run(args) -> int`` (the exit status).  Every module is imported to build
the parser, so each keeps its heavy imports (the ACP SDK, OpenTelemetry, the
statemachine engine) inside ``run``: ``replay`` never pays for them.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from types import ModuleType

from tool_failure_guard._version import installed_version

#: subcommand -> its module (in this room, :mod:`tool_failure_guard.commands`)
SUBCOMMANDS: dict[str, str] = {
    "replay": "tool_failure_guard.commands.replay",
    "render": "tool_failure_guard.commands.render",
    "bench": "tool_failure_guard.commands.bench",
    "agent": "tool_failure_guard.commands.agent",
    "demo": "tool_failure_guard.commands.demo",
    "rollout": "tool_failure_guard.commands.rollout",
    "transcripts": "tool_failure_guard.commands.transcripts",
    "hook": "tool_failure_guard.commands.hook",
}

_HELP = {
    "replay": "reduce JSON Lines batch receipts through the guard and print its decisions",
    "render": "write diagrams/ from the statechart class (or --check they are current)",
    "bench": "measure the guard's per-batch cost against the python-statemachine engine",
    "agent": "serve the guarded ACP agent on stdio",
    "demo": "run the built-in failing-loop scenario in shadow, warn and enforce",
    "rollout": "rollout evidence: check invariants, judge gates, assign owners, simulate a fleet",
    "transcripts": "what the guard and peers' loop rules would have done on agents' own logs",
    "hook": "the guard as a coding CLI's command hook (and installing it)",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tool-failure-guard",
        description="ACP repeated tool-call protection.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {installed_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, module_name in SUBCOMMANDS.items():
        sub = commands.add_parser(name, help=_HELP[name], description=_HELP[name])
        sub.set_defaults(_module=module_name)
        _module(module_name).configure(sub)
    return parser


def _module(name: str) -> ModuleType:
    return importlib.import_module(name)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    module = _module(args._module)
    try:
        status: int = module.run(args)
    except BrokenPipeError:  # e.g. `replay ... | head`
        sys.stderr.close()
        return 1
    return status
