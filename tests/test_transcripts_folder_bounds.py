"""Issue 40 item 7: inside a walked folder every read is bounded and only regular files are
opened, as for the paths named on the command line.

An OpenHands conversation folder whose event file is a FIFO used to block for ever (the
importer opened it and waited for a writer), and one whose event file is a symbolic link to
``/dev/zero`` was read without bound.  Both run in a child process with a timeout and an
address-space limit, so a regression fails here instead of hanging or exhausting the suite.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from transcript_files import FIXTURES

OPENHANDS = FIXTURES / "openhands"
#: address space the child may use: far more than a report needs, far less than /dev/zero
MEMORY_LIMIT = 2 << 30


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def _transcripts(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tool_failure_guard", "transcripts", *argv],
        capture_output=True,
        text=True,
        timeout=120,  # a FIFO opened for reading would block for ever
        preexec_fn=_limited,
        cwd="/",
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)},
    )


def _two_conversations(tmp_path: Path) -> tuple[Path, Path]:
    """A folder with a good conversation and a copy of ``mixed`` whose event 3 is removed."""
    good = Path(shutil.copytree(OPENHANDS / "failing-command", tmp_path / "good"))
    bad = Path(shutil.copytree(OPENHANDS / "mixed", tmp_path / "bad"))
    (event,) = (bad / "events").glob("event-00003-*.json")
    event.unlink()
    return good, event


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_a_non_regular_event_file_is_skipped_and_listed_never_read(
    tmp_path: Path, kind: str
) -> None:
    good, event = _two_conversations(tmp_path)
    if kind == "fifo":
        os.mkfifo(event)  # no writer: opening it to read would wait for one
        what = "a named pipe"
    else:
        event.symlink_to("/dev/zero")
        what = "a character device"
    done = _transcripts("--json", str(tmp_path))
    assert done.returncode == 1, done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert [f["path"] for f in report["files"]] == [str(good)]
    assert report["fleet"]["runs"] == 1 and report["fleet"]["calls"] == 4
    reasons = {s["path"]: s["reason"] for s in report["skipped"]}
    # the file itself, listed by the walk; its conversation, naming the file and what it is
    assert reasons[str(event)] == f"{what}: not read in a walked directory"
    assert reasons[str(event.parent.parent)] == (
        f"events/{event.name}: {what}, not a regular file: not read"
    )


def test_a_named_conversation_with_a_fifo_event_is_an_error_naming_it(tmp_path: Path) -> None:
    _, event = _two_conversations(tmp_path)
    os.mkfifo(event)
    folder = event.parent.parent
    done = _transcripts(str(folder))
    assert done.returncode == 2 and done.stdout == ""
    assert f"{folder}: events/{event.name}: a named pipe, not a regular file" in done.stderr
    assert "no run could be read" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_state_file_linked_to_dev_zero_is_never_read(tmp_path: Path) -> None:
    """``base_state.json`` a link to a device: not a conversation folder; each file listed."""
    folder = Path(shutil.copytree(OPENHANDS / "mixed", tmp_path / "conv"))
    (folder / "base_state.json").unlink()
    (folder / "base_state.json").symlink_to("/dev/zero")
    shutil.copytree(OPENHANDS / "failing-command", tmp_path / "good")
    done = _transcripts("--json", str(tmp_path))
    assert done.returncode == 1, done.stderr[-2000:]
    reasons = {s["path"]: s["reason"] for s in json.loads(done.stdout)["skipped"]}
    assert reasons[str(folder / "base_state.json")] == (
        "a character device: not read in a walked directory"
    )


def test_a_v0_session_event_linked_to_dev_zero_is_never_read(tmp_path: Path) -> None:
    """The same in an OpenHands V0 session folder (``~/.openhands/sessions/<id>/``)."""
    folder = tmp_path / "sessions" / "s1"
    (folder / "events").mkdir(parents=True)
    (folder / "metadata.json").write_text(json.dumps({"conversation_id": "s1"}))
    (folder / "events" / "0.json").write_text(
        json.dumps({"id": 0, "source": "user", "action": "message", "args": {}})
    )
    (folder / "events" / "1.json").symlink_to("/dev/zero")
    shutil.copytree(OPENHANDS / "failing-command", tmp_path / "good")
    done = _transcripts("--json", str(tmp_path))
    assert done.returncode == 1, done.stderr[-2000:]
    reasons = {s["path"]: s["reason"] for s in json.loads(done.stdout)["skipped"]}
    assert reasons[str(folder)] == "events/1.json: a character device, not a regular file: not read"
