"""An OpenAI Agents SDK agent guarded by the repeated tool-failure guard.

Runs against any OpenAI-compatible chat-completions endpoint::

    pip install -e '.[openai-agents]'
    OPENAI_BASE_URL=http://127.0.0.1:8000/v1 OPENAI_API_KEY=... \\
        python examples/openai_agents_agent.py --model my-model --mode enforce \\
        "Summarise the file TODO.md"

The agent has one tool, ``read_file``, reading files under ``--root``.  The
guard's part is the marked lines; everything else is a plain SDK agent.  A
stopped run raises ``ProtectionStopped`` (an ``agents.MaxTurnsExceeded`` too).
Exit status: 0 when the run completed, 3 when the guard stopped it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

import openai
from agents import Agent, OpenAIChatCompletionsModel, function_tool, set_tracing_disabled

from tool_failure_guard.integrations.openai_agents import (  # guard: 1/4
    GuardedRunner,
    ProtectionStopped,
)


def build_agent(model: str, base_url: str | None, api_key: str, root: Path) -> Agent[None]:
    """A plain SDK agent with one file-reading tool."""

    @function_tool
    def read_file(path: str) -> str:
        """Read a text file of the project (a path relative to its root)."""
        target = (root / path).resolve()
        if root not in target.parents and target != root:
            raise PermissionError(f"{path} is outside the project")
        return target.read_text(encoding="utf-8")[:20_000]

    client = openai.AsyncOpenAI(base_url=base_url, api_key=api_key, max_retries=1)
    return Agent(
        name="reader",
        instructions="Answer using the project's files; read them with read_file.",
        model=OpenAIChatCompletionsModel(model=model, openai_client=client),
        tools=[read_file],
    )


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("prompt")
    parser.add_argument("--model", default=os.environ.get("OPENAI_MODEL", "gpt-4o-mini"))
    parser.add_argument("--base-url", default=os.environ.get("OPENAI_BASE_URL"))
    parser.add_argument("--root", type=Path, default=Path.cwd())
    parser.add_argument("--mode", choices=("off", "shadow", "warn", "enforce"), default=None)
    parser.add_argument("--max-turns", type=int, default=30)
    parser.add_argument("--stream", action="store_true", help="use Runner.run_streamed")
    args = parser.parse_args(argv)
    api_key = os.environ.get("OPENAI_API_KEY")
    if not api_key:
        parser.error("set OPENAI_API_KEY (any value for a local endpoint)")
    set_tracing_disabled(True)  # nothing is exported to a tracing service

    agent = build_agent(args.model, args.base_url, api_key, args.root.resolve())
    # Runner.run(agent, ...) becomes GuardedRunner.run(agent, ...): the class form takes the
    # mode from the environment; an instance, GuardedRunner(mode=...), is an explicit choice.
    runner = GuardedRunner if args.mode is None else GuardedRunner(mode=args.mode)  # guard: 2/4
    try:
        if args.stream:
            streamed = runner.run_streamed(agent, args.prompt, max_turns=args.max_turns)  # 3/4
            async for _event in streamed.stream_events():  # a stop is raised from here
                pass
            result = streamed
        else:
            result = await runner.run(agent, args.prompt, max_turns=args.max_turns)  # guard: 3/4
    except ProtectionStopped as stopped:  # guard: 4/4 (a handler of MaxTurnsExceeded also works)
        print(stopped.stop.notice)
        print(f"[stopped by the guard: {stopped.loop_type}]", file=sys.stderr)
        return 3
    print(result.final_output)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
