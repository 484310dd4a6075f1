"""Merging into a settings object: this project's entries in or out, missing keys set or dropped.

Pure functions on the parsed JSON (no files): :mod:`~tool_failure_guard.hooks.install`
reads and writes the file around them.  ``own`` says which handler is this
project's (an exact parse of its command); everything else is kept as it came.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any


def _without_own(groups: list[Any], own: Callable[[Any], bool]) -> list[Any]:
    """``groups`` without this project's commands (a group left empty goes too)."""
    kept: list[Any] = []
    for group in groups:
        if isinstance(group, dict) and isinstance(group.get("hooks"), list):
            handlers = [h for h in group["hooks"] if not own(h)]
            if len(handlers) != len(group["hooks"]):
                if handlers:
                    kept.append({**group, "hooks": handlers})
                continue
        elif own(group):
            continue
        kept.append(group)
    return kept


def removed(settings: Mapping[str, Any], own: Callable[[Any], bool]) -> dict[str, Any]:
    """``settings`` without this project's entries (an event left empty is dropped)."""
    result = dict(settings)
    hooks = settings.get("hooks")
    if not isinstance(hooks, dict):
        return result
    kept: dict[str, Any] = {}
    for event, groups in hooks.items():
        left = _without_own(groups, own) if isinstance(groups, list) else groups
        if left != [] or groups == []:
            kept[event] = left
    result["hooks"] = kept
    return result


def merged(
    settings: Mapping[str, Any],
    entries: Mapping[str, list[dict[str, Any]]],
    own: Callable[[Any], bool],
) -> dict[str, Any]:
    """``settings`` with this project's old entries replaced by ``entries``, all else kept."""
    result = removed(settings, own)
    hooks: dict[str, Any] = dict(result.get("hooks") or {})
    for event, groups in entries.items():
        hooks[event] = [*hooks.get(event, []), *groups]
    result["hooks"] = hooks
    return result


KeyPath = tuple[str, ...]


def pin_missing(
    settings: dict[str, Any], pin: Mapping[str, Any], prefix: KeyPath = ()
) -> tuple[list[tuple[KeyPath, Any]], list[tuple[KeyPath, Any, Any]]]:
    """Set in ``settings`` (in place) each key of ``pin`` it lacks; what was added, and
    each (key path, value found, value wanted) left as the user set it."""
    added: list[tuple[KeyPath, Any]] = []
    kept: list[tuple[KeyPath, Any, Any]] = []
    for key, value in pin.items():
        path = (*prefix, key)
        if key not in settings:
            settings[key] = copy.deepcopy(value)
            added.append((path, copy.deepcopy(value)))
        elif isinstance(value, Mapping) and isinstance(settings[key], dict):
            inner = dict(settings[key])
            more, left = pin_missing(inner, value, path)
            settings[key] = inner
            added += more
            kept += left
        elif settings[key] != value:
            kept.append((path, settings[key], value))
    return added, kept


def drop_added(settings: dict[str, Any], path: KeyPath, value: Any) -> None:
    """Remove the key at ``path`` when it still holds ``value`` (objects it leaves empty go)."""
    parents = [settings]
    for key in path[:-1]:
        inner = parents[-1].get(key)
        if not isinstance(inner, dict):
            return
        parents.append(dict(inner))
    if path[-1] not in parents[-1] or parents[-1][path[-1]] != value:
        return
    del parents[-1][path[-1]]
    for depth in range(len(path) - 1, 0, -1):
        if parents[depth]:
            parents[depth - 1][path[depth - 1]] = parents[depth]
        else:
            del parents[depth - 1][path[depth - 1]]


def dotted(path: KeyPath) -> str:
    return ".".join(path)
