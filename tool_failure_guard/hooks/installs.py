"""The installs of the guard that reach one session, and the mode they act in together.

Every matching hook entry of every settings file runs on each event, so one
session may be reached by several installs of the guard (managed and user
scope, a project's ``.claude/settings.json``, ``--settings FILE``, the plugin,
two virtualenvs).  They act as one guard (:mod:`~tool_failure_guard.hooks.event_keys`
applies each event once); when their modes differ, the operator's scope
decides.  Each install registers in the session's state (its key: executable,
scope and mode from its command line) with its scope's rank and when it was
last seen; the **effective mode** is the mode of the highest-ranked install
seen within :data:`RECENT_S`, ties at one rank going to the least acting mode
(``off`` < ``shadow`` < ``warn`` < ``enforce``).

Ranks (:data:`SCOPE_RANK`): ``managed`` (Qwen Code's and Gemini CLI's ``system``) over ``user``
= ``plugin`` over ``project`` = ``settings``.  The scope is what the installer
wrote on the command line (``--scope``); a claim of an operator's scope
(``managed``/``system``/``user``) counts only when the hook's exact command
line is in that scope's settings file (user: in the home of the effective
user's passwd entry, never ``$HOME``, which a project's ``env`` can move); it
is read at most once per prompt per install (:func:`verified_rank`).  An
unverified claim, or none, ranks as ``project``.  An ``off`` install registers
(so a managed ``off`` wins) and applies nothing.
"""

from __future__ import annotations

import json
import os

# no `typing` at run time: the hook's start-up is its cost (TYPE_CHECKING as mypy reads it)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any, Final

#: The rank of an install's scope: the highest-ranked install's mode is the session's.
SCOPE_RANK: Final[dict[str, int]] = {
    "managed": 3,
    "system": 3,
    "user": 2,
    "plugin": 2,
    "project": 1,
    "settings": 1,
}
#: The scopes whose claim is checked against their settings file (the operator's).
VERIFIED_SCOPES: Final = ("managed", "system", "user")
#: The rank of an install whose scope is not verified (or not given).
PROJECT_RANK: Final = SCOPE_RANK["project"]
#: The modes from least to most acting (the tie-break at one rank: the least acting).
MODE_ORDER: Final = ("off", "shadow", "warn", "enforce")
#: An install not seen for this long (1 h) no longer counts for the effective mode.
RECENT_S: Final = 3600.0
#: The most installs a session's state keeps (the least recently seen go).
MAX_INSTALLS: Final = 16
#: The most bytes of a settings file read to verify a scope.
_MAX_SETTINGS_BYTES: Final = 4 * 1024 * 1024


def install_key(argv: Sequence[str], scope: str | None, mode: str) -> str:
    """An install's key: its executable, scope and mode (from its command line)."""
    executable = argv[0] if argv else ""
    return "\x1f".join((executable, scope or "", mode))


def _passwd_home() -> str | None:
    try:
        import pwd

        return pwd.getpwuid(os.geteuid()).pw_dir or None
    except (ImportError, KeyError):
        return None


def _settings_paths(cli: str, scope: str) -> list[str]:
    """The settings file of ``cli``'s operator scope ``scope``: the CLI module's ``SCOPES``
    (what ``hook install --scope`` writes), ``~`` the passwd entry's home."""
    import importlib

    from tool_failure_guard.hooks.clis import HOOK_CLIS

    name = HOOK_CLIS.get(cli)
    path = importlib.import_module(name).SCOPES.get(scope) if name else None
    if not isinstance(path, str):
        return []
    if path.startswith("~/"):
        home = _passwd_home()
        if home is None:
            return []
        path = os.path.join(home, path[2:])
    return [path]


def _commands(value: Any) -> list[str]:
    """Every hook ``command`` string in a settings object (``hooks.EVENT[].hooks[].command``)."""
    found: list[str] = []
    hooks = value.get("hooks") if isinstance(value, dict) else None
    if not isinstance(hooks, dict):
        return found
    for groups in hooks.values():
        for group in groups if isinstance(groups, list) else ():
            entries = group.get("hooks") if isinstance(group, dict) else None
            for entry in entries if isinstance(entries, list) else ():
                command = entry.get("command") if isinstance(entry, dict) else None
                if isinstance(command, str):
                    found.append(command)
    return found


def command_in_file(path: str, argv: Sequence[str]) -> bool:
    """Whether a hook command in the settings file ``path`` runs exactly ``argv``."""
    try:
        with open(path, "rb") as stream:
            data = stream.read(_MAX_SETTINGS_BYTES + 1)
        value = json.loads(data) if len(data) <= _MAX_SETTINGS_BYTES else None
    except (OSError, ValueError):
        return False
    import shlex

    wanted = list(argv)
    for command in _commands(value):
        try:
            if shlex.split(command) == wanted:
                return True
        except ValueError:
            continue
    return False


def verified_rank(cli: str, scope: str | None, argv: Sequence[str]) -> int:
    """The rank ``scope`` earns: an operator's scope only when its settings file has this
    exact command line; ``plugin`` only as :func:`_operators_plugin` allows;
    ``project``/``settings`` as claimed; else ``project``."""
    if scope is None or scope not in SCOPE_RANK:
        return PROJECT_RANK
    if scope == "plugin":
        return SCOPE_RANK[scope] if _operators_plugin(cli, argv) else PROJECT_RANK
    if scope not in VERIFIED_SCOPES:
        return SCOPE_RANK[scope]
    if argv and any(command_in_file(path, argv) for path in _settings_paths(cli, scope)):
        return SCOPE_RANK[scope]
    return PROJECT_RANK


def _operators_plugin(cli: str, argv: Sequence[str]) -> bool:
    """Whether a claim of the plugin's rank is the operator's plugin: its command names no
    ``--mode`` (the plugin's mode is the operator's) and the operator configured the plugin
    (``hook configure CLI``, a file in the passwd entry's home).  A project's entry claiming
    the plugin's rank therefore never ties with a user's install in a mode of its own, nor
    in the default mode of a plugin nobody configured."""
    if any(word == "--mode" or word.startswith("--mode=") for word in argv):
        return False
    from tool_failure_guard.hooks.config import read_config

    try:
        return isinstance(read_config().get(cli), dict)
    except (OSError, ValueError):
        return False


class Installs:
    """The installs registered in one session's state: key -> [scope, mode, rank, seen, checked]."""

    __slots__ = ("entries",)

    def __init__(self, entries: dict[str, list[Any]] | None = None) -> None:
        self.entries: dict[str, list[Any]] = entries or {}

    @classmethod
    def from_state(cls, stored: Any) -> Installs:
        """What :meth:`to_state` stored (anything else is forgotten: installs register again)."""
        if not isinstance(stored, dict):
            return cls()
        return cls({k: v for k, v in stored.items() if isinstance(k, str) and _is_entry(v)})

    def to_state(self) -> dict[str, list[Any]]:
        return self.entries

    def register(
        self,
        *,
        cli: str,
        mode: str,
        scope: str | None,
        argv: Sequence[str],
        prompt_id: str | None,
        now: float,
        verify: Callable[[str, str | None, Sequence[str]], int] | None = None,
    ) -> None:
        """This install seen now; its scope verified once per prompt (``prompt_id``)."""
        key = install_key(argv, scope, mode)
        entry = self.entries.pop(key, None)
        checked = prompt_id or ""
        fresh = entry is None or entry[4] != checked
        check = verify or verified_rank
        rank = check(cli, scope, argv) if fresh or entry is None else entry[2]
        self.entries[key] = [scope, mode, rank, now, checked]
        while len(self.entries) > MAX_INSTALLS:
            del self.entries[next(iter(self.entries))]

    def effective_mode(self, now: float) -> str | None:
        """The mode the session acts in: the highest rank seen recently, the least acting mode
        at a tie (None: no install seen recently)."""
        recent = [e for e in self.entries.values() if 0 <= now - e[3] <= RECENT_S]
        if not recent:
            return None
        top = max(e[2] for e in recent)
        modes: list[str] = [e[1] for e in recent if e[2] == top]
        return min(modes, key=MODE_ORDER.index)


def _is_entry(value: Any) -> bool:
    return (
        isinstance(value, list)
        and len(value) == 5
        and (value[0] is None or isinstance(value[0], str))
        and value[1] in MODE_ORDER
        and isinstance(value[2], int)
        and not isinstance(value[2], bool)
        and isinstance(value[3], int | float)
        and isinstance(value[4], str)
    )
