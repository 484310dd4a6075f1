"""The shared API set (``tests/adapter_api.py``) against every framework adapter.

Each case serves failing ``read_file`` batches from the 127.0.0.1
OpenAI-compatible test server and runs the adapter's real framework once.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from adapter_api import FINAL_TEXT, ApiDriver, ApiOutcome, Summary, failing_replies
from adapter_hosts import drivers
from openai_server import FakeOpenAI, serve

from tool_failure_guard.core import LOOP_REPEATED_TOOL_FAILURE
from tool_failure_guard.core.actions import shown_text
from tool_failure_guard.guard import (
    GUARD_MODE_ENV_VAR,
    REPEATED_TOOL_FAILURE_STOP_MESSAGE,
    FailureKey,
    GuardMode,
)
from tool_failure_guard.integrations._api import LOGGER_NAME, ProtectionStopped

DRIVERS = drivers()
KEY = FailureKey("read_file", "file_not_found")
STOP_TEXT = shown_text(REPEATED_TOOL_FAILURE_STOP_MESSAGE)
LOOP = 5  # failing batches scripted: enforce stops at the third


@pytest.fixture(params=DRIVERS, ids=lambda d: d.name)
def driver(request: pytest.FixtureRequest) -> ApiDriver:
    found: ApiDriver = request.param
    return found


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    (tmp_path / "notes.txt").write_text("hello\n", encoding="utf-8")
    return tmp_path


@pytest.fixture(autouse=True)
def _no_env_mode(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv(GUARD_MODE_ENV_VAR, raising=False)
    yield


def run(
    driver: ApiDriver,
    guard: object,
    workspace: Path,
    *,
    typed_output: bool = False,
    batches: int = LOOP,
) -> tuple[ApiOutcome, int]:
    """One run; the outcome and the number of model requests the server answered."""
    replies = failing_replies(driver, batches, typed_output=typed_output)
    with serve(FakeOpenAI(replies)) as fake:
        outcome = driver.run(
            guard, base_url=fake.base_url, workspace=workspace, typed_output=typed_output
        )
        with fake.lock:
            requests = len(fake.requests)
    return outcome, requests


def guard_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == LOGGER_NAME]


@pytest.mark.parametrize("typed_output", [False, True], ids=["text", "typed"])
def test_a_stop_raises_the_adapters_error_by_default(
    driver: ApiDriver, workspace: Path, typed_output: bool
) -> None:
    outcome, requests = run(
        driver, driver.guard(mode="enforce", on_stop=None), workspace, typed_output=typed_output
    )
    error = outcome.raised
    assert isinstance(error, ProtectionStopped), error
    assert isinstance(error, driver.framework_error)  # existing handlers catch it
    assert error.loop_type == LOOP_REPEATED_TOOL_FAILURE
    assert error.key == KEY
    assert error.stop.notice == STOP_TEXT
    assert error.report.stop == error.stop
    assert error.report.decisions == ("tracked", "warn", "stop")
    assert requests == 3  # no model request after the stopping batch


def test_end_ends_with_the_stop_text_where_the_output_is_text(
    driver: ApiDriver, workspace: Path
) -> None:
    outcome, requests = run(driver, driver.guard(mode="enforce", on_stop="end"), workspace)
    assert outcome.raised is None, outcome.raised
    assert outcome.output == STOP_TEXT
    assert outcome.stop is not None and outcome.stop.key == KEY
    assert outcome.report is not None and outcome.report.stop == outcome.stop
    assert requests == 3


def test_end_never_returns_a_value_of_the_wrong_type(driver: ApiDriver, workspace: Path) -> None:
    outcome, _ = run(
        driver, driver.guard(mode="enforce", on_stop="end"), workspace, typed_output=True
    )
    # a typed output cannot be the stop text: the run raises as with "error"
    assert isinstance(outcome.raised, ProtectionStopped), outcome.raised
    assert outcome.raised.key == KEY


def test_a_bad_on_stop_names_the_valid_ones(driver: ApiDriver) -> None:
    with pytest.raises(ValueError, match="on_stop must be one of 'error', 'end'"):
        driver.guard(mode="enforce", on_stop="halt")


def test_shadow_logs_once_at_would_warn_and_once_at_would_stop(
    driver: ApiDriver, workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER_NAME)
    outcome, requests = run(driver, driver.guard(mode="shadow", on_stop=None), workspace)
    assert outcome.raised is None, outcome.raised
    assert outcome.output == FINAL_TEXT
    assert outcome.stop is None
    report = outcome.report
    assert report is not None and report.mode is GuardMode.SHADOW
    assert report.decisions[:3] == ("tracked", "would_warn", "would_stop")
    assert report.would_remind and report.would_stop and not report.reminded
    records = guard_records(caplog)
    decided = [getattr(r, "tool_failure_guard_decision", None) for r in records]
    assert decided == ["would_warn", "would_stop"], [r.getMessage() for r in records]
    assert all(r.levelno == logging.WARNING for r in records)
    assert all("missing.txt" not in r.getMessage() for r in records)  # no arguments
    assert requests == LOOP + 1


def test_off_reports_and_logs_nothing(
    driver: ApiDriver, workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER_NAME)
    outcome, requests = run(driver, driver.guard(mode="off", on_stop=None), workspace)
    assert outcome.raised is None and outcome.output == FINAL_TEXT
    assert outcome.report is not None and outcome.report.mode is GuardMode.OFF
    assert outcome.report.stop is None and not outcome.report.would_remind
    assert outcome.report.tool_calls == 4 * LOOP
    assert guard_records(caplog) == []
    assert requests == LOOP + 1


def test_an_explicit_mode_wins_over_the_environment(
    driver: ApiDriver, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(GUARD_MODE_ENV_VAR, "enforce")
    outcome, _ = run(driver, driver.guard(mode="shadow", on_stop=None), workspace)
    assert outcome.raised is None and outcome.output == FINAL_TEXT
    assert outcome.report is not None and outcome.report.mode is GuardMode.SHADOW


def test_without_mode_each_run_reads_the_environment(
    driver: ApiDriver, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    guard = driver.guard(mode=None, on_stop=None)
    monkeypatch.setenv(GUARD_MODE_ENV_VAR, "shadow")
    first, _ = run(driver, guard, workspace)
    assert first.raised is None and first.report is not None
    assert first.report.mode is GuardMode.SHADOW
    monkeypatch.setenv(GUARD_MODE_ENV_VAR, "enforce")
    second, _ = run(driver, guard, workspace)
    assert isinstance(second.raised, ProtectionStopped)
    assert second.raised.report.mode is GuardMode.ENFORCE


def test_the_typed_output_survives_a_run_the_guard_never_stops(
    driver: ApiDriver, workspace: Path
) -> None:
    outcome, _ = run(
        driver, driver.guard(mode="enforce", on_stop=None), workspace, typed_output=True, batches=1
    )
    assert outcome.raised is None, outcome.raised
    assert isinstance(outcome.output, Summary) and outcome.output.text == "Done."
    assert outcome.report is not None and outcome.report.decisions == ("tracked",)
