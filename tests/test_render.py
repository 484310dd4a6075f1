"""Diagrams are derived from the class, deterministic, and checked for staleness."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tool_failure_guard.commands import render
from tool_failure_guard.commands.cli import main
from tool_failure_guard.guard import TRANSITIONS, Phase, declared_transitions
from tool_failure_guard.guard._table import FACT_COMBINATIONS, _compile_condition, facts_of

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
    code = "from tool_failure_guard.commands.render import stable_dot; print(stable_dot(), end='')"
    outputs = {
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout
        for _ in range(2)
    }
    assert len(outputs) == 1
    (dot,) = outputs
    assert "__initial -> idle;" in dot and "eligible and key_match" in dot


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


def test_check_reports_a_stale_runtime_table_and_render_repairs_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _copy_project(tmp_path)
    table = tmp_path / "tool_failure_guard" / "guard" / "_chart_table.py"
    current = table.read_text(encoding="utf-8")
    table.write_text(current.replace('"idle": "2', '"idle": "0'), encoding="utf-8")
    assert main(["render", "--check", "--root", str(tmp_path)]) == 1
    assert "_chart_table.py is stale" in capsys.readouterr().err
    assert main(["render", "--root", str(tmp_path)]) == 0
    assert table.read_text(encoding="utf-8") == current


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


SVG = ROOT / "diagrams" / "repeated_tool_failure.svg"
_LINE = re.compile(r"^(\d+)\. \[(.+)\] / (\w+)$")


def _copy_project(tmp_path: Path) -> Path:
    shutil.copytree(ROOT / "diagrams", tmp_path / "diagrams")
    (tmp_path / "docs").mkdir()
    shutil.copy(ROOT / "docs" / "design.md", tmp_path / "docs" / "design.md")
    (tmp_path / "tool_failure_guard" / "guard").mkdir(parents=True)
    table = Path("tool_failure_guard", "guard", "_chart_table.py")
    shutil.copy(ROOT / table, tmp_path / table)
    return tmp_path / "diagrams" / "repeated_tool_failure.svg"


def test_one_edge_per_pair_of_phases_and_each_label_line_is_one_transition() -> None:
    """No two arcs (or self-loops) share both ends, so no two labels compete for a place."""
    dot = render.stable_dot()
    pairs = re.findall(r"^  (\w+) -> (\w+)", dot, re.MULTILINE)
    assert len(pairs) == len(set(pairs))
    labels = [line for edge in render.edges() for line in edge.lines]
    expected = sorted(
        f"{t.order + 1}. [{t.condition or 'otherwise'}] / {t.action}"
        for t in declared_transitions()
    )
    assert sorted(labels) == expected
    for edge in render.edges():  # the lines of one edge in priority order
        numbers = [int(line.split(".")[0]) for line in edge.lines]
        assert numbers == sorted(numbers)
    # The one event is named once, in the title, not on every edge.
    assert len(re.findall(r"\bsettle\b", dot)) == 1


def test_the_picture_alone_gives_the_runtime_table() -> None:
    """Read only the committed SVG's text: the lowest-numbered line whose condition
    holds must be the transition the runtime takes, for every phase and facts."""
    content = render.svg_content(SVG.read_text(encoding="utf-8"))
    leaving: dict[str, list[tuple[int, str, str, str]]] = {}
    for name, lines in content.edges:
        source, target = name.split("->")
        for line in lines:
            match = _LINE.match(line)
            assert match is not None, line
            number, condition, action = match.groups()
            leaving.setdefault(source, []).append((int(number), condition, action, target))
    for phase in (Phase.IDLE, Phase.TRACKING, Phase.WARNED):
        rows = sorted(leaving[phase.value])
        assert [row[0] for row in rows] == list(range(1, len(rows) + 1))  # a total order
        for index in range(FACT_COMBINATIONS):
            facts = facts_of(index)
            fired = next(
                row for row in rows if row[1] == "otherwise" or _compile_condition(row[1])(facts)
            )
            expected = TRANSITIONS[phase][index]
            assert (fired[3], fired[2]) == (expected.target.value, expected.action)
    assert "latched" not in leaving  # final


def test_check_ignores_another_graphviz_layout_but_not_other_content(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    svg = _copy_project(tmp_path)
    original = svg.read_text(encoding="utf-8")
    # Another Graphviz version: other version comment, other coordinates and sizes.
    relaid = re.sub(r"graphviz version [^\n]*", "graphviz version 12.2.1 (20241206.2353)", original)
    relaid = re.sub(r"-?\d+\.\d+", lambda m: f"{float(m.group(0)) * 1.5 + 3:.2f}", relaid)
    assert relaid != original
    svg.write_text(relaid, encoding="utf-8")
    assert main(["render", "--check", "--root", str(tmp_path)]) == 0
    # A label that says something else is stale, whatever the layout.
    svg.write_text(relaid.replace("/ remind", "/ latch"), encoding="utf-8")
    assert main(["render", "--check", "--root", str(tmp_path)]) == 1
    assert "repeated_tool_failure.svg is stale" in capsys.readouterr().err
    # So is a line moved to another edge, and a document that is not SVG.
    moved = relaid.replace("3. [otherwise] / hold", "X").replace("6. [otherwise] / hold", "X")
    svg.write_text(moved.replace("X", "6. [otherwise] / hold", 1), encoding="utf-8")
    assert main(["render", "--check", "--root", str(tmp_path)]) == 1
    svg.write_text("not svg", encoding="utf-8")
    assert main(["render", "--check", "--root", str(tmp_path)]) == 1


def test_check_needs_no_graphviz(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    svg = _copy_project(tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))
    assert render.svg("digraph {}") is None
    assert main(["render", "--check", "--root", str(tmp_path)]) == 0
    svg.unlink()
    assert main(["render", "--check", "--root", str(tmp_path)]) == 1
    # Writing cannot render it without dot: a clear note, and a non-zero exit.
    assert main(["render", "--root", str(tmp_path)]) == 1
    assert "dot not found" in capsys.readouterr().err
