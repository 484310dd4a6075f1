"""What each way of attaching to a pydantic-ai agent costs when it does nothing.

``python -m benches.adapters_pydantic_ai [--batches 20]
[--rounds 2] [--attachments bare,capability,...]`` counts, under
``valgrind --tool=callgrind``, the instructions per batch of one in-process
pydantic-ai agent (the adapter bench's workload: ``batches`` model turns of 4
parallel tool calls, then a final text, the model a scripted ``FunctionModel``)
bare, with each of the framework's extension points attached *empty*, and
guarded (``shadow``).  It is the floor under the adapter's row of
:mod:`~benches.adapters`: what pydantic-ai charges for
an attachment before the guard does any work.  The counting is that bench's: each
run bracketed by ``os.getpgrp()`` / ``os.getppid()`` (``--zero-before`` /
``--dump-before``), a first round dumped and dropped, the variant order rotating.

In pydantic-ai 2.x, history processors and ``prepare_tools`` are capabilities
(``ProcessHistory``, ``PrepareTools``), so they cost what ``capability`` costs;
an ``event_stream_handler`` makes the run a streamed one (another path, which
needs a streaming model).  It prints numbers; it asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from benches import callgrind as bench_callgrind
from benches.adapters import WARM, Spread
from benches.wire import FINAL_TEXT, batch_calls

MODULE = "benches.adapters_pydantic_ai"
#: attachment -> what it is (the bench's order; ``bare`` is the reference)
ATTACHMENTS = {
    "bare": "the agent alone (tools=[...])",
    "capability": "an AbstractCapability subclass that overrides nothing",
    "capability_toolset": "a capability whose get_wrapper_toolset passes every call through",
    "agent_toolset": "the tools as Agent(toolsets=[WrapperToolset(FunctionToolset(...))])",
    "run_toolset": "the same toolset given to agent.run(toolsets=[...])",
    "wrapper_model": "the model wrapped in a WrapperModel subclass that overrides nothing",
    "guard": "RepeatedToolFailureCapability(mode='shadow')",
}


def _runner(attachment: str, batches: int) -> Callable[[], None]:
    """One agent with ``attachment``; the callable makes one whole run of it."""
    from pydantic_ai import Agent, Tool, ToolFailed
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.models.wrapper import WrapperModel
    from pydantic_ai.toolsets import AbstractToolset, FunctionToolset, WrapperToolset

    from tool_failure_guard.integrations.pydantic_ai import RepeatedToolFailureCapability

    def script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        done = sum(1 for m in messages if isinstance(m, ModelResponse) and m.tool_calls)
        if done < batches:
            return ModelResponse(
                parts=[
                    ToolCallPart(n, a, tool_call_id=i) for i, n, a in batch_calls(done + 1, "mixed")
                ]
            )
        return ModelResponse(parts=[TextPart(FINAL_TEXT)])

    def ok(n: int) -> str:
        """Answer n."""
        return f"ok {n}"

    def fail(n: int) -> str:
        """Fail on n."""
        raise ToolFailed(f"no such item: {n}")

    @dataclass
    class Passing(WrapperToolset[Any]):
        async def call_tool(self, name: str, tool_args: Any, ctx: Any, tool: Any) -> Any:
            return await self.wrapped.call_tool(name, tool_args, ctx, tool)

    @dataclass
    class Empty(AbstractCapability[Any]):
        pass

    @dataclass
    class Wrapping(AbstractCapability[Any]):
        def get_wrapper_toolset(self, toolset: AbstractToolset[Any]) -> AbstractToolset[Any]:
            return Passing(toolset)

    class Wrapped(WrapperModel):
        pass

    tools = [Tool(ok, name="ok"), Tool(fail, name="fail_a"), Tool(fail, name="fail_b")]
    model: Any = FunctionModel(script)
    options: dict[str, Any] = {"tools": tools}
    per_run: dict[str, Any] = {}
    if attachment == "capability":
        options["capabilities"] = [Empty()]
    elif attachment == "capability_toolset":
        options["capabilities"] = [Wrapping()]
    elif attachment == "agent_toolset":
        options = {"toolsets": [Passing(FunctionToolset(tools))]}
    elif attachment == "run_toolset":
        options, per_run = {}, {"toolsets": [Passing(FunctionToolset(tools))]}
    elif attachment == "wrapper_model":
        model = Wrapped(model)
    elif attachment == "guard":
        options["capabilities"] = [RepeatedToolFailureCapability(mode="shadow")]
    elif attachment != "bare":
        raise ValueError(f"unknown attachment {attachment!r}; known: {', '.join(ATTACHMENTS)}")
    agent = Agent(model, **options)
    loop = asyncio.new_event_loop()

    def run() -> None:
        result = loop.run_until_complete(agent.run("go", **per_run))
        if result.output != FINAL_TEXT:
            raise RuntimeError(f"{attachment}: the run ended with {result.output!r}")

    return run


def _child(attachments: Sequence[str], batches: int, rounds: int) -> None:
    """In the callgrind child: one dump per run, the order printed as JSON."""
    runs = {a: _runner(a, batches) for a in attachments}
    for run in runs.values():
        run()  # warm-up: lazy imports and caches are not a batch's cost
    order: list[str] = []
    for round_ in range(-1, rounds):  # round -1 is dumped and dropped (it counts more)
        shift = round_ % len(attachments)
        for attachment in [*attachments[shift:], *attachments[:shift]]:
            gc.collect()
            os.getpgrp()  # --zero-before=os_getpgrp
            runs[attachment]()
            os.getppid()  # --dump-before=os_getppid
            order.append(attachment if round_ >= 0 else WARM)
    print(json.dumps(order))


def measure(attachments: Sequence[str], *, batches: int, rounds: int) -> dict[str, Spread]:
    """Instructions per batch of each attachment (callgrind)."""
    child = ["--callgrind-child", "--batches", str(batches), "--rounds", str(rounds)]
    child += ["--attachments", ",".join(attachments)]
    order, totals = bench_callgrind.run(MODULE, child, timeout=7200)
    per = bench_callgrind.per_batch(order, totals, attachments, batches=batches, skip=WARM)
    return {a: Spread.of(s) for a, s in per.items()}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=f"python -m {MODULE}")
    parser.add_argument("--attachments", default=",".join(ATTACHMENTS))
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--callgrind-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    attachments = [a.strip() for a in args.attachments.split(",") if a.strip()]
    unknown = sorted(set(attachments) - set(ATTACHMENTS))
    if unknown or args.batches < 1 or args.rounds < 1:
        print(
            f"bench_adapters_pydantic_ai: unknown attachment(s) {', '.join(unknown) or '(none)'} "
            f"(known: {', '.join(ATTACHMENTS)}), or --batches / --rounds below 1",
            file=sys.stderr,
        )
        return 2
    if args.callgrind_child:
        _child(attachments, args.batches, args.rounds)
        return 0
    if "bare" not in attachments:
        attachments.insert(0, "bare")
    counted = measure(attachments, batches=args.batches, rounds=args.rounds)
    bare = counted["bare"].median
    print(f"pydantic-ai attachments, instructions per batch (callgrind, {args.batches} batches)")
    for attachment in attachments:
        spread = counted[attachment]
        print(
            f"  {attachment:18s} {spread.median / 1e6:7.3f} M  / bare {spread.median / bare:.3f}"
            f"  ({ATTACHMENTS[attachment]})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
