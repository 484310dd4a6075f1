"""The LangChain adapter leaves no reference cycle behind a call (issue 26: peak memory).

A cycle through a tool's exception (exception -> traceback -> frame -> a
local holding the exception) keeps every frame of the call alive until the
cyclic collector runs, which is what made a guarded run's peak memory a
multiple of the bare run's.  The structural fact tested here: after a
guarded run, the collector finds no unreachable object of the guard's own --
no frame of its code, none of its functions or closures, no instance of its
classes, no traceback through its frames, no exception it kept.  Measured on
the in-process bench agent (:mod:`benches.hosts`:
``ToolException`` answered by the tool's own ``handle_tool_error``) and on
the real wire with tools whose plain exceptions a middleware answers.
"""

from __future__ import annotations

import gc
import types
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hosts.langchain import ErrorsToModel, behaviour_tools, chat_model, run
from langchain.agents import create_agent
from langchain_harness import replies
from openai_server import FakeOpenAI, serve

import tool_failure_guard
from benches import hosts as bench_hosts
from tool_failure_guard.integrations.langchain import RepeatedToolFailureMiddleware
from tool_failure_guard.integrations.langchain._observe import Probe
from tool_failure_guard.integrations.langchain._outcomes import Attempt

PACKAGE = str(Path(tool_failure_guard.__file__).resolve().parent)


def _ours(value: object) -> bool:
    if isinstance(value, types.FrameType):
        return value.f_code.co_filename.startswith(PACKAGE)
    if isinstance(value, types.TracebackType):
        return _ours(value.tb_frame)
    if isinstance(value, types.FunctionType | types.MethodType):
        return (getattr(value, "__module__", None) or "").startswith("tool_failure_guard")
    if isinstance(value, BaseException):
        return any(_ours(tb) for tb in _tracebacks(value))
    return type(value).__module__.startswith("tool_failure_guard")


def _tracebacks(error: BaseException) -> Iterator[types.TracebackType]:
    tb = error.__traceback__
    while tb is not None:
        yield tb
        tb = tb.tb_next


def cyclic_garbage(run_once: Callable[[], object]) -> list[object]:
    """What the cyclic collector finds unreachable after ``run_once()`` (nothing is freed)."""
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        run_once()
        gc.collect()
        found = list(gc.garbage)
    finally:
        gc.garbage.clear()
        gc.set_debug(0)
        gc.enable()
    return found


def describe(found: list[object]) -> list[str]:
    return sorted({f"{type(o).__name__}: {o!r}"[:160] for o in found})


def _kinds(found: list[object]) -> dict[str, int]:
    return dict(Counter(type(o).__qualname__ for o in found if isinstance(o, BaseException)))


@pytest.mark.parametrize(("variant", "workload"), [("shadow", "failing"), ("enforce", "mixed")])
def test_a_guarded_in_process_run_leaves_no_cycle_of_the_guards(
    variant: str, workload: str
) -> None:
    """Failures answered by the tool's own ``handle_tool_error``: nothing of the guard's."""
    runner = bench_hosts.langchain(variant, "inproc", batches=8, workload=workload)
    runner.run()  # warm-up: lazy imports, the observed tool copies
    found = cyclic_garbage(runner.run)
    assert found, "the collector saw nothing: the check would prove nothing"  # LangGraph's own
    assert describe([o for o in found if _ours(o)]) == []


def test_a_run_whose_tools_raise_adds_no_cycle_to_langchains_own(tmp_path: Path) -> None:
    """Plain exceptions a middleware answers: each stays in LangChain's own cycle.

    ``BaseTool.run`` keeps the exception it re-raises in a local
    (``error_to_raise``): exception -> traceback -> that frame -> exception,
    with or without the guard, so the guard's frames on that stack go with it.
    The guard adds no cycle of its own: exactly the bare run's exceptions are
    garbage, and the guard's per-call holders on those stacks (the probe and
    its attempts) were emptied when the call settled.
    """
    loop = [("read_file", {"path": "missing.txt"})] * 4  # FileNotFoundError, re-raised
    found: dict[str, list[object]] = {}
    for variant in ("bare", "shadow"):
        middleware: list[Any] = [ErrorsToModel()]
        if variant != "bare":
            middleware.insert(0, RepeatedToolFailureMiddleware(mode=variant))
        with serve(FakeOpenAI(replies(loop, loop, loop, loop, loop))) as fake:
            agent = create_agent(
                chat_model(fake.base_url), behaviour_tools(tmp_path), middleware=middleware
            )
            found[variant] = cyclic_garbage(lambda agent=agent: run(agent, "go"))
    assert _kinds(found["bare"]) == {"FileNotFoundError": 20}
    assert _kinds(found["shadow"]) == _kinds(found["bare"])
    # the guard's per-call holders on those stacks were emptied when the call settled
    attempts = [o for o in found["shadow"] if isinstance(o, Attempt)]
    assert attempts and all(a.exception is None and a.returned is None for a in attempts)
    assert all(not o.attempts for o in found["shadow"] if isinstance(o, Probe))
