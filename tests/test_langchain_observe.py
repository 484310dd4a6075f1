"""The request that carries a tool's observed copy is the one ``override`` would make (issue 26).

``wrap_tool_call`` hands its handler the request with the observed copy of the
tool (:mod:`tool_failure_guard.integrations.langchain._observe`).  It builds that
request without ``ToolCallRequest.override`` (whose price is paid on every call);
these tests hold it to being exactly what ``override(tool=...)`` returns, for
LangGraph's own ``ToolCallRequest``, with the original left as it was.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any

from langchain_core.tools import StructuredTool
from langgraph.prebuilt.tool_node import ToolCallRequest

from tool_failure_guard.integrations.langchain._observe import (
    ObservedTools,
    observed_copy,
    with_tool,
)


def ok(n: int) -> str:
    """Answer n."""
    return f"ok {n}"


def _request(tool: Any) -> ToolCallRequest:
    call: Any = {"id": "c1", "name": "ok", "args": {"n": 1}, "type": "tool_call"}
    return ToolCallRequest(tool_call=call, tool=tool, state={"messages": []}, runtime=None)  # type: ignore[arg-type]


def test_the_request_with_the_observed_tool_is_what_override_makes() -> None:
    tool = StructuredTool.from_function(ok)
    observed = observed_copy(tool)
    request = _request(tool)
    before = dict(vars(request))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no deprecated attribute assignment on the way
        made = with_tool(request, observed)
    expected = request.override(tool=observed)
    assert type(made) is ToolCallRequest and made is not request
    assert made == expected
    assert {f.name: getattr(made, f.name) for f in dataclasses.fields(made)} == {
        f.name: getattr(expected, f.name) for f in dataclasses.fields(expected)
    }
    assert made.tool is observed and made.tool_call is request.tool_call
    assert vars(request) == before and request.tool is tool  # the original is unchanged
    # and the handler's request may be overridden again, as any other
    assert made.override(tool=tool) == request


def test_a_request_of_a_subclass_goes_through_override() -> None:
    @dataclasses.dataclass
    class Traced(ToolCallRequest):
        def override(self, **overrides: Any) -> ToolCallRequest:
            self.overridden = True  # type: ignore[attr-defined]
            return super().override(**overrides)

    tool = StructuredTool.from_function(ok)
    call: Any = {"id": "c1", "name": "ok", "args": {"n": 1}, "type": "tool_call"}
    request = Traced(tool_call=call, tool=tool, state={}, runtime=None)  # type: ignore[arg-type]
    observed = ObservedTools().observed(tool)
    made = with_tool(request, observed)
    assert type(made) is Traced and made.tool is observed
    assert vars(request).get("overridden") is True
