"""Env files: settings are merged; the guard mode is refused from project-controlled sources."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from tool_failure_guard.guard import GUARD_MODE_ENV_VAR, GuardMode
from tool_failure_guard.session.config.envconfig import (
    OPERATOR_ONLY_VARIABLES,
    SHELL_TIMEOUT_ENV_VAR,
    TOOL_CALL_CAP_ENV_VAR,
    load_env,
    parse_env_file,
)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    (path / ".qwen").mkdir(parents=True)
    return path


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    (path / ".qwen").mkdir(parents=True)
    return path


def test_project_env_saying_enforce_leaves_the_mode_at_shadow(
    project: Path, home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (project / ".env").write_text(f"{GUARD_MODE_ENV_VAR}=enforce\n")
    with caplog.at_level(logging.WARNING):
        config = load_env(project, home=home, environ={})
    assert config.guard_mode() is GuardMode.SHADOW
    assert [r.variable for r in config.refused] == [GUARD_MODE_ENV_VAR]
    assert "project .env" in config.refused[0].source
    assert "deployment policy" in caplog.text


@pytest.mark.parametrize(
    "relative", [".qwen/.env", ".qwen/settings.json"], ids=["qwen-env", "settings"]
)
def test_every_project_source_is_refused(project: Path, home: Path, relative: str) -> None:
    path = project / relative
    if path.suffix == ".json":
        path.write_text(json.dumps({"env": {GUARD_MODE_ENV_VAR: "enforce"}}))
    else:
        path.write_text(f"{GUARD_MODE_ENV_VAR}=enforce\n")
    assert load_env(project, home=home, environ={}).guard_mode() is GuardMode.SHADOW


def test_user_settings_env_map_is_refused_too(project: Path, home: Path) -> None:
    (home / ".qwen" / "settings.json").write_text(json.dumps({"env": {GUARD_MODE_ENV_VAR: "warn"}}))
    assert load_env(project, home=home, environ={}).guard_mode() is GuardMode.SHADOW


@pytest.mark.parametrize("relative", [".env", ".qwen/.env"])
def test_home_env_files_are_honoured(project: Path, home: Path, relative: str) -> None:
    (home / relative).write_text(f"export {GUARD_MODE_ENV_VAR}=' Warn '\n")
    assert load_env(project, home=home, environ={}).guard_mode() is GuardMode.WARN


def test_the_exported_process_environment_wins(project: Path, home: Path) -> None:
    (home / ".env").write_text(f"{GUARD_MODE_ENV_VAR}=warn\n")
    config = load_env(project, home=home, environ={GUARD_MODE_ENV_VAR: "enforce"})
    assert config.guard_mode() is GuardMode.ENFORCE
    assert config.origins[GUARD_MODE_ENV_VAR] == "process environment"


def test_other_settings_still_come_from_project_files(project: Path, home: Path) -> None:
    (project / ".env").write_text("OTHER=7\nONLY_HERE=3\n")
    (home / ".env").write_text("OTHER=9\nMORE=1\n")
    config = load_env(project, home=home, environ={})
    assert config.get("ONLY_HERE") == "3"  # what the user did not set, the project may
    assert config.get("OTHER") == "9"  # a user-level source outranks a project source
    assert config.get("MORE") == "1"


@pytest.mark.parametrize(
    "relative", [".env", ".qwen/.env", ".qwen/settings.json"], ids=["env", "qwen-env", "settings"]
)
def test_a_user_level_source_outranks_every_project_source(
    project: Path, home: Path, relative: str
) -> None:
    path = project / relative
    if path.suffix == ".json":
        path.write_text(json.dumps({"env": {"OTHER": "project"}}))
    else:
        path.write_text("OTHER=project\n")
    (home / ".qwen" / "settings.json").write_text(json.dumps({"env": {"OTHER": "user"}}))
    config = load_env(project, home=home, environ={})
    assert config.get("OTHER") == "user"
    assert "user settings env" in config.origins["OTHER"]


def test_operator_limits_are_one_declared_set() -> None:
    assert {
        GUARD_MODE_ENV_VAR,
        TOOL_CALL_CAP_ENV_VAR,
        SHELL_TIMEOUT_ENV_VAR,
    } <= OPERATOR_ONLY_VARIABLES


@pytest.mark.parametrize("variable", [TOOL_CALL_CAP_ENV_VAR, SHELL_TIMEOUT_ENV_VAR])
@pytest.mark.parametrize(
    "relative", [".env", ".qwen/.env", ".qwen/settings.json"], ids=["env", "qwen-env", "settings"]
)
def test_no_project_source_may_raise_an_operator_limit(
    project: Path, home: Path, caplog: pytest.LogCaptureFixture, variable: str, relative: str
) -> None:
    path = project / relative
    if path.suffix == ".json":
        path.write_text(json.dumps({"env": {variable: "1000000"}}))
    else:
        path.write_text(f"{variable}=1000000\n")
    (home / ".env").write_text(f"{variable}=40\n")
    with caplog.at_level(logging.WARNING):
        config = load_env(project, home=home, environ={})
    assert config.get(variable) == "40"  # the operator's value, not the project's
    assert [r.variable for r in config.refused] == [variable]
    assert variable in caplog.text and str(path) in caplog.text


def test_the_process_environment_sets_operator_limits(project: Path, home: Path) -> None:
    config = load_env(project, home=home, environ={TOOL_CALL_CAP_ENV_VAR: "12"})
    assert config.get(TOOL_CALL_CAP_ENV_VAR) == "12" and config.refused == ()


def test_invalid_mode_falls_back_to_shadow(project: Path, home: Path) -> None:
    config = load_env(project, home=home, environ={GUARD_MODE_ENV_VAR: "loud"})
    assert config.guard_mode() is GuardMode.SHADOW


def test_env_file_syntax(caplog: pytest.LogCaptureFixture) -> None:
    text = '# comment\nA=1\nexport B="two words"\nC=3 # trailing\nnot a line\n'
    with caplog.at_level(logging.WARNING):
        values = parse_env_file(text, "x.env")
    assert values == {"A": "1", "B": "two words", "C": "3"}
    assert "x.env:5" in caplog.text
