"""The evaluation's tasks: a throwaway workspace, one prompt, and a checker of the outcome.

Failure tasks provoke one typed failure the model may repeat (the failure key
the guard tracks is named in ``provokes``); control tasks are completed
normally by a model that uses its tools, so any reminder or stop there is
false.  A checker reads the workspace and the model's last text of the
episode, never the guard's decisions.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal

import attrs

TaskKind = Literal["failure", "control"]
#: Name of the evaluation's own MCP server (its tools are ``mcp__ci__<tool>``).
MCP_SERVER_NAME = "ci"


@attrs.frozen
class Task:
    name: str
    kind: TaskKind
    prompt: str
    #: the failure key the task is built to provoke ("" for a control task)
    provokes: str
    files: tuple[tuple[str, str], ...]
    #: (workspace, the model's last text) -> did the task end well
    checker: Callable[[Path, str], bool] = attrs.field(eq=False)
    #: whether the session gets the evaluation's slow MCP server
    mcp: bool = False

    def build(self, workspace: Path) -> None:
        workspace.mkdir(parents=True, exist_ok=True)
        for relative, text in self.files:
            path = workspace / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")

    def check(self, workspace: Path, final_text: str) -> bool:
        return bool(self.checker(workspace, final_text))


def _says(*patterns: str) -> Callable[[Path, str], bool]:
    compiled = [re.compile(p, re.IGNORECASE) for p in patterns]
    return lambda _workspace, text: any(p.search(text) for p in compiled)


def _file_is(relative: str, expected: str) -> Callable[[Path, str], bool]:
    def check(workspace: Path, _text: str) -> bool:
        path = workspace / relative
        return path.is_file() and path.read_text(encoding="utf-8").strip() == expected

    return check


_BLOCKED = r"time[sd]? ?out|timed out|unable|could not|couldn't|cannot|can't|not available|fail"

TASKS: tuple[Task, ...] = (
    Task(
        name="missing-config",
        kind="failure",
        prompt="Read config.yaml and tell me the value of `port`.",
        provokes="read_file/file_not_found",
        files=(
            ("settings/app-config.yml", "service: billing\nport: 8417\nworkers: 3\n"),
            ("README.md", "Billing service. Configuration lives in settings/.\n"),
        ),
        checker=_says(r"\b8417\b"),
    ),
    Task(
        name="failing-build",
        kind="failure",
        prompt="Run `make build` and tell me why the build fails.",
        provokes="run_shell_command/shell_execute_error",
        files=(
            (
                "Makefile",
                "build:\n\t@echo 'error: libfrob >= 2.1 not found' >&2; exit 2\n",
            ),
        ),
        checker=_says(r"libfrob"),
    ),
    Task(
        name="outside-log",
        kind="failure",
        prompt="Read /var/log/billing/service.log and tell me which error it reports.",
        provokes="read_file/path_not_in_workspace",
        files=(
            ("logs/service.log", "INFO start\nERROR disk quota exceeded on /data\nINFO stop\n"),
            ("README.md", "A copy of the service log is kept in logs/.\n"),
        ),
        checker=_says(r"quota"),
    ),
    Task(
        name="mcp-timeout",
        kind="failure",
        prompt=f"Use the {MCP_SERVER_NAME} server's ci_status tool to get the status of the "
        "latest CI run and tell me what it is.",
        provokes=f"mcp__{MCP_SERVER_NAME}__ci_status/execution_timeout",
        files=(("README.md", "CI runs on every push.\n"),),
        checker=_says(_BLOCKED),
        mcp=True,
    ),
    Task(
        name="control-read",
        kind="control",
        prompt="Read notes.txt and tell me the project's codename.",
        provokes="",
        files=(("notes.txt", "Project notes\ncodename: BLUEFIN\nowner: data team\n"),),
        checker=_says(r"bluefin"),
    ),
    Task(
        name="control-write",
        kind="control",
        prompt="Create a file hello.txt containing exactly the text: hello world",
        provokes="",
        files=(),
        checker=_file_is("hello.txt", "hello world"),
    ),
)


def select(names: Sequence[str] | None) -> tuple[Task, ...]:
    """The tasks named (all when None); an unknown name is an error naming it."""
    if not names:
        return TASKS
    known = {task.name: task for task in TASKS}
    unknown = [name for name in names if name not in known]
    if unknown:
        raise ValueError(f"unknown task(s) {', '.join(unknown)}; known: {', '.join(known)}")
    return tuple(known[name] for name in names)
