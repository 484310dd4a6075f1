"""``tool-failure-guard``: one console script, one module per subcommand.

Each subcommand module exposes ``HELP`` (one line), ``configure(parser)`` and
``run(args) -> int`` (the exit status).  Every module is imported to build
the parser, so each keeps its heavy imports (the ACP SDK, OpenTelemetry, the
statemachine engine) inside ``run``: ``replay`` never pays for them.
"""

from __future__ import annotations

import importlib
import sys

# no `typing` at run time: the hook's start-up is its cost (TYPE_CHECKING as mypy reads it)
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Iterator, Sequence
    from types import ModuleType

    _ParserMap = dict[str, argparse.ArgumentParser]
else:
    _ParserMap = dict

#: Subcommands run but not listed in ``--help``: developer tools for a checkout of the project.
HIDDEN: frozenset[str] = frozenset({"render"})

#: subcommand -> its module (in this room, :mod:`tool_failure_guard.commands`)
SUBCOMMANDS: dict[str, str] = {
    "replay": "tool_failure_guard.commands.replay",
    "render": "tool_failure_guard.commands.render",
    "agent": "tool_failure_guard.commands.agent",
    "demo": "tool_failure_guard.commands.demo",
    "rollout": "tool_failure_guard.commands.rollout",
    "transcripts": "tool_failure_guard.commands.transcripts",
    "hook": "tool_failure_guard.commands.hook",
}

_HELP = {
    "replay": "reduce JSON Lines batch receipts through the guard and print its decisions",
    # a developer command (it rewrites a checkout's diagrams/): left out of the user's help
    "render": "developer command, in a checkout: write diagrams/ from the statechart class",
    "agent": "serve the guarded ACP agent on stdio",
    "demo": "run the built-in failing-loop scenario in shadow, warn and enforce",
    "rollout": "rollout evidence: check invariants, judge gates, assign owners, simulate a fleet",
    "transcripts": "what the guard and peers' loop rules would have done on agents' own logs",
    "hook": "the guard as a coding CLI's command hook: handle an event, install, uninstall",
}


def build_parser() -> argparse.ArgumentParser:
    import argparse

    from tool_failure_guard._version import installed_version

    parser = argparse.ArgumentParser(
        prog="tool-failure-guard",
        description="Stops AI agents from burning turns on a tool that keeps failing.",
        allow_abbrev=False,  # `--mod enforce` is no `--mode enforce`
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {installed_version()}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module_name in SUBCOMMANDS.items():
        # argparse lists a subcommand in the help only when it is given ``help``
        if name in HIDDEN:
            sub = commands.add_parser(name, description=_HELP[name], allow_abbrev=False)
        else:
            sub = commands.add_parser(
                name, help=_HELP[name], description=_HELP[name], allow_abbrev=False
            )
        sub.set_defaults(_module=module_name)
        _module(module_name).configure(sub)
    # argparse names every choice in its "invalid choice" message: list the public ones only
    commands.choices = _ListedChoices(commands.choices or {})
    return parser


class _ListedChoices(_ParserMap):
    """The subcommands a word is checked against; iterating them (listing) skips HIDDEN.

    argparse checks ``word in choices`` and names ``', '.join(choices)`` when it is
    not: a hidden command still runs, and a mistyped one never lists it.
    """

    def __iter__(self) -> Iterator[str]:
        return (name for name in super().__iter__() if name not in HIDDEN)


def _module(name: str) -> ModuleType:
    return importlib.import_module(name)


def main(argv: Sequence[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    if len(words) >= 2 and words[0] == "hook":
        # ``hook <cli>`` runs once per hook event: its own small parser, no other command's
        # module imported (issue 31: the hook's cost is its start-up)
        from tool_failure_guard.commands.hook import handle_main

        handled = handle_main(words[1:])
        if handled is not None:
            return handled
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:  # no command: the help, not an error
        parser.print_help()
        return 0
    module = _module(args._module)
    try:
        status: int = module.run(args)
    except BrokenPipeError:  # e.g. `replay ... | head`
        sys.stderr.close()
        return 1
    return status
