"""The parity fixture fails, never hangs, when something raises inside it (issue 33 §17).

The model both agents talk to raises while answering: the fake server answers with an
error, which our agent reports at once and the original retries with back-off (the run
then waited for the whole fixture's 900 s bound).  ``run_group`` ends with the model's
error instead; ``run_all`` stops the other groups' agents and fails with it.  The bounds
below only fail the test; they are never what ends it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from openai_server import FakeOpenAI, Reply, serve
from parity_session import FixtureError, Group, Model, run_all, run_group
from qwen_original import HostPlan, require_qwen


class Failing(Model):
    def answer(self, body: dict[str, Any]) -> Reply:
        raise KeyError("no script for this episode")


def _group(name: str, agents: tuple[str, ...]) -> Group:
    sessions = (("stubborn", "stubborn", HostPlan()),)
    return Group(name, "enforce", "bare", sessions, agents=agents)


@pytest.mark.parametrize("agent", ["ours", "original"])
def test_a_model_that_raises_ends_the_group_with_its_error(tmp_path: Path, agent: str) -> None:
    if agent == "original":
        require_qwen()
    model = Failing(tmp_path)
    with serve(FakeOpenAI(model)) as fake, pytest.raises(FixtureError) as caught:
        asyncio.run(
            asyncio.wait_for(run_group(model, agent, _group("g", (agent,)), fake.base_url), 300)
        )
    assert f"{agent} g: the model raised KeyError" in str(caught.value)
    assert "no script for this episode" in str(caught.value)


def test_a_failing_group_fails_the_run_and_stops_the_others(tmp_path: Path) -> None:
    model = Failing(tmp_path)
    groups = [_group("a", ("ours",)), _group("b", ("ours",))]
    with serve(FakeOpenAI(model)) as fake, pytest.raises(FixtureError):
        asyncio.run(asyncio.wait_for(run_all(model, groups, fake.base_url), 300))
