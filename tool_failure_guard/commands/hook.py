"""``tool-failure-guard hook``: the guard as a coding CLI's command hook, and its install.

``hook <cli> --mode MODE`` reads one hook payload on stdin and answers on
stdout in that CLI's protocol (:data:`CLIS`: CLI name -> its module).  The
mode comes from the command line the operator installed, never from the
environment, which a project's settings can reach.  ``hook install <cli>
--mode MODE (--scope system | --settings FILE)`` merges the hook's entries
into the CLI's settings JSON idempotently; ``hook uninstall <cli>`` removes
only them.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from pathlib import Path
from typing import Any

from tool_failure_guard.guard import GuardMode

HELP = "the guard as a coding CLI's command hook (and installing it)"
#: CLI name -> its hook module (each: CLI, EVENTS, handle, SYSTEM_SETTINGS, SWITCH).
CLIS: dict[str, str] = {
    "qwen-code": "tool_failure_guard.hooks.qwen_code",
    "gemini-cli": "tool_failure_guard.hooks.gemini_cli",
}
_MODES = [m.value for m in GuardMode]
#: The largest settings file install reads (bytes).
MAX_SETTINGS = 1024 * 1024


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", metavar="CLI|install|uninstall")
    parser.add_argument("cli", nargs="?", help="with install/uninstall: the CLI")
    parser.add_argument("--mode", choices=_MODES, help="the guard mode (required)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--scope", choices=["system"], help="the CLI's operator-scope settings")
    where.add_argument("--settings", type=Path, help="a settings JSON file to edit")


def run(args: argparse.Namespace) -> int:
    if args.target in ("install", "uninstall"):
        return _edit(args)
    module = _module(args.target)
    if args.mode is None:
        raise SystemExit("hook: --mode is required (off, shadow, warn or enforce)")
    from tool_failure_guard.hooks.runner import run_hook

    return run_hook(
        module, GuardMode(args.mode), sys.stdin.buffer, sys.stdout, sys.stderr, os.environ
    )


def _module(name: str | None) -> Any:
    if name not in CLIS:
        raise SystemExit(f"hook: unknown CLI {name!r}; one of: {', '.join(CLIS)}")
    return importlib.import_module(CLIS[name])


def _edit(args: argparse.Namespace) -> int:
    from tool_failure_guard.hooks import settings_merge

    module = _module(args.cli)
    if args.settings is None and args.scope is None:
        raise SystemExit("hook: say where: --scope system or --settings FILE")
    path = args.settings if args.settings is not None else Path(module.SYSTEM_SETTINGS)
    document: dict[str, Any] = {}
    if path.exists():
        if path.stat().st_size > MAX_SETTINGS:
            raise SystemExit(f"hook: {path} is larger than {MAX_SETTINGS} bytes")
        loaded = json.loads(path.read_text(encoding="utf-8") or "{}")
        if not isinstance(loaded, dict):
            raise SystemExit(f"hook: {path} does not hold a JSON object")
        document = loaded
    if args.target == "install":
        if args.mode is None:
            raise SystemExit("hook install: --mode is required (off, shadow, warn or enforce)")
        command = settings_merge.command_line(args.cli, args.mode)
        document = settings_merge.install(document, args.cli, module.EVENTS, command, module.SWITCH)
    else:
        document = settings_merge.uninstall(document, args.cli)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tfg-tmp")
    temporary.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    os.replace(temporary, path)
    print(f"{args.target}ed the {args.cli} hook in {path}")
    return 0
