"""One importer per agent's log format, each a module with the same three names.

Each module defines ``KIND`` (the ``--kind`` value), ``sniff(path, head) ->
bool`` (``head``: the file's first bytes, at most 64 KiB; true when the file
is this kind's) and ``read(path) -> Iterator[Run]`` (raises
:class:`~tool_failure_guard.transcripts.model.TranscriptError` naming
``file:line`` on a damaged or truncated file).  Modules are imported only when
asked for, so one kind's parser never costs another's; a kind whose module is
not installed is left out of sniffing.  A kind whose transcript is a folder
of files (OpenHands) also defines ``owner(path) -> Path | None``: the folder a
file belongs to, which the walk reads once as one source.  Every importer reads through the one
reader in ``_read``: ``records`` / ``json_document`` (bounded reads, errors
naming ``file:line``, "truncated" for a cut-short end) and ``fingerprint``
(arguments as key-sorted JSON, digested: the identical-call rules' key);
``tool_failure_guard.agent_outcomes.vocabulary`` holds the error types they emit.
"""

from __future__ import annotations

import importlib
from types import ModuleType

#: kind -> module under this package
IMPORTERS: dict[str, str] = {
    "claude-code": "claude_code",
    "codex": "codex",
    "gemini-cli": "gemini_cli",
    "qwen-code": "qwen_code",
    "mini-swe-agent": "mini_swe_agent",
    "openhands": "openhands",
    "swe-agent": "swe_agent",
    "tool-failure-guard": "own_history",
}

#: kind -> where that agent keeps the logs its importer reads (``transcripts --help`` prints
#: this table; a new kind adds its row here, beside its row of :data:`IMPORTERS`).
LOG_LOCATIONS: dict[str, str] = {
    "claude-code": "~/.claude/projects/<project>/<session id>.jsonl",
    "codex": "~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<thread id>.jsonl",
    "gemini-cli": "~/.gemini/tmp/<project>/chats/session-*.jsonl",
    "qwen-code": "~/.qwen/projects/<cwd, '/' as '-'>/chats/<session id>.jsonl",
    "mini-swe-agent": "<name>.traj.json, where its run was told to save it (-o)",
    "openhands": "the conversation folder (base_state.json, events/) under the SDK's "
    "persistence dir; V0: ~/.openhands/sessions/<id>/, trajectory-<id>.json, output.jsonl",
    "swe-agent": "trajectories/<user>/<run>/<instance>/<instance>.traj",
    "tool-failure-guard": "<state dir>/sessions/<session id>.jsonl "
    "(~/.local/share/tool-failure-guard by default)",
}


def where_logs_live() -> str:
    """The table of :data:`LOG_LOCATIONS`, one kind a line, for ``transcripts --help``."""
    width = max(len(kind) for kind in IMPORTERS)
    rows = [f"  {kind:<{width}}  {LOG_LOCATIONS.get(kind, '?')}" for kind in IMPORTERS]
    return "where each agent keeps its logs (KIND  PATH):\n" + "\n".join(rows)


def importer(kind: str) -> ModuleType:
    """The importer module of ``kind``; a :class:`ValueError` naming the known kinds."""
    try:
        name = IMPORTERS[kind]
    except KeyError:
        known = ", ".join(sorted(IMPORTERS))
        raise ValueError(f"unknown transcript kind {kind!r}; known: {known}") from None
    return importlib.import_module(f"{__name__}.{name}")
