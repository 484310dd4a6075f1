"""``examples/own_loop.py`` as a host: the documented recipe for your own loop, on the core.

It is driven through its :func:`run` with the official ``openai`` SDK against
the test server, so the recipe ``docs/integrations.md`` teaches passes the same
behaviour set as the ACP session.  It has no user to cancel a call.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import openai
from host_behaviour import API_KEY, COMPLETED, MODEL_NAME, STOPPED, HostOutcome, Scenario

from tool_failure_guard.guard import GuardMode

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "own_loop.py"


def load_example() -> ModuleType:
    """Import ``examples/own_loop.py`` (the examples folder is not a package)."""
    name = "examples_own_loop"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, EXAMPLE)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


class OwnLoopDriver:
    name = "own_loop"
    capabilities: frozenset[str] = frozenset()

    def run(
        self, scenario: Scenario, mode: GuardMode, *, base_url: str, workspace: Path, scratch: Path
    ) -> HostOutcome:
        example = load_example()
        client = openai.OpenAI(base_url=base_url, api_key=API_KEY, max_retries=0)
        result = example.run(client, MODEL_NAME, "go", workspace, mode)
        stopped = result.stopped
        return HostOutcome(
            ended=STOPPED if stopped is not None else COMPLETED,
            loop_type=stopped.loop_type if stopped is not None else None,
            output=result.output,
            decisions=tuple(d.kind.value for d in result.decisions),
            kept_call_ids=frozenset(
                m["tool_call_id"] for m in result.messages if m["role"] == "tool"
            ),
        )


DRIVER = OwnLoopDriver()
