"""The adapter bench's harness: real frameworks, figures that mean something, guarded runs.

Only behaviour is asserted here (the harness runs, its figures are well formed,
a guarded run really was guarded); the timings are printed by ``make bench``.
"""

from __future__ import annotations

import math

import httpx
import pytest

from benches import adapters as bench_adapters
from benches.adapters import FRAMEWORKS, GUARDED, TRANSPORTS, VARIANTS
from benches.hosts import HOSTS
from benches.wire import CALLS, FINAL_TEXT, model_name, serve


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_brief_adapter_bench_gives_well_formed_figures_of_guarded_runs(framework: str) -> None:
    figures = bench_adapters.measure(
        framework, batches=3, rounds=1, instructions=False, memory_rounds=1
    )
    assert figures.guarded_ok
    assert set(figures.micros) == set(TRANSPORTS) == set(figures.ratios)
    for transport in TRANSPORTS:
        assert set(figures.micros[transport]) == set(VARIANTS)
        assert set(figures.ratios[transport]) == set(GUARDED)
        for spread in [*figures.micros[transport].values(), *figures.ratios[transport].values()]:
            assert 0 < spread.low <= spread.median <= spread.high < math.inf
    assert all(figures.peak[v] > 0 for v in VARIANTS)
    assert figures.instructions is None and figures.instruction_ratio("shadow") is None
    # A tool failing every call: enforce stopped the run early, shadow and bare did not.
    ran, guarded, stopped = figures.stop_check["enforce"]
    assert stopped and guarded == ran < bench_adapters.STOP_CHECK_BATCHES
    assert figures.stop_check["shadow"] == (bench_adapters.STOP_CHECK_BATCHES,) * 2 + (False,)
    assert figures.stop_check["bare"] == (bench_adapters.STOP_CHECK_BATCHES, None, False)
    printed: list[str] = []
    bench_adapters.show(figures, printed.append)
    assert printed[0].startswith(f"adapter {framework}:")
    assert any("enforce stopped after" in line and line.endswith("yes") for line in printed)


def test_each_host_runs_the_script_bare_and_guarded_in_process() -> None:
    for framework, host in HOSTS.items():
        for variant in VARIANTS:
            runner = host(variant, "inproc", batches=2, workload="mixed")
            try:
                ran = runner.run()
            finally:
                runner.close()
            assert ran.batches == 2, (framework, variant)
            assert ran.guarded == (None if variant == "bare" else 2), (framework, variant)
            assert not ran.stopped


def test_the_bench_server_speaks_chat_completions() -> None:
    with serve() as base_url:
        body = {"model": model_name(1, "mixed"), "messages": [{"role": "user", "content": "go"}]}
        first = httpx.post(f"{base_url}/chat/completions", json=body).json()
        calls = first["choices"][0]["message"]["tool_calls"]
        assert len(calls) == CALLS and first["choices"][0]["finish_reason"] == "tool_calls"
        body["messages"].append({"role": "assistant", "tool_calls": calls})
        second = httpx.post(f"{base_url}/chat/completions", json=body).json()
        assert second["choices"][0]["message"]["content"] == FINAL_TEXT
        refused = httpx.post(f"{base_url}/chat/completions", json={**body, "stream": True})
        assert refused.status_code == 400
        unknown = httpx.post(f"{base_url}/chat/completions", json={**body, "model": "bench-1-x"})
        assert unknown.status_code == 400


def test_bad_arguments_are_refused_by_name(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench_adapters.main(["--frameworks", "crewai"]) == 2
    assert "unknown framework(s) crewai" in capsys.readouterr().err
    assert bench_adapters.main(["--rounds", "0"]) == 2
