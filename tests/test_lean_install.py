"""The lean install works: the wheel, with only its own dependencies, in a fresh venv.

The wheel is built from a copy of the checkout (offline: the dev extra's setuptools, no
build isolation) and installed with ``--no-deps --no-index`` into a fresh venv that holds
nothing but the distributions its ``Requires-Dist`` (no extra) names and theirs, copied
file by file from this environment.  ``pip check`` there proves that set complete.  In it,
the core, the chart, telemetry records and sinks and the adapters' shared parts import;
each adapter, the agent, the demo, the rollout command and telemetry built by name say
which extra they need instead of a bare ``ModuleNotFoundError``.  Nothing is downloaded.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from importlib import metadata
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
#: What a build reads from the checkout (the rest, caches and node_modules, stays out).
SOURCE = ("pyproject.toml", "README.md", "tool_failure_guard")
SKIP = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build")


def _wheel_requirements(wheel: Path) -> list[Requirement]:
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        text = archive.read(name).decode()
    return [Requirement(v) for k, v in re.findall(r"^(Requires-Dist): (.+)$", text, re.M)]


def _applies(requirement: Requirement, extras: frozenset[str]) -> bool:
    if requirement.marker is None:
        return True
    environment = dict(default_environment())
    return any(
        requirement.marker.evaluate({**environment, "extra": extra}) for extra in extras or {""}
    )


def closure(requirements: list[Requirement]) -> dict[str, metadata.Distribution]:
    """Every installed distribution ``requirements`` (no extra) reach, by canonical name."""
    found: dict[str, metadata.Distribution] = {}
    todo = [(r, frozenset[str]()) for r in requirements]
    while todo:
        requirement, extras = todo.pop()
        if not _applies(requirement, extras):
            continue
        name = canonicalize_name(requirement.name)
        if name == "tool-failure-guard":
            continue  # an extra naming another of ours: never without an extra here
        distribution = metadata.distribution(requirement.name)
        assert requirement.specifier.contains(distribution.version, prereleases=True), (
            requirement,
            distribution.version,
        )
        if name in found and not requirement.extras:
            continue
        found[name] = distribution
        todo.extend(
            (Requirement(r), frozenset(requirement.extras)) for r in distribution.requires or ()
        )
    return found


def _copy_distribution(distribution: metadata.Distribution, site: Path) -> None:
    base = Path(str(distribution.locate_file("")))
    for file in distribution.files or ():
        source = base / file
        if file.parts[0] == ".." or "__pycache__" in file.parts or not source.is_file():
            continue  # console scripts live outside site-packages; none is needed here
        target = site / file
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(source, target)  # same file system: no copy
        except OSError:
            shutil.copy2(source, target)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel, built offline from a copy of the checkout's sources."""
    work = tmp_path_factory.mktemp("wheel")
    source = work / "source"
    for name in SOURCE:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, source / name, ignore=SKIP)
        else:
            source.mkdir(exist_ok=True)
            shutil.copy2(path, source / name)
    built = subprocess.run(
        [*PIP, "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", work / "dist",
         source],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr[-3000:]
    (found,) = (work / "dist").glob("tool_failure_guard-*.whl")
    return found


PIP = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]


def install(wheel: Path, venv: Path, extra: str | None = None) -> tuple[Path, list[str]]:
    """A fresh venv with the wheel and what it requires (with ``extra``): (python, those)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True, timeout=120)
    python = venv / "bin" / "python"
    site = Path(
        subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()
    )  # fmt: skip
    requirements = [
        r
        for r in _wheel_requirements(wheel)
        if r.marker is None or (extra is not None and _applies(r, frozenset({extra})))
    ]
    wanted = closure([Requirement(str(r).split(";")[0]) for r in requirements])
    for distribution in wanted.values():
        _copy_distribution(distribution, site)
    installed = subprocess.run(
        [*PIP, "--python", python, "install", "--no-deps", "--no-index", wheel],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert installed.returncode == 0, installed.stderr[-3000:]
    checked = subprocess.run(
        [*PIP, "--python", python, "check"], capture_output=True, text=True, check=False
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr  # the set is complete
    return python, sorted(wanted)


@pytest.fixture(scope="module")
def lean(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, list[str]]:
    """(the lean venv's python, its bin directory, the distributions besides ours)."""
    venv = tmp_path_factory.mktemp("lean") / "venv"
    python, distributions = install(wheel, venv)
    return python, venv / "bin", distributions


def _run(python: Path, code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [python, "-c", code], capture_output=True, text=True, timeout=120, cwd="/", check=False
    )


def test_the_lean_install_is_a_handful_of_distributions(
    lean: tuple[Path, Path, list[str]],
) -> None:
    _, _, distributions = lean
    assert {"attrs", "python-statemachine", "opentelemetry-api"} <= set(distributions)
    heavy = {"agent-client-protocol", "mcp", "openai", "opentelemetry-sdk", "jsonschema"}
    assert heavy.isdisjoint(distributions), distributions
    assert len(distributions) <= 6, distributions


PROBE = r"""
import importlib.resources, json, sys
import tool_failure_guard as tfg
import tool_failure_guard.core, tool_failure_guard.statecharts, tool_failure_guard.modes
import tool_failure_guard.telemetry.records, tool_failure_guard.telemetry.names
from tool_failure_guard.telemetry.sink import NullTelemetry, OpenTelemetrySink
import tool_failure_guard.integrations._api, tool_failure_guard.telemetry.runs
guard = tfg.RepeatedToolFailureGuard(tfg.GuardMode.ENFORCE)
receipt = tfg.BatchReceipt([tfg.Observation(call_id="c1", policy_tool_name="read_file",
    tool_type="native", terminal_status="error", execution_status="error",
    execution_error_type="file_not_found")])
files = importlib.resources.files("tool_failure_guard")
print(json.dumps({
    "decision": guard.observe(receipt, tfg.InputBoundary()).kind.value,
    "typed": (files / "py.typed").is_file(),
    "scenarios": sorted(p.name for p in (files / "session" / "scenarios").iterdir()
                        if p.name.endswith(".json")),
    "prompt": (files / "evaluation" / "system_prompt.txt").is_file(),
    "sdk": "opentelemetry.sdk" in sys.modules,
    "sink": OpenTelemetrySink.__name__,
}))
"""


def test_the_core_telemetry_and_the_adapters_shared_parts_import_lean(
    lean: tuple[Path, Path, list[str]],
) -> None:
    python, _, _ = lean
    done = _run(python, PROBE)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout)
    assert found["decision"] == "tracked"
    assert found["typed"] and found["prompt"] and not found["sdk"]
    assert len(found["scenarios"]) >= 1 and found["sink"] == "OpenTelemetrySink"


@pytest.mark.parametrize(
    ("module", "extra"),
    [
        ("tool_failure_guard.integrations.pydantic_ai", "pydantic-ai"),
        ("tool_failure_guard.integrations.langchain", "langchain"),
        ("tool_failure_guard.integrations.openai_agents", "openai-agents"),
    ],
)
def test_an_adapter_without_its_extra_names_it(
    lean: tuple[Path, Path, list[str]], wheel: Path, module: str, extra: str
) -> None:
    python, _, _ = lean
    code = (
        "from tool_failure_guard._extras import MissingExtra\n"
        f"try:\n    import {module}\n"
        "except MissingExtra as e:\n    print(e.extra, e, sep='|')\n"
    )
    done = _run(python, code)
    assert done.returncode == 0, done.stderr[-3000:]
    named, message = done.stdout.strip().split("|")
    assert named == extra
    assert f"pip install '{wheel}[{extra}]'" in message  # installed from this wheel file


def test_telemetry_built_by_name_without_the_sdk_names_its_extra(
    lean: tuple[Path, Path, list[str]], wheel: Path
) -> None:
    python, _, _ = lean
    code = (
        "from tool_failure_guard.telemetry.build import build_telemetry\n"
        "print(type(build_telemetry('none')).__name__)\n"
        "build_telemetry('console')\n"
    )
    done = _run(python, code)
    assert done.stdout.strip() == "NullTelemetry"
    assert done.returncode == 1
    assert "TelemetryConfigurationError" in done.stderr
    assert f"pip install '{wheel}[telemetry]'" in done.stderr


@pytest.mark.parametrize(
    ("argv", "extra"),
    [
        (["agent"], "agent"),
        (["demo"], "agent"),
        (["rollout", "check", "x.jsonl"], "rollout"),
    ],
)
def test_a_command_without_its_extra_prints_the_install_line_and_exits_2(
    lean: tuple[Path, Path, list[str]], wheel: Path, argv: list[str], extra: str
) -> None:
    _, bin_dir, _ = lean
    done = subprocess.run(
        [bin_dir / "tool-failure-guard", *argv],
        capture_output=True, text=True, timeout=120, cwd="/", stdin=subprocess.DEVNULL,
        check=False,
    )  # fmt: skip
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert f"pip install '{wheel}[{extra}]'" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_lean_command_line_replays_and_checks_the_diagrams(
    lean: tuple[Path, Path, list[str]],
) -> None:
    _, bin_dir, _ = lean
    command = bin_dir / "tool-failure-guard"
    helped = subprocess.run([command, "--help"], capture_output=True, text=True, check=False)
    assert helped.returncode == 0 and "agent" in helped.stdout, helped.stderr
    replayed = subprocess.run(
        [command, "replay", ROOT / "examples" / "receipts.jsonl", "--mode", "enforce"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert replayed.returncode == 0, replayed.stderr[-3000:]
    assert replayed.stdout.strip()
    rendered = subprocess.run(
        [command, "render", "--check", "--root", ROOT],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert rendered.returncode == 0, rendered.stderr[-3000:]


ADAPTER = r"""
import importlib.util, json
from pydantic_ai import Agent
from pydantic_ai.models.test import TestModel
from tool_failure_guard.integrations.pydantic_ai import RepeatedToolFailureCapability
agent = Agent(TestModel(custom_output_text="done"), capabilities=[RepeatedToolFailureCapability()])
print(json.dumps({
    "output": agent.run_sync("go").output,
    "absent": [m for m in ("acp", "mcp", "jsonschema", "opentelemetry.sdk")
               if importlib.util.find_spec(m) is None],
}))
"""


def test_the_pydantic_ai_extra_runs_the_adapter_without_the_agents_stack(
    wheel: Path, tmp_path: Path
) -> None:
    python, distributions = install(wheel, tmp_path / "venv", "pydantic-ai")
    assert "pydantic-ai-slim" in distributions
    assert "agent-client-protocol" not in distributions and "mcp" not in distributions
    done = _run(python, ADAPTER)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout)
    assert found["output"] == "done"  # a run through the capability
    assert found["absent"] == ["acp", "mcp", "jsonschema", "opentelemetry.sdk"]
