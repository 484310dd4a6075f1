"""``tool-failure-guard hook``: the guard inside a coding CLI's hooks, and installing it there.

- ``hook <cli> [--mode MODE] [--state-dir DIR] [--telemetry SPEC]``: handle one
  hook event (the payload on stdin, the answer on stdout); what the CLI runs.
- ``hook install <cli> --mode MODE (--scope SCOPE | --settings FILE)``: merge
  the hook's entries into that settings file (idempotent; all else kept).
- ``hook uninstall <cli> (--scope SCOPE | --settings FILE)``: remove only them.

Every CLI in :data:`tool_failure_guard.hooks.clis.HOOK_CLIS` plugs in the same way:
its module names its events and its scopes (``SCOPES``: scope -> settings file).
This module imports nothing heavy: ``hook <cli>`` runs once per hook event.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

from tool_failure_guard.hooks.clis import HOOK_CLIS

# no `typing` at run time: the hook's start-up is its cost (TYPE_CHECKING as mypy reads it)
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import Any

HELP = "the guard as a coding CLI's hook: handle an event, install, uninstall"

CLIS = HOOK_CLIS
_MODES = ("off", "shadow", "warn", "enforce")


def configure(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(
        dest="hook_action", required=True, metavar="CLI|install|uninstall"
    )
    for cli in CLIS:
        sub = actions.add_parser(
            cli,
            help=f"handle one {cli} hook event (payload on stdin, answer on stdout)",
            description=(
                f"Handle one {cli} hook event: read the payload on stdin, answer on stdout. "
                "Fails open: on any internal error nothing is answered and the exit status is 0."
            ),
        )
        sub.set_defaults(hook_cli=cli, hook_action="handle")
        _handle_options(sub, cli)
    install = actions.add_parser("install", help="install the hook into a CLI's settings")
    clis = install.add_subparsers(dest="hook_cli", required=True, metavar="CLI")
    for cli in CLIS:
        sub = clis.add_parser(cli, help=f"install the {cli} hook")
        sub.add_argument("--mode", required=True, choices=_MODES, help="the guard mode")
        _target_options(sub, cli)
        sub.add_argument(
            "--state-dir",
            type=Path,
            help="the state folder written on the command line (default: the user's "
            "$XDG_STATE_HOME/tool-failure-guard/hooks/CLI at install time, or at hook time "
            "for --scope managed or system)",
        )
        sub.add_argument(
            "--telemetry", metavar="SPEC", help="a telemetry sink for the hook (file:PATH)"
        )
        sub.add_argument(
            "--timeout", type=int, default=30, help="seconds the CLI waits for the hook"
        )
    uninstall = actions.add_parser("uninstall", help="remove the hook's entries from settings")
    clis = uninstall.add_subparsers(dest="hook_cli", required=True, metavar="CLI")
    for cli in CLIS:
        sub = clis.add_parser(cli, help=f"remove the {cli} hook's entries")
        _target_options(sub, cli)


#: The options of ``hook <cli>``, each taking one value.
_HANDLE_OPTIONS = ("--mode", "--state-dir", "--telemetry", "--scope")
#: The scopes ``--scope`` names on a hook's command line (``hooks.installs.SCOPE_RANK``).
_SCOPES = ("managed", "system", "user", "plugin", "project", "settings")


def handle_main(words: list[str]) -> int | None:
    """``hook <cli> ...`` on its own (None: not an event to handle; the full parser).

    No ``argparse``: the hook runs once per event, and its start-up is its cost.  A
    command line it cannot read is a configuration error, reported on stderr, and the
    exit status stays 0 (fail open: Claude Code reads exit 2 from some events as a
    stop).
    """
    if not words or words[0] not in CLIS:
        return None
    cli = words[0]
    values: dict[str, str] = {}
    rest = words[1:]
    while rest:
        word = rest.pop(0)
        if word in ("-h", "--help"):
            print(
                f"usage: tool-failure-guard hook {cli} [--mode {{{','.join(_MODES)}}}] "
                "[--state-dir DIR] [--telemetry SPEC] [--scope SCOPE]  (the payload on stdin)"
            )
            return 0
        name, equals, value = word.partition("=")
        if name not in _HANDLE_OPTIONS or (not equals and not rest):
            return _bad_command_line(cli, f"unexpected {word!r}")
        values[name] = value if equals else rest.pop(0)
    mode = values.get("--mode", "shadow")
    if mode not in _MODES:
        return _bad_command_line(cli, f"--mode {mode!r} is not one of {', '.join(_MODES)}")
    scope = values.get("--scope")
    if scope is not None and scope not in _SCOPES:
        return _bad_command_line(cli, f"--scope {scope!r} is not one of {', '.join(_SCOPES)}")
    from tool_failure_guard.hooks.client import main

    # the command line as the CLI ran it: an install's key, and what its scope's file must hold
    argv = (sys.argv[0] if sys.argv else "", "hook", *words)
    return main(
        cli, mode, values.get("--state-dir"), values.get("--telemetry"), scope=scope, argv=argv
    )


def _bad_command_line(cli: str, problem: str) -> int:
    print(
        f"tool-failure-guard hook {cli}: failing open (bad command line: {problem})",
        file=sys.stderr,
    )
    return 0


def _handle_options(sub: argparse.ArgumentParser, cli: str) -> None:
    sub.add_argument("--mode", default="shadow", choices=_MODES, help="the guard mode (shadow)")
    sub.add_argument(
        "--state-dir",
        help=f"the private state folder (default $XDG_STATE_HOME/tool-failure-guard/hooks/{cli})",
    )
    sub.add_argument("--telemetry", metavar="SPEC", help="telemetry sink: file:PATH, otlp")


def _target_options(sub: argparse.ArgumentParser, cli: str) -> None:
    scopes = _module(cli).SCOPES
    target = sub.add_mutually_exclusive_group(required=True)
    target.add_argument(
        "--scope",
        choices=tuple(scopes),
        help=", ".join(f"{name}: {path}" for name, path in scopes.items()),
    )
    target.add_argument("--settings", type=Path, metavar="FILE", help="a settings file")


def _module(cli: str) -> Any:
    return importlib.import_module(CLIS[cli])


def run(args: argparse.Namespace) -> int:
    if args.hook_action == "handle":
        from tool_failure_guard.hooks.client import main

        return main(args.hook_cli, args.mode, args.state_dir, args.telemetry)
    from tool_failure_guard.hooks import install as installer

    module = _module(args.hook_cli)
    path = (
        args.settings
        if args.settings is not None
        else Path(os.path.expanduser(module.SCOPES[args.scope]))
    )
    try:
        if args.hook_action == "uninstall":
            changed = installer.uninstall(path, args.hook_cli)
            print(
                f"{'removed' if changed else 'nothing to remove'}: {args.hook_cli} hook in {path}"
            )
            return 0
        state_dir = args.state_dir
        if state_dir is None and args.scope not in ("managed", "system"):  # operator scopes
            from tool_failure_guard.hooks.state import default_state_dir

            state_dir = default_state_dir(args.hook_cli)
        telemetry = _telemetry_spec(args.telemetry)
        command = installer.hook_command(
            args.hook_cli,
            mode=args.mode,
            executable=installer.running_executable(),
            state_dir=state_dir.absolute() if state_dir is not None else None,
            telemetry=telemetry,
        )
        entries = getattr(module, "settings_entries", None)
        skipped = () if telemetry else getattr(module, "TELEMETRY_EVENTS", ())
        if entries is not None:
            made = {e: g for e, g in entries(command, args.timeout).items() if e not in skipped}
        else:
            events = [event for event in module.EVENTS if event not in skipped]
            made = installer.claude_style_entries(command, events, module.TOOL_EVENTS, args.timeout)
        pin = getattr(module, "PINNED_SETTINGS", None)
        installer.install(path, made, args.hook_cli, pin=pin)
    except (OSError, ValueError) as error:
        print(f"tool-failure-guard hook {args.hook_action}: {error}", file=sys.stderr)
        return 2
    print(f"installed: {args.hook_cli} hook ({args.mode}) in {path}")
    return 0


def _telemetry_spec(spec: str | None) -> str | None:
    """``--telemetry`` as the hook will read it: a known kind, a ``file:`` path made absolute
    (a hook runs in the project's folder, where a relative path would land)."""
    if spec is None:
        return None
    from tool_failure_guard.telemetry.build import FILE_KIND_PREFIX, TELEMETRY_KINDS

    if spec.startswith(FILE_KIND_PREFIX):
        path = spec[len(FILE_KIND_PREFIX) :]
        if not path:
            raise ValueError("--telemetry file:PATH needs a path")
        return FILE_KIND_PREFIX + os.path.abspath(os.path.expanduser(path))
    if spec not in TELEMETRY_KINDS:
        raise ValueError(f"--telemetry {spec!r} is not one of {TELEMETRY_KINDS} or file:PATH")
    return spec
