"""A part whose extra is missing names the extra (``tool_failure_guard/_extras.py``).

The dependency is hidden the way an uninstalled one looks to the import system
(``sys.modules[name] = None``); the adapters are imported in a subprocess so the hiding
never leaks into this one.  ``tests/test_lean_install.py`` checks the same on a real lean
install.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tool_failure_guard._extras import MissingExtra, install_hint, require_extra
from tool_failure_guard.commands.cli import main


def test_require_extra_passes_for_installed_modules_and_names_the_first_missing() -> None:
    require_extra("agent", "json", "importlib.util")
    with pytest.raises(MissingExtra) as caught:
        require_extra("langchain", "json", "no_such_module_here", "also_missing")
    assert isinstance(caught.value, ImportError)
    assert caught.value.name == "no_such_module_here" and caught.value.extra == "langchain"
    assert install_hint("langchain") in str(caught.value)
    with pytest.raises(MissingExtra):  # a missing parent package is missing too
        require_extra("telemetry", "no_such_package_here.sdk")


HIDE_AND_IMPORT = """
import sys
for name in {hidden!r}:
    sys.modules[name] = None
from tool_failure_guard._extras import MissingExtra
try:
    import {module}
except MissingExtra as error:
    print(error.extra, error.name, str(error), sep="|")
else:
    print("imported")
"""


@pytest.mark.parametrize(
    ("module", "hidden", "extra"),
    [
        ("tool_failure_guard.integrations.pydantic_ai", ["pydantic_ai"], "pydantic-ai"),
        ("tool_failure_guard.integrations.langchain", ["langgraph"], "langchain"),
        ("tool_failure_guard.integrations.openai_agents", ["agents"], "openai-agents"),
    ],
)
def test_an_adapter_without_its_framework_raises_the_install_line(
    module: str, hidden: list[str], extra: str
) -> None:
    code = HIDE_AND_IMPORT.format(hidden=hidden, module=module)
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    named, name, message = done.stdout.strip().split("|")
    assert (named, name) == (extra, hidden[0])
    assert f"{module} needs {hidden[0]!r}, which is not installed" in message
    assert install_hint(extra) in message


@pytest.mark.parametrize("hidden", ["acp", "mcp", "openai", "regex", "opentelemetry.sdk"])
def test_the_agent_command_without_its_extra_exits_2_with_the_install_line(
    hidden: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, hidden, None)
    assert main(["agent"]) == 2
    err = capsys.readouterr().err
    assert f"needs {hidden!r}" in err
    assert install_hint("agent") in err


def test_the_demo_without_the_agent_extra_exits_2_with_the_install_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "acp", None)
    assert main(["demo"]) == 2
    assert install_hint("agent") in capsys.readouterr().err


def test_rollout_clickhouse_without_its_extra_exits_2_with_the_install_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 33 §15: the install line and exit 2, never "internal error" (exit 3)."""
    monkeypatch.setitem(sys.modules, "clickhouse_connect", None)
    assert main(["rollout", "check", "--clickhouse", "http://127.0.0.1:1/db"]) == 2
    err = capsys.readouterr().err
    assert "needs 'clickhouse_connect', which is not installed" in err
    assert install_hint("clickhouse") in err
    assert "internal error" not in err


def test_telemetry_built_by_name_without_the_sdk_is_a_configuration_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tool_failure_guard.telemetry.build import TelemetryConfigurationError, build_telemetry

    monkeypatch.setitem(sys.modules, "opentelemetry.sdk", None)
    with pytest.raises(TelemetryConfigurationError, match=re.escape(install_hint("telemetry"))):
        build_telemetry("console")
