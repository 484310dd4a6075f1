"""``tool_failure_guard.__version__`` and ``tool-failure-guard --version``: the installed one."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

import tool_failure_guard
from tool_failure_guard import _version
from tool_failure_guard.commands.cli import main

ROOT = Path(__file__).resolve().parents[1]


def _declared() -> str:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return str(project["version"])


def test_the_version_is_the_installed_distributions() -> None:
    assert tool_failure_guard.__version__ == metadata.version("tool-failure-guard")
    assert tool_failure_guard.__version__ == _declared()  # installed from this tree


def test_without_installed_metadata_the_version_says_unknown(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def missing(name: str) -> str:
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(_version.metadata, "version", missing)
    assert tool_failure_guard.__version__ == "0+unknown"


def test_other_missing_attributes_still_raise() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = tool_failure_guard.no_such_name  # type: ignore[attr-defined]


def test_the_cli_prints_its_version_and_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out == f"tool-failure-guard {_declared()}\n"


def test_the_console_script_prints_its_version() -> None:
    script = Path(sys.executable).with_name("tool-failure-guard")
    done = subprocess.run(
        [str(script), "--version"], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"tool-failure-guard {_declared()}\n"


def test_importing_the_package_reads_no_distribution_metadata() -> None:
    code = "import sys, tool_failure_guard; print('tool_failure_guard._version' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "False"
