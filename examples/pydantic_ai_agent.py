"""A pydantic-ai agent with the repeated tool-call protection: one capability.

Any OpenAI-compatible chat-completions endpoint (``pip install
'tool-failure-guard[pydantic-ai]'``)::

    OPENAI_BASE_URL=http://localhost:11434/v1 OPENAI_API_KEY=ollama \\
        python examples/pydantic_ai_agent.py --model qwen2.5 --mode warn "Read notes.txt"

The agent has two tools working in ``--workspace``: ``read_file(path)`` and
``list_directory(path=".")``.  They fail the idiomatic pydantic-ai way,
``raise ToolFailed(...) from exc``, so the model sees the failure and the guard
classifies it by its cause (``file_not_found``...).  The guard is the one line
``capabilities=[RepeatedToolFailureCapability(...)]``; a stopped run's output
is a :class:`ProtectionStop` (the stop text, typed).  The mode is ``--mode``,
else the ``QWEN_CODE_ACP_REPEATED_TOOL_FAILURE_GUARD`` environment variable,
else ``shadow``.  Each batch's guard decision goes to stderr, the output to stdout.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from pydantic_ai import Agent, ToolFailed
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from tool_failure_guard.core import Action
from tool_failure_guard.guard import GuardMode
from tool_failure_guard.integrations.pydantic_ai import (
    ProtectionStop,
    RepeatedToolFailureCapability,
)

INSTRUCTIONS = "You are a careful assistant. Use the tools to answer."
MAX_OUTPUT_CHARS = 20_000


def build_agent(
    model: str,
    workspace: Path,
    *,
    mode: GuardMode | str | None = None,
    on_batch: Any = None,
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
        capabilities=[RepeatedToolFailureCapability(mode=mode, on_batch=on_batch)],
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("prompt")
    parser.add_argument("--model", required=True)
    parser.add_argument("--mode", choices=[m.value for m in GuardMode])
    parser.add_argument("--workspace", type=Path, default=Path("."))
    args = parser.parse_args(argv)

    def report(ordinal: int, action: Action) -> None:
        if action.decision is not None:
            print(f"guard: {action.decision.kind.value}", file=sys.stderr)

    agent = build_agent(args.model, args.workspace, mode=args.mode, on_batch=report)
    result = agent.run_sync(args.prompt)
    if isinstance(result.output, ProtectionStop):
        print(f"stopped: {result.output.loop_type}", file=sys.stderr)
    print(result.output)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
