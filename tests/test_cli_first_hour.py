"""The command line as a new user meets it (issue 34, item 6).

No command prints the help; options are never abbreviated; ``render`` (a developer command)
is left out of the help and says so outside a checkout; ``transcripts --help`` says where
each agent keeps its logs; ``replay`` given a transcript points to ``transcripts``;
``build_telemetry`` called as a library never names the command line's flag.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tool_failure_guard.commands.cli import HIDDEN, SUBCOMMANDS, main
from tool_failure_guard.transcripts.importers import IMPORTERS, LOG_LOCATIONS

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "transcripts"


def test_no_command_prints_the_help_and_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("usage: tool-failure-guard") and err == ""
    for name in set(SUBCOMMANDS) - HIDDEN:
        assert f"    {name}" in out, name


def test_the_developer_command_render_is_not_in_the_users_help(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert {"render"} == HIDDEN
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "render" not in capsys.readouterr().out


@pytest.mark.parametrize("typed", ["rendr", "hlep", "render-all"])
def test_the_developer_command_is_not_named_when_a_command_is_mistyped(
    typed: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main([typed])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert f"invalid choice: '{typed}'" in err
    for name in set(SUBCOMMANDS) - HIDDEN:
        assert repr(name) in err, name
    assert "'render'" not in err


@pytest.mark.parametrize(
    "argv",
    [
        ["replay", "--mod", "enforce", "-"],  # --mode
        ["replay", "--summ", "-"],  # --summary
        ["transcripts", "--js", "x"],  # --json
        ["--vers"],  # --version
    ],
)
def test_options_are_never_abbreviated(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    assert "unrecognized arguments" in capsys.readouterr().err


def test_render_outside_a_checkout_says_it_is_a_developer_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["render", "--check", "--root", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "not a checkout of tool-failure-guard" in err and "developer command" in err
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_transcripts_help_says_where_each_agent_keeps_its_logs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert set(LOG_LOCATIONS) == set(IMPORTERS)  # a new kind adds its row
    with pytest.raises(SystemExit):
        main(["transcripts", "--help"])
    out = capsys.readouterr().out
    assert "where each agent keeps its logs" in out
    table = out.split("where each agent keeps its logs", 1)[1]  # other help may name kinds
    for kind, where in LOG_LOCATIONS.items():
        (line,) = [line for line in table.splitlines() if line.strip().startswith(kind + " ")]
        assert line.strip().endswith(where), (kind, line)


@pytest.mark.parametrize(
    ("path", "kind"),
    [
        (FIXTURES / "claude-code" / "failing.session.jsonl", "claude-code"),
        (next((FIXTURES / "codex").glob("*.jsonl")), "codex"),
    ],
)
def test_replay_given_a_transcript_points_to_transcripts(
    path: Path, kind: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["replay", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"is a {kind} transcript" in err
    assert f"tool-failure-guard transcripts {path}" in err


def test_replay_of_a_broken_receipt_file_does_not_mention_transcripts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "p", "calls": 3}\n', encoding="utf-8")
    assert main(["replay", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("line 1:") and "transcripts" not in err


@pytest.mark.parametrize("kind", ["bogus", "file:"])
def test_build_telemetry_from_library_code_never_names_the_cli_flag(kind: str) -> None:
    from tool_failure_guard.telemetry.build import build_telemetry

    with pytest.raises(ValueError) as caught:
        build_telemetry(kind)
    assert "--telemetry" not in str(caught.value)
    assert "telemetry" in str(caught.value)


def test_the_agent_command_still_names_its_flag(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["agent", "--telemetry", "bogus"])
    assert exited.value.code == 2
    assert "argument --telemetry: 'bogus' is not one of" in capsys.readouterr().err


def test_the_plot_extra_is_named_for_what_it_is() -> None:
    import tomllib

    from tool_failure_guard._extras import PARTS

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "optional-dependencies"
    ]
    assert any(r.startswith("matplotlib") for r in extras["plot"])
    assert "plot" in PARTS
    assert any("plot" in r for r in extras["eval"])  # eval keeps working
    source = (ROOT / "tool_failure_guard" / "transcripts" / "plot.py").read_text()
    assert "install_hint('plot')" in source


def test_the_own_loop_example_says_which_extra_it_needs() -> None:
    text = (ROOT / "examples" / "own_loop.py").read_text(encoding="utf-8")
    doc = text.split('"""')[1]
    assert "[agent]" in doc or "[openai]" in doc


def test_the_benchmarks_live_beside_the_tests_not_in_the_package() -> None:
    """Issue 34, item 7: ``make bench`` runs ``python -m benches``; users install none of it."""
    import tomllib

    assert sorted((ROOT / "tool_failure_guard").rglob("bench*.py")) == []
    assert "bench" not in SUBCOMMANDS
    assert (ROOT / "benches" / "__init__.py").is_file()
    assert (ROOT / "benches" / "__main__.py").is_file()
    found = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"][
        "setuptools"
    ]["packages"]["find"]
    assert found["include"] == ["tool_failure_guard*"]
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert "$(BIN)/python -m benches\n" in makefile
    assert "$(BIN)/python -m benches.rollout\n" in makefile


def test_python_m_benches_refuses_a_bad_count(capsys: pytest.CaptureFixture[str]) -> None:
    from benches.__main__ import main as bench_main

    assert bench_main(["--batches", "0"]) == 2
    assert "--batches and --rounds must be positive" in capsys.readouterr().err
