"""``tool-failure-guard agent`` refuses what it cannot serve, naming the problem."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


def agent(
    *args: str,
    stdin: object = subprocess.PIPE,
    stdout: object = subprocess.PIPE,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tool_failure_guard", "agent", *args],
        stdin=stdin,  # type: ignore[arg-type]
        stdout=stdout,  # type: ignore[arg-type]
        stderr=subprocess.PIPE,
        text=True,
        timeout=60,
        cwd=cwd,
        input=None,
    )


def test_stdout_redirected_to_a_file_is_refused(tmp_path: Path) -> None:
    with (tmp_path / "out.txt").open("w") as out:
        result = agent(stdout=out)
    assert result.returncode == 2
    assert "standard output is not a pipe, socket or terminal" in result.stderr
    assert "Traceback" not in result.stderr


def test_stdin_from_dev_null_is_refused_instead_of_hanging() -> None:
    with open("/dev/null") as null:
        result = agent(stdin=null)
    assert result.returncode == 2
    assert "standard input is not a pipe" in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--drain-timeout", "nan"], "--drain-timeout must be a positive number of seconds"),
        (["--drain-timeout", "0"], "--drain-timeout must be a positive number of seconds"),
        (["--max-tool-calls", "0"], "--max-tool-calls must be at least 1"),
        (["--scenario", "no-such-scenario"], "unknown scenario 'no-such-scenario'"),
        (["--model", "gpt"], "--model must be 'scripted' or 'openai:<model name>', got 'gpt'"),
        (["--model", "openai:"], "--model must be 'scripted' or 'openai:<model name>'"),
        (["--model", "openai:m", "--model-max-retries", "-1"], "--model-max-retries must be 0"),
        (["--model", "openai:m", "--temperature", "3"], "--temperature must be between 0 and 2"),
        (["--model", "openai:m", "--temperature", "nan"], "--temperature must be between 0 and 2"),
        (["--model", "openai:m", "--max-tokens", "0"], "--max-tokens must be at least 1"),
        (
            ["--model", "openai:m", "--scenario", "read-loop"],
            "--scenario plays the scripted model; it cannot be combined with --model",
        ),
        (
            ["--model", "openai:m", "--system-prompt-file", "/nonexistent/prompt.txt"],
            "bad system prompt: /nonexistent/prompt.txt: cannot read",
        ),
    ],
)
def test_bad_flags_are_named(args: list[str], message: str) -> None:
    result = agent(*args)
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr


_CAPPED = (
    "import resource, runpy, sys\nresource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))\n"
)
_CAPPED += "sys.argv = ['tool-failure-guard', *sys.argv[1:]]\n"
_CAPPED += "runpy.run_module('tool_failure_guard', run_name='__main__')\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["demo", "--scenario", "/dev/zero"],
            "demo: bad scenario: /dev/zero: the scenario file is over 4,194,304 bytes",
        ),
        (
            ["agent", "--scenario", "/dev/zero"],
            "bad scenario: /dev/zero: the scenario file is over 4,194,304 bytes",
        ),
        (
            ["agent", "--model", "openai:m", "--system-prompt-file", "/dev/zero"],
            "bad system prompt: /dev/zero: the system prompt file is over 1,048,576 bytes",
        ),
    ],
    ids=["demo-scenario", "agent-scenario", "agent-system-prompt"],
)
def test_endless_files_are_read_within_a_bound(args: list[str], message: str) -> None:
    """Issue 33 §8: ``/dev/zero`` is refused at its bound (the child's memory is capped at
    1 GiB, so reading it whole fails there, not on the machine)."""
    result = subprocess.run(
        [sys.executable, "-c", _CAPPED, *args],
        stdin=subprocess.PIPE,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 2, result.stderr[-2000:]
    assert message in result.stderr
    assert "Traceback" not in result.stderr
