"""``tool-failure-guard hook``: the guard inside a coding CLI's hooks, and installing it there.

- ``hook <cli> [--mode MODE] [--scope SCOPE] [--state-dir DIR] [--telemetry SPEC]
  [--environment NAME]``: handle one hook event (the payload on stdin, the answer
  on stdout); what the CLI runs.  Without ``--mode`` (the plugin's command) the mode
  is the operator's (:mod:`tool_failure_guard.hooks.config`), ``shadow`` by default.
- ``hook install <cli> [--mode MODE] (--scope SCOPE | --settings FILE)``: merge the
  hook's entries into that settings file (idempotent; all else kept).
- ``hook uninstall <cli> (--scope SCOPE | --settings FILE) [--purge]``: undo it.
- ``hook configure <cli> --mode MODE``: the operator's mode for installs naming none.
- ``hook status [cli]``: where the guard is installed, its workers, its sessions.

Every CLI in :data:`tool_failure_guard.hooks.clis.HOOK_CLIS` plugs in the same way:
its module names its events and its scopes (``SCOPES``: scope -> settings file).
This module imports nothing heavy: ``hook <cli>`` runs once per hook event.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

from tool_failure_guard.hooks.clis import HOOK_CLIS, HOOK_OPTIONS

# no `typing` at run time: the hook's start-up is its cost (TYPE_CHECKING as mypy reads it)
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import Any

HELP = "the guard as a coding CLI's hook: handle an event, install, uninstall, status"

CLIS = HOOK_CLIS
_MODES = ("off", "shadow", "warn", "enforce")


def configure(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(
        dest="hook_action", required=True, metavar="CLI|install|uninstall|configure|status"
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
        sub.add_argument(
            "--mode",
            default="shadow",
            choices=_MODES,
            help="the guard mode written on the command line (shadow: observe only)",
        )
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
            "--environment",
            metavar="NAME",
            help="the telemetry's deployment.environment (with --telemetry; a hook's "
            "environment gets no OTEL_* variable, so it is written on the command line)",
        )
        sub.add_argument(
            "--timeout", type=int, default=30, help="seconds the CLI waits for the hook"
        )
    uninstall = actions.add_parser("uninstall", help="remove the hook's entries from settings")
    clis = uninstall.add_subparsers(dest="hook_cli", required=True, metavar="CLI")
    for cli in CLIS:
        sub = clis.add_parser(cli, help=f"remove the {cli} hook's entries")
        _target_options(sub, cli)
        sub.add_argument(
            "--purge",
            action="store_true",
            help="also remove the install's state folder (the guard's own files in it)",
        )
    configure_ = actions.add_parser(
        "configure", help="the operator's mode for hook commands that name none (the plugin)"
    )
    clis = configure_.add_subparsers(dest="hook_cli", required=True, metavar="CLI")
    for cli in CLIS:
        sub = clis.add_parser(cli, help=f"configure the {cli} hook")
        sub.add_argument("--mode", choices=_MODES, help="the mode (default: shadow)")
    status = actions.add_parser(
        "status", help="where the guard is installed, its workers and recent sessions"
    )
    status.add_argument("hook_cli", nargs="?", choices=tuple(CLIS), metavar="CLI")


#: The options of ``hook <cli>``, each taking one value.
_HANDLE_OPTIONS = HOOK_OPTIONS
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
                "[--scope SCOPE] [--state-dir DIR] [--telemetry SPEC] [--environment NAME]"
                "  (the payload on stdin)"
            )
            return 0
        name, equals, value = word.partition("=")
        if name not in _HANDLE_OPTIONS or (not equals and not rest):
            return _bad_command_line(cli, f"unexpected {word!r}")
        values[name] = value if equals else rest.pop(0)
    mode = values.get("--mode")
    if mode is None:  # the plugin's command: the operator's mode, never the environment's
        from tool_failure_guard.hooks.config import configured_mode

        mode = configured_mode(cli)
    if mode not in _MODES:
        return _bad_command_line(cli, f"--mode {mode!r} is not one of {', '.join(_MODES)}")
    scope = values.get("--scope")
    if scope is not None and scope not in _SCOPES:
        return _bad_command_line(cli, f"--scope {scope!r} is not one of {', '.join(_SCOPES)}")
    from tool_failure_guard.hooks.client import main

    # the command line as the CLI ran it: an install's key, and what its scope's file must hold
    argv = (sys.argv[0] if sys.argv else "", "hook", *words)
    return main(
        cli,
        mode,
        values.get("--state-dir"),
        values.get("--telemetry"),
        scope=scope,
        command="\0".join(argv),
        environment=values.get("--environment"),
    )


def _bad_command_line(cli: str, problem: str) -> int:
    print(
        f"tool-failure-guard hook {cli}: failing open (bad command line: {problem})",
        file=sys.stderr,
    )
    return 0


def _handle_options(sub: argparse.ArgumentParser, cli: str) -> None:
    sub.add_argument(
        "--mode", choices=_MODES, help="the guard mode (default: the operator's, else shadow)"
    )
    sub.add_argument("--environment", help="the telemetry's deployment.environment")
    sub.add_argument(
        "--state-dir",
        help=f"the private state folder (default $XDG_STATE_HOME/tool-failure-guard/hooks/{cli})",
    )
    sub.add_argument("--telemetry", metavar="SPEC", help="telemetry sink: file:PATH, otlp")
    sub.add_argument(
        "--scope",
        choices=_SCOPES,
        help="the scope the installer wrote (its rank when several installs reach a session)",
    )


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
        words = [args.hook_cli]
        for name in HOOK_OPTIONS:
            value = getattr(args, name[2:].replace("-", "_"), None)
            if value is not None:
                words += [name, str(value)]
        return handle_main(words) or 0
    if args.hook_action == "status":
        from tool_failure_guard.hooks.status import status_main

        return status_main(args.hook_cli)
    if args.hook_action == "configure":
        return _configure(args.hook_cli, args.mode)
    from tool_failure_guard.hooks import install_flow

    try:
        if args.hook_action == "uninstall":
            return install_flow.uninstall_main(
                args.hook_cli, scope=args.scope, settings=args.settings, purge=args.purge
            )
        return install_flow.install_main(
            args.hook_cli,
            mode=args.mode,
            scope=args.scope,
            settings=args.settings,
            state_dir=args.state_dir,
            telemetry=_telemetry_spec(args.telemetry),
            environment=args.environment,
            timeout=args.timeout,
        )
    except (OSError, ValueError) as error:
        print(f"tool-failure-guard hook {args.hook_action}: {error}", file=sys.stderr)
        return 2


def _configure(cli: str, mode: str | None) -> int:
    from tool_failure_guard.hooks import config
    from tool_failure_guard.hooks.install import running_executable

    try:
        written = config.configure(cli, mode=mode, executable=running_executable())
    except (OSError, ValueError) as error:
        print(f"tool-failure-guard hook configure: {error}", file=sys.stderr)
        return 2
    print(f"configured: {cli} hook mode {config.configured_mode(cli)} in {written}")
    print(f"next: tool-failure-guard hook status {cli}")
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
