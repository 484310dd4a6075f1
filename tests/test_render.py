"""Diagrams are derived from the class, deterministic, and checked for staleness."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from guard import declared_transitions
from tool_failure_guard import render
from tool_failure_guard.cli import main

ROOT = Path(__file__).resolve().parent.parent


def test_committed_diagrams_are_current(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["render", "--check", "--root", str(ROOT)]) == 0


def test_mermaid_lists_every_declared_transition_with_condition_and_action() -> None:
    chart = render.mermaid()
    edges = [line.strip() for line in chart.splitlines() if " : " in line]
    assert len(edges) == len(declared_transitions())
    assert (
        "tracking --> warned : 2. [eligible and key_match and threshold_reached] / remind" in edges
    )
    assert "[*] --> idle" in chart and "latched --> [*]" in chart
    assert "<lambda>" not in chart


def test_dot_is_byte_identical_across_processes() -> None:
    code = "from tool_failure_guard.render import stable_dot; print(stable_dot(), end='')"
    outputs = {
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout
        for _ in range(2)
    }
    assert len(outputs) == 1
    (dot,) = outputs
    assert "__initial_1" in dot and "eligible and key_match" in dot


def test_check_reports_a_stale_file_and_render_repairs_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copytree(ROOT / "diagrams", tmp_path / "diagrams")
    (tmp_path / "docs").mkdir()
    shutil.copy(ROOT / "docs" / "design.md", tmp_path / "docs" / "design.md")
    stale = tmp_path / "diagrams" / "repeated_tool_failure.mmd"
    stale.write_text("stateDiagram-v2\n", encoding="utf-8")
    assert main(["render", "--check", "--root", str(tmp_path)]) == 1
    assert "repeated_tool_failure.mmd is stale" in capsys.readouterr().err
    assert stale.read_text(encoding="utf-8") == "stateDiagram-v2\n"  # --check writes nothing
    assert main(["render", "--root", str(tmp_path)]) == 0
    assert main(["render", "--check", "--root", str(tmp_path)]) == 0


def test_design_doc_without_markers_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "design.md").write_text("# Design\n", encoding="utf-8")
    assert main(["render", "--root", str(tmp_path)]) == 2
    assert "lacks the markers" in capsys.readouterr().err


def test_design_doc_embeds_the_generated_mermaid() -> None:
    design = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    assert "```mermaid\n" + render.mermaid() + "```" in design
