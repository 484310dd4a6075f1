"""Installing a coding-CLI hook: merge its entries into a settings JSON, or take them out.

Qwen Code and Gemini CLI read the same ``hooks`` shape as Claude Code
(``{"hooks": {"Event": [{"matcher": "*", "hooks": [{"type": "command",
"command": ...}]}]}}``).  Installing adds one entry per event the CLI's hook
module names, plus the switch that keeps hooks on at that scope (Qwen Code:
``disableAllHooks: false``; Gemini CLI: ``hooksConfig.enabled: true``), and
keeps everything else as it was; installing twice changes nothing more than
installing once (an entry of ours is replaced, never doubled).  Uninstalling
removes only entries whose command runs ``tool_failure_guard hook <cli>``.
Sans-IO: a settings document in, a new one out.
"""

from __future__ import annotations

import copy
import shlex
import sys
from collections.abc import Sequence
from typing import Any, Final

#: What every command line of ours holds (and what uninstall looks for).
MARKER: Final = "tool_failure_guard hook"


def command_line(cli: str, mode: str, python: str | None = None) -> str:
    """The hook command written into settings: this interpreter, the CLI, the mode."""
    parts = [python or sys.executable, "-m", "tool_failure_guard", "hook", cli, "--mode", mode]
    return " ".join(shlex.quote(p) for p in parts)


def _ours(hook: Any, cli: str) -> bool:
    if not isinstance(hook, dict):
        return False
    command = hook.get("command")
    return isinstance(command, str) and f"{MARKER} {cli} " in command + " "


def _without_ours(entries: Any, cli: str) -> list[Any]:
    kept = []
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict) and isinstance(entry.get("hooks"), list):
            hooks = [h for h in entry["hooks"] if not _ours(h, cli)]
            if not hooks and entry["hooks"]:
                continue
            entry = {**entry, "hooks": hooks}
        kept.append(entry)
    return kept


def uninstall(document: dict[str, Any], cli: str) -> dict[str, Any]:
    """``document`` without any hook entry of ours for ``cli``."""
    result = copy.deepcopy(document)
    hooks = result.get("hooks")
    if not isinstance(hooks, dict):
        return result
    for event in list(hooks):
        kept = _without_ours(hooks[event], cli)
        if kept:
            hooks[event] = kept
        else:
            del hooks[event]
    if not hooks:
        del result["hooks"]
    return result


def install(
    document: dict[str, Any],
    cli: str,
    events: Sequence[str],
    command: str,
    switch: tuple[tuple[str, ...], bool],
    timeout: int | None = None,
) -> dict[str, Any]:
    """``document`` with one entry of ours per event and the scope's hooks switch set."""
    if "hooks" in document and not isinstance(document["hooks"], dict):
        raise ValueError('the settings\' "hooks" is not an object; fix it by hand first')
    result = uninstall(document, cli)
    hooks = result.setdefault("hooks", {})
    hook: dict[str, Any] = {"type": "command", "command": command}
    if timeout is not None:
        hook["timeout"] = timeout
    for event in events:
        hooks.setdefault(event, []).append({"matcher": "*", "hooks": [dict(hook)]})
    path, value = switch
    place = result
    for key in path[:-1]:
        inner = place.get(key)
        if not isinstance(inner, dict):
            inner = place[key] = {}
        place = inner
    place[path[-1]] = value
    return result
