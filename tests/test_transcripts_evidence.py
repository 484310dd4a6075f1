"""docs/evidence.md is what its command gives (issue 39 item 6)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from transcript_files import FIXTURES

from tool_failure_guard.transcripts import evidence, verdicts
from tool_failure_guard.transcripts.collect import collect

MINI = FIXTURES / "mini-swe-agent"


def _between(text: str, name: str) -> str:
    begin, end = f"<!-- corpus:{name}:begin -->", f"<!-- corpus:{name}:end -->"
    return text[text.index(begin) : text.index(end) + len(end)]


def test_the_committed_fixtures_section_is_the_commands() -> None:
    committed = evidence.DEFAULT_OUT.read_text(encoding="utf-8")
    fresh = "\n".join(
        evidence.section(evidence.FIXTURES, str(evidence.ROOT / "tests/fixtures/transcripts"))
    )
    assert _between(committed, evidence.FIXTURES) == _between(fresh, evidence.FIXTURES)
    assert "NOT published logs" in _between(committed, evidence.FIXTURES)


def test_the_committed_document_names_its_published_corpora() -> None:
    committed = evidence.DEFAULT_OUT.read_text(encoding="utf-8")
    published = [n for n in evidence.CORPORA if n != evidence.FIXTURES]
    assert published
    for name in published:
        corpus = evidence.CORPORA[name]
        part = _between(committed, name)
        assert corpus.commit is not None and corpus.commit in part and "Licence:" in part


def _published_shape(root: Path) -> Path:
    """The published layout (trajs/<id>/<id>.traj.json, logs/<id>/report.json holding the
    instance's report without its key) made of the real mini-swe-agent 1.15 fixtures."""
    for instance, fixture, resolved in (
        ("astropy__astropy-12907", "v1-submits.traj.json", True),
        ("django__django-11099", "v1-failing-command.traj.json", False),
    ):
        (root / "trajs" / instance).mkdir(parents=True)
        shutil.copy(MINI / fixture, root / "trajs" / instance / f"{instance}.traj.json")
        (root / "logs" / instance).mkdir(parents=True)
        report = {"patch_is_None": False, "resolved": resolved, "tests_status": {}}
        (root / "logs" / instance / "report.json").write_text(json.dumps(report))
    return root


def test_a_report_without_its_instance_key_is_a_verdict(tmp_path: Path) -> None:
    root = _published_shape(tmp_path)
    found = verdicts.read(root / "logs" / "django__django-11099" / "report.json")
    assert found == {
        "django__django-11099": verdicts.Verdict(
            False, verdicts.REPORT, str(root / "logs" / "django__django-11099" / "report.json")
        )
    }
    collected = collect([str(root)], None)
    assert not collected.skipped  # read as verdicts, not listed as unknown files
    outcomes = {r.run_id: (r.succeeded, r.outcome_from) for r in collected.results}
    assert outcomes == {
        "astropy__astropy-12907": (True, verdicts.REPORT),
        "django__django-11099": (False, verdicts.REPORT),
    }


def test_a_section_counts_runs_calls_rules_and_says_where_the_guard_fires(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _published_shape(tmp_path)
    name = next(n for n in evidence.CORPORA if n != evidence.FIXTURES)
    text = "\n".join(evidence.section(name, str(root)))
    # 2 runs: 6 turns (5 with calls; one rejected message) and 14 failing steps
    assert "| 2 | 1 | 1 | 0 | 20 | 19 | 19 | 17 | 1 |" in text
    # the failing loop: the guard stops it at its 9th step (5 steps, tokens 5 x (11 + 7))
    assert "| shipped guard, enforce | 1 (0 / 1 / 0) | 0 of 1 | 95.0% | 1 of 1 |" in text
    assert "The guard reminds in 1 runs and stops 1 in enforce" in text
    out = tmp_path / "evidence.md"
    assert evidence.main(["--out", str(out), "--corpus", f"{name}={root}"]) == 0
    assert f"<!-- corpus:{name}:begin -->" in out.read_text()
    with pytest.raises(SystemExit):
        evidence.main(["--out", str(out), "--corpus", f"unknown={root}"])


def test_the_guard_never_firing_is_said_plainly(tmp_path: Path) -> None:
    root = tmp_path / "trajs"
    root.mkdir()
    shutil.copy(MINI / "v1-submits.traj.json", root / "a.traj.json")
    text = "\n".join(evidence.section(evidence.FIXTURES, str(root)))
    assert "**The guard never fires here.**" in text
    assert "No run has 8 failures of one key at all (the most is 1)" in text
