"""A pydantic-ai agent with the repeated tool-call protection: one capability.

Any OpenAI-compatible chat-completions endpoint (from a clone, ``pip install -e
'.[pydantic-ai]'``)::

    OPENAI_BASE_URL=http://localhost:11434/v1 OPENAI_API_KEY=ollama \\
        python examples/pydantic_ai_agent.py --model qwen2.5 --mode warn "Read notes.txt"

The agent has two tools working in ``--workspace``: ``read_file(path)`` and
``list_directory(path=".")``.  They fail the idiomatic pydantic-ai way,
``raise ToolFailed(...) from exc``, so the model sees the failure and the guard
classifies it by its cause (``file_not_found``...).  The guard is the one line
``capabilities=[RepeatedToolFailureCapability(...)]``; a stopped run raises
:class:`ProtectionStopped` (a pydantic-ai ``UsageLimitExceeded``: no further
model request was made), with the stop text and the run's report.  The mode is
``--mode``, else the ``QWEN_CODE_ACP_REPEATED_TOOL_FAILURE_GUARD`` environment
variable, else ``shadow``.  Each batch's guard decision (``report_of``) goes to
stderr, with the guard's own log record of its first reminder and first stop;
the output goes to stdout.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from pydantic_ai import Agent, ToolFailed
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from tool_failure_guard.guard import GuardMode
from tool_failure_guard.integrations.pydantic_ai import (
    ProtectionStopped,
    RepeatedToolFailureCapability,
    RunReport,
    report_of,
)

INSTRUCTIONS = "You are a careful assistant. Use the tools to answer."
MAX_OUTPUT_CHARS = 20_000


def build_agent(
    model: str,
    workspace: Path,
    *,
    mode: GuardMode | str | None = None,
) -> Agent[None, str]:
    """The agent: pydantic-ai's OpenAI chat model (OPENAI_BASE_URL, OPENAI_API_KEY), two tools."""
    root = workspace.resolve()

    def inside(path: str) -> Path:
        target = (root / path).resolve()
        if target != root and root not in target.parents:
            raise ToolFailed(f"{path!r} is outside the workspace")
        return target

    def read_file(path: str) -> str:
        """Read a text file in the workspace."""
        try:
            return inside(path).read_text(encoding="utf-8")[:MAX_OUTPUT_CHARS]
        except OSError as exc:
            raise ToolFailed(f"cannot read {path!r}: {exc.strerror}") from exc

    def list_directory(path: str = ".") -> str:
        """List a directory of the workspace, one entry a line."""
        try:
            return "\n".join(sorted(os.listdir(inside(path))))[:MAX_OUTPUT_CHARS]
        except OSError as exc:
            raise ToolFailed(f"cannot list {path!r}: {exc.strerror}") from exc

    return Agent(
        OpenAIChatModel(model, provider=OpenAIProvider()),
        instructions=INSTRUCTIONS,
        tools=[read_file, list_directory],
        capabilities=[RepeatedToolFailureCapability(mode=mode)],
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("prompt")
    parser.add_argument("--model", required=True)
    parser.add_argument("--mode", choices=[m.value for m in GuardMode])
    parser.add_argument("--workspace", type=Path, default=Path("."))
    args = parser.parse_args(argv)

    def show(report: RunReport | None) -> None:
        for decision in report.decisions if report is not None else ():
            print(f"guard: {decision}", file=sys.stderr)

    agent = build_agent(args.model, args.workspace, mode=args.mode)
    try:
        result = agent.run_sync(args.prompt)
    except ProtectionStopped as stopped:  # the guard ended the run: new user input is needed
        show(stopped.report)
        print(f"stopped: {stopped.loop_type}", file=sys.stderr)
        print(stopped.stop.notice)
        return 0
    show(report_of(result))
    print(result.output)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
