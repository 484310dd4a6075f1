"""A LangChain v1 agent (``create_agent``) guarded by the repeated tool-failure guard.

Runs against any OpenAI-compatible chat-completions endpoint::

    pip install -e '.[langchain]'
    OPENAI_BASE_URL=http://127.0.0.1:8000/v1 OPENAI_API_KEY=... \\
        python examples/langchain_agent.py --model my-model --mode enforce \\
        "Summarise the file TODO.md"

The agent has one tool, ``read_file``, reading files under ``--root``; its
failures go back to the model as error messages (``handle_tool_error``), and
the guard still observes and classifies them.  The guard's part is the marked
lines; everything else is a plain LangChain agent.  ``--stream`` runs it with
``agent.stream``.  Exit status: 0 when the run completed, 3 when the guard
stopped it.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_core.tools import StructuredTool, ToolException
from langchain_openai import ChatOpenAI

from tool_failure_guard.integrations.langchain import (  # guard
    ProtectionStopped,
    RepeatedToolFailureMiddleware,
)


class FileMissing(ToolException):
    """A file the model asked for does not exist (typed for the guard)."""

    error_type = "file_not_found"


def read_file_tool(root: Path) -> StructuredTool:
    def read_file(path: str) -> str:
        """Read a text file of the project (a path relative to its root)."""
        target = (root / path).resolve()
        if root not in target.parents and target != root:
            raise ToolException(f"{path} is outside the project")
        if not target.is_file():
            raise FileMissing(f"{path}: no such file")
        return target.read_text(encoding="utf-8")[:20_000]

    return StructuredTool.from_function(read_file, handle_tool_error=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("prompt")
    parser.add_argument("--model", default=os.environ.get("OPENAI_MODEL", "gpt-4o-mini"))
    parser.add_argument("--base-url", default=os.environ.get("OPENAI_BASE_URL"))
    parser.add_argument("--root", type=Path, default=Path.cwd())
    parser.add_argument("--mode", choices=("off", "shadow", "warn", "enforce"), default=None)
    parser.add_argument("--stream", action="store_true", help="run with agent.stream")
    args = parser.parse_args(argv)
    api_key = os.environ.get("OPENAI_API_KEY")
    if not api_key:
        parser.error("set OPENAI_API_KEY (any value for a local endpoint)")

    model = ChatOpenAI(model=args.model, base_url=args.base_url, api_key=api_key, max_retries=1)  # type: ignore[arg-type]
    guard = RepeatedToolFailureMiddleware(mode=args.mode)  # guard (None: the environment's)
    agent = create_agent(
        model,
        [read_file_tool(args.root.resolve())],
        system_prompt="Answer using the project's files; read them with read_file.",
        middleware=[guard],  # guard
    )
    request: dict[str, Any] = {"messages": [{"role": "user", "content": args.prompt}]}
    config: dict[str, Any] = {"recursion_limit": 60}
    try:
        if args.stream:
            state: dict[str, Any] = {}
            for state in agent.stream(request, config, stream_mode="values"):  # noqa: B007
                pass
        else:
            state = agent.invoke(request, config)
    except ProtectionStopped as stopped:  # guard: the typed stop (on_stop="error", the default)
        print(stopped.stop.notice)
        print(f"[stopped by the guard: {stopped.loop_type}]", file=sys.stderr)
        return 3
    print(state["messages"][-1].content)
    return 0


if __name__ == "__main__":
    sys.exit(main())
