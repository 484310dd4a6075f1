"""The shared behaviour set (``tests/host_behaviour.py``) against every registered host.

Each case serves its scenario's model responses from the 127.0.0.1
OpenAI-compatible test server, runs the host once and checks what the host
did: the request bodies the server received, how the run ended, the guard's
decisions.  Adding a host: see ``tests/hosts/__init__.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from host_behaviour import (
    CAPABILITIES,
    COMPARED,
    SCENARIOS,
    HostDriver,
    HostRun,
    Scenario,
    check,
    check_modes_compared,
)
from hosts import drivers
from openai_server import FakeOpenAI, serve

from tool_failure_guard.guard import GuardMode

DRIVERS = drivers()
_RUNS: dict[tuple[str, str, GuardMode], HostRun] = {}


def run_host(driver: HostDriver, scenario: Scenario, mode: GuardMode, root: Path) -> HostRun:
    """Run (once per test session) ``driver`` through ``scenario`` in ``mode``."""
    key = (driver.name, scenario.name, mode)
    if key not in _RUNS:
        workspace, scratch = root / "workspace", root / "scratch"
        workspace.mkdir(parents=True)
        scratch.mkdir()
        for name, text in scenario.files.items():
            (workspace / name).write_text(text, encoding="utf-8")
        with serve(FakeOpenAI(scenario.replies())) as fake:
            outcome = driver.run(
                scenario, mode, base_url=fake.base_url, workspace=workspace, scratch=scratch
            )
            with fake.lock:
                requests = tuple(fake.requests)
        _RUNS[key] = HostRun(outcome=outcome, requests=requests)
    return _RUNS[key]


CASES = [
    pytest.param(driver, scenario, mode, id=f"{driver.name}-{scenario.name}-{mode.value}")
    for driver in DRIVERS
    for scenario in SCENARIOS
    if scenario.needs <= driver.capabilities
    for mode in scenario.modes
]


@pytest.mark.parametrize(("driver", "scenario", "mode"), CASES)
def test_the_host_behaves_as_every_host_must(
    driver: HostDriver, scenario: Scenario, mode: GuardMode, tmp_path: Path
) -> None:
    expected = scenario.for_host(getattr(driver, "limits_follow_mode", False))
    check(expected, mode, run_host(driver, scenario, mode, tmp_path))


@pytest.mark.parametrize("driver", DRIVERS, ids=lambda d: d.name)
def test_shadow_and_warn_send_what_off_sends_apart_from_the_reminder(
    driver: HostDriver, tmp_path: Path
) -> None:
    (scenario,) = [s for s in SCENARIOS if s.name == COMPARED]
    runs = {
        mode: run_host(driver, scenario, mode, tmp_path / mode.value)
        for mode in (GuardMode.OFF, GuardMode.SHADOW, GuardMode.WARN)
    }
    check_modes_compared(runs)


def test_every_host_runs_every_scenario_it_can() -> None:
    assert "acp" in [d.name for d in DRIVERS]
    for driver in DRIVERS:
        assert driver.capabilities <= CAPABILITIES, driver.name
        names = {case.values[1].name for case in CASES if case.values[0] is driver}
        assert names == {s.name for s in SCENARIOS if s.needs <= driver.capabilities}
