"""Where the guard reaches a CLI: each settings file of each scope, the project's, the plugin.

Read only, and tolerant: a settings file that cannot be read is named as such
(``unreadable``), never a crash.  Each install found says its scope, the file,
the command a CLI runs and the mode it acts in: the command's ``--mode``, or for
a command without one (the Claude Code plugin's) the operator's
(:mod:`tool_failure_guard.hooks.config`).  ``hook status`` reports them and
``hook install`` warns when one already reaches the CLI.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import attrs

from tool_failure_guard.hooks.clis import HOOK_CLIS
from tool_failure_guard.hooks.config import configured_mode, read_config
from tool_failure_guard.hooks.install import installed_commands
from tool_failure_guard.hooks.settings_file import SettingsError, read_settings, target_of

#: The project's own settings files, per CLI (read in the current folder).
PROJECT_SETTINGS: Final = {
    "claude-code": (".claude/settings.json", ".claude/settings.local.json"),
    "qwen-code": (".qwen/settings.json",),
    "gemini-cli": (".gemini/settings.json",),
    "codex": (),
}
#: The plugin's name in this repository's marketplace (``.claude-plugin/marketplace.json``).
PLUGIN_NAME: Final = "tool-failure-guard"
#: The executable the plugin's launcher tries first, relative to the plugin's folder.
PLUGIN_VENV_EXECUTABLE: Final = "../../.venv/bin/tool-failure-guard"


@attrs.frozen
class FoundInstall:
    """One install of the guard that reaches ``cli``."""

    cli: str
    scope: str
    where: str  #: what to call it in a message (the scope and the file, or the plugin)
    path: Path | None  #: the settings file's target (None: a plugin)
    command: str
    mode: str
    executable: str | None  #: what runs (None: nothing found)
    state_dir: Path
    telemetry: str | None = None


def _scopes(cli: str) -> dict[str, str]:
    import importlib

    scopes: dict[str, str] = importlib.import_module(HOOK_CLIS[cli]).SCOPES
    return scopes


def settings_files(cli: str, cwd: Path) -> Iterator[tuple[str, Path]]:
    """(scope, file) of every settings file ``cli`` reads here."""
    for scope, name in _scopes(cli).items():
        yield scope, Path(os.path.expanduser(name))
    for name in PROJECT_SETTINGS.get(cli, ()):
        yield "project", cwd / name


def find_installs(cli: str, cwd: Path | None = None) -> list[FoundInstall]:
    """Every install reaching ``cli`` (settings files, then the plugin)."""
    found, _problems = find_installs_and_problems(cli, cwd)
    return found


def find_installs_and_problems(
    cli: str, cwd: Path | None = None
) -> tuple[list[FoundInstall], list[str]]:
    """The installs, and the settings files that could not be read."""
    here = Path.cwd() if cwd is None else cwd
    found: list[FoundInstall] = []
    problems: list[str] = []
    seen: set[Path] = set()
    for scope, path in settings_files(cli, here):
        target = target_of(path)
        if target in seen or not target.exists():
            continue
        seen.add(target)
        try:
            settings = read_settings(path)
        except (SettingsError, OSError) as error:
            problems.append(f"{path} (scope {scope}) cannot be read: {error}")
            continue
        seen_commands: set[str] = set()
        for parsed in installed_commands(settings, cli):
            if parsed.text in seen_commands:
                continue
            seen_commands.add(parsed.text)
            found.append(
                FoundInstall(
                    cli=cli,
                    scope=parsed.scope or scope,
                    where=f"{scope}: {path}",
                    path=target,
                    command=parsed.text,
                    mode=parsed.mode or configured_mode(cli),
                    executable=parsed.executable,
                    state_dir=parsed.state_dir(),
                    telemetry=parsed.telemetry,
                )
            )
    if cli == "claude-code":
        found += claude_plugins()
    elif cli in EXTENSION_FOLDERS:
        found += extensions(cli)
    return found, problems


def claude_plugins() -> list[FoundInstall]:
    """This project's Claude Code plugin, where the user's settings enable it."""
    home = Path(os.path.expanduser("~"))
    try:
        user = read_settings(home / ".claude" / "settings.json")
    except (SettingsError, OSError):
        return []
    enabled = user.get("enabledPlugins")
    if not isinstance(enabled, dict):
        return []
    installed = _installed_plugins(home)
    found = []
    for key, on in enabled.items():
        name, _, _market = str(key).partition("@")
        if name != PLUGIN_NAME or on is not True:
            continue
        root = installed.get(str(key))
        from tool_failure_guard.hooks.state import default_state_dir

        found.append(
            FoundInstall(
                cli="claude-code",
                scope="plugin",
                where=f"plugin: {key}" + (f" ({root})" if root else ""),
                path=None,
                command="${CLAUDE_PLUGIN_ROOT}/scripts/tool-failure-guard-hook claude-code",
                mode=configured_mode("claude-code"),
                executable=plugin_executable(root),
                state_dir=default_state_dir("claude-code"),
            )
        )
    return found


#: Where Qwen Code and Gemini CLI keep an installed extension of this project.
EXTENSION_FOLDERS: Final = {
    "qwen-code": "~/.qwen/extensions/tool-failure-guard",
    "gemini-cli": "~/.gemini/extensions/tool-failure-guard",
}


def extensions(cli: str) -> list[FoundInstall]:
    """This project's extension for ``cli`` where the user installed it."""
    folder = Path(os.path.expanduser(EXTENSION_FOLDERS[cli]))
    try:
        hooks = (folder / "hooks" / "hooks.json").read_text(encoding="utf-8")[:65536]
    except (OSError, UnicodeDecodeError):
        return []
    if f'tool-failure-guard-hook\\" {cli}' not in hooks:
        return []
    from tool_failure_guard.hooks.state import default_state_dir

    return [
        FoundInstall(
            cli=cli,
            scope="plugin",
            where=f"extension: {folder}",
            path=None,
            command=f"{folder}/scripts/tool-failure-guard-hook {cli}",
            mode=configured_mode(cli),
            executable=plugin_executable(None),
            state_dir=default_state_dir(cli),
        )
    ]


def _installed_plugins(home: Path) -> dict[str, str]:
    """Plugin key -> its folder, from Claude Code's ``installed_plugins.json`` (both forms)."""
    path = home / ".claude" / "plugins" / "installed_plugins.json"
    try:
        with path.open("rb") as stream:
            value = json.loads(stream.read(4 * 1024 * 1024))
    except (OSError, ValueError, RecursionError):
        return {}
    plugins = value.get("plugins") if isinstance(value, dict) else None
    roots: dict[str, str] = {}
    for key, entry in plugins.items() if isinstance(plugins, dict) else ():
        entries = entry if isinstance(entry, list) else [entry]
        for each in entries:
            if isinstance(each, dict) and isinstance(each.get("installPath"), str):
                roots[str(key)] = each["installPath"]
                break
    return roots


def plugin_executable(root: str | None) -> str | None:
    """What the plugin's launcher runs: the clone's ``.venv``, else the path ``hook
    configure`` recorded, else ``tool-failure-guard`` on PATH (None: none of them)."""
    candidates = []
    if root:
        candidates.append(os.path.normpath(os.path.join(root, PLUGIN_VENV_EXECUTABLE)))
    recorded = read_config().get("executable")
    if isinstance(recorded, str):
        candidates.append(recorded)
    for candidate in candidates:
        if runnable(candidate):
            return candidate
    return shutil.which("tool-failure-guard")


def runnable(executable: str) -> bool:
    """The file is there, executable, and its ``#!`` interpreter too (a moved venv's is not)."""
    if not os.access(executable, os.X_OK):
        return False
    try:
        with open(executable, "rb") as stream:
            first = stream.readline(4096)
    except OSError:
        return False
    if first.startswith(b"#!"):
        words = first[2:].decode("utf-8", "replace").split()
        if words and os.path.isabs(words[0]) and not os.access(words[0], os.X_OK):
            return False
    return True
