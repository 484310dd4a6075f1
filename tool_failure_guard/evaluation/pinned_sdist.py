"""Fetch one pinned source distribution from pip's configured index, verify, then unpack.

``pip download`` of an sdist runs the package's own build code (its build backend, to
prepare metadata) before anything could be checked. Here nothing of the package runs:
the index's project page (the simple API, PEP 691 JSON or PEP 503 HTML) is read for the
file's URL, the file is streamed into ``NAME.partial`` while it is hashed, and only a
file whose size and sha256 are the pinned ones is renamed into place. Unpacking goes
into a temporary directory beside the target and is renamed into place whole, with a
marker naming the verified hash, so an interrupted unpack is never taken for a finished
one (a directory without the marker is removed and unpacked again).

The index is the one pip is configured with (``pip config list``: ``PIP_INDEX_URL`` and
the ``index-url`` settings, then the ``extra-index-url`` ones; pypi.org's simple API when
none is set), its ``cert`` setting is honoured, credentials in an index URL are sent as
HTTP basic auth and never printed (every URL in a message goes through
:func:`tool_failure_guard.redaction.redact_url`: the user information and credential-like
query parameters such as ``?token=`` are masked), and only to the index's own origin
(scheme, host and port): a redirect elsewhere (a CDN holding the files) is followed
without them, as pip does (``urllib`` alone would send them to wherever the index
redirects). Standard library and this package only
(:mod:`tool_failure_guard.redaction` is plain functions on text): it runs before
anything else is installed.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import ssl
import subprocess
import sys
import tarfile
import tempfile
import urllib.error
import urllib.parse
import urllib.request
import urllib.response
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from tool_failure_guard.redaction import redact_text, redact_url

DEFAULT_INDEX = "https://pypi.org/simple/"
PAGE_LIMIT = 16 << 20  # a project page larger than this is refused
TIMEOUT_S = 60.0
UNPACKED_MARKER = ".tfg-unpacked-sha256"
_ACCEPT = "application/vnd.pypi.simple.v1+json, text/html;q=0.1"


class FetchError(RuntimeError):
    """The pinned file cannot be had, or is not the pinned one; the message says which."""


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


# -- pip's configuration ----------------------------------------------------------------------


def pip_settings(run: Callable[[list[str]], str] | None = None) -> dict[str, str]:
    """``pip config list`` as a mapping (``global.index-url`` -> value; env as ``:env:.x``)."""
    command = [sys.executable, "-m", "pip", "config", "list"]
    if run is None:
        result = subprocess.run(command, check=False, capture_output=True, text=True)
        if result.returncode != 0:
            raise FetchError(f"`pip config list` failed (exit {result.returncode})")
        text = result.stdout
    else:
        text = run(command)
    settings: dict[str, str] = {}
    for line in text.splitlines():
        match = re.fullmatch(r"([^=\s]+)=(['\"])(.*)\2", line.strip())
        if match:
            settings[match.group(1)] = match.group(3)
    return settings


def _setting(settings: dict[str, str], name: str) -> str | None:
    # pip's order: the environment, then the command's own section, then [global]
    for section in (":env:", "download", "global"):
        if f"{section}.{name}" in settings:
            return settings[f"{section}.{name}"]
    return None


def index_urls(settings: dict[str, str]) -> list[str]:
    """The indexes pip would consult, in its order: ``index-url`` then ``extra-index-url``."""
    if (_setting(settings, "no-index") or "").lower() in ("1", "true", "yes", "on"):
        return []
    main = _setting(settings, "index-url") or DEFAULT_INDEX
    extra = (_setting(settings, "extra-index-url") or "").split()
    return [main, *(url for url in extra if url != main)]


def tls_context(settings: dict[str, str]) -> ssl.SSLContext:
    cert = _setting(settings, "cert")
    return ssl.create_default_context(cafile=cert) if cert else ssl.create_default_context()


# -- the simple API ---------------------------------------------------------------------------


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            href = dict(attrs).get("href")
            if href:
                self.hrefs.append(href)


def _origin(url: str) -> tuple[str, str | None, int | None]:
    parts = urllib.parse.urlsplit(url)
    default = {"http": 80, "https": 443}.get(parts.scheme.lower())
    return parts.scheme.lower(), parts.hostname, parts.port or default


class _CredentialsStayHome(urllib.request.HTTPRedirectHandler):
    """Follows redirects, dropping the login when one leaves the request's origin."""

    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: Any,
        code: int,
        msg: str,
        headers: Any,
        newurl: str,
    ) -> urllib.request.Request | None:
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None and _origin(newurl) != _origin(req.full_url):
            new.remove_header("Authorization")
        return new


def _open(url: str, context: ssl.SSLContext, accept: str) -> urllib.response.addinfourl:
    parts = urllib.parse.urlsplit(url)
    headers = {"Accept": accept, "User-Agent": "tool-failure-guard-eval-setup"}
    if parts.username is not None:
        user = urllib.parse.unquote(parts.username)
        password = urllib.parse.unquote(parts.password or "")
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        headers["Authorization"] = f"Basic {token}"
        host = parts.hostname or ""
        url = urllib.parse.urlunsplit(
            parts._replace(netloc=f"{host}:{parts.port}" if parts.port else host)
        )
    request = urllib.request.Request(url, headers=headers)
    opener = urllib.request.build_opener(
        urllib.request.HTTPSHandler(context=context), _CredentialsStayHome()
    )
    response: urllib.response.addinfourl = opener.open(request, timeout=TIMEOUT_S)
    return response


def _with_credentials(url: str, index: str) -> str:
    """``url`` with the index URL's credentials when it is on the index's host (as pip does)."""
    file_parts, index_parts = urllib.parse.urlsplit(url), urllib.parse.urlsplit(index)
    if index_parts.username is None or file_parts.username is not None:
        return url
    if (file_parts.scheme, file_parts.hostname, file_parts.port) != (
        index_parts.scheme,
        index_parts.hostname,
        index_parts.port,
    ):
        return url
    userinfo = index_parts.netloc.rpartition("@")[0]
    return urllib.parse.urlunsplit(file_parts._replace(netloc=f"{userinfo}@{file_parts.netloc}"))


def _normalized(project: str) -> str:
    return re.sub(r"[-_.]+", "-", project).lower()


def find_file(
    index: str, project: str, filename: str, context: ssl.SSLContext
) -> tuple[str, str | None] | None:
    """The file's URL on the index and the sha256 the index declares for it, or None."""
    page = index.rstrip("/") + "/" + _normalized(project) + "/"
    if urllib.parse.urlsplit(page).scheme == "file":
        local = Path(urllib.request.url2pathname(urllib.parse.urlsplit(page).path))
        if not (local / "index.html").is_file():
            return None  # a local index without this project
        page += "index.html"
    try:
        with _open(page, context, _ACCEPT) as response:
            body = response.read(PAGE_LIMIT + 1)
            base = response.geturl()
            kind = response.headers.get("Content-Type", "") if response.headers else ""
    except urllib.error.HTTPError as error:
        if error.code == 404:
            return None
        raise FetchError(f"{redact_url(page)}: HTTP {error.code}") from None
    except (urllib.error.URLError, OSError) as error:
        raise FetchError(f"{redact_url(page)}: {redact_text(str(error))}") from None
    if len(body) > PAGE_LIMIT:
        raise FetchError(f"{redact_url(page)}: the project page is over {PAGE_LIMIT} bytes")
    if "json" in kind:
        try:
            files = json.loads(body)["files"]
        except (ValueError, KeyError, TypeError):
            raise FetchError(f"{redact_url(page)}: not a PEP 691 project page") from None
        for entry in files if isinstance(files, list) else []:
            if isinstance(entry, dict) and entry.get("filename") == filename:
                hashes = entry.get("hashes") if isinstance(entry.get("hashes"), dict) else {}
                declared = hashes.get("sha256") if hashes else None
                url = urllib.parse.urljoin(base, str(entry.get("url", "")))
                return url, str(declared) if declared else None
        return None
    links = _Links()
    links.feed(body.decode("utf-8", errors="replace"))
    for href in links.hrefs:
        url, _, fragment = urllib.parse.urljoin(base, href).partition("#")
        if urllib.parse.unquote(url.rsplit("/", 1)[-1]) == filename:
            declared = fragment[len("sha256=") :] if fragment.startswith("sha256=") else None
            return url, declared
    return None


# -- download and unpack ----------------------------------------------------------------------


def download(
    url: str,
    target: Path,
    sha256: str,
    size: int,
    context: ssl.SSLContext,
    log: Callable[[str], None] | None = None,
) -> Path:
    """Stream ``url`` into ``target`` only if it is exactly ``size`` bytes with ``sha256``.

    ``log`` hears the progress in tenths of ``size``.
    """
    partial = target.with_name(target.name + ".partial")
    target.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    got = 0
    tenth = 0
    try:
        with _open(url, context, "*/*") as response, partial.open("wb") as out:
            while chunk := response.read(1 << 20):
                got += len(chunk)
                if got > size:
                    break
                digest.update(chunk)
                out.write(chunk)
                if log is not None and got * 10 // size > tenth:
                    tenth = got * 10 // size
                    log(f"{target.name}: {got >> 20} of {size >> 20} MiB")
    except (urllib.error.URLError, OSError) as error:
        partial.unlink(missing_ok=True)
        raise FetchError(
            f"downloading {redact_url(url)} failed: {redact_text(str(error))}"
        ) from None
    actual = digest.hexdigest()
    if got != size or actual != sha256:
        partial.unlink(missing_ok=True)
        shown = f"over {size}" if got > size else str(got)
        raise FetchError(
            f"{target.name} from {redact_url(url)}: sha256 {actual} ({shown} bytes), pinned "
            f"{sha256} ({size} bytes); refusing it (nothing of it was run or unpacked)"
        )
    partial.replace(target)
    return target


def fetch(
    project: str,
    filename: str,
    sha256: str,
    size: int,
    target: Path,
    log: Callable[[str], None],
    settings: dict[str, str] | None = None,
) -> Path:
    """The pinned file at ``target``: the cached one if it verifies, else fetched and verified."""
    if target.exists():
        if target.stat().st_size == size and sha256_of(target) == sha256:
            return target
        log(f"{target} is not the pinned file (sha256 {sha256[:12]}...); fetching it again")
        target.unlink()
    config = pip_settings() if settings is None else settings
    indexes = index_urls(config)
    if not indexes:
        raise FetchError(
            f"pip is configured with no index; put {filename} (sha256 {sha256}) at {target}"
        )
    context = tls_context(config)
    for index in indexes:
        found = find_file(index, project, filename, context)
        if found is None:
            continue
        url, declared = found
        if declared is not None and declared.lower() != sha256:
            raise FetchError(
                f"{redact_url(index)} lists {filename} with sha256 {declared}, pinned {sha256}; "
                "refusing it (nothing was downloaded)"
            )
        log(f"downloading {filename} from {redact_url(url)}")
        return download(_with_credentials(url, index), target, sha256, size, context, log)
    shown = ", ".join(redact_url(url) for url in indexes)
    raise FetchError(f"no index lists {filename} (searched {shown})")


def is_unpacked(directory: Path, sha256: str) -> bool:
    marker = directory / UNPACKED_MARKER
    try:
        return marker.read_text(encoding="utf-8").strip() == sha256
    except OSError:
        return False


def unpack(archive: Path, sha256: str, target: Path, required: tuple[str, ...]) -> Path:
    """Unpack the verified ``archive``'s top directory to ``target``, whole or not at all.

    A ``target`` left by an interrupted unpack (no marker, or another hash's) and leftover
    temporary directories are removed first; ``required`` paths must be in the archive.
    """
    parent = target.parent
    parent.mkdir(parents=True, exist_ok=True)
    for stale in parent.glob(f".{target.name}.unpacking-*"):
        shutil.rmtree(stale, ignore_errors=True)
    if target.exists() and not is_unpacked(target, sha256):
        shutil.rmtree(target)
    if target.exists():
        return target
    scratch = Path(tempfile.mkdtemp(prefix=f".{target.name}.unpacking-", dir=parent))
    try:
        try:
            with tarfile.open(archive) as tar:
                tar.extractall(scratch, filter="data")
        except (tarfile.TarError, EOFError, OSError, ValueError) as error:
            raise FetchError(f"cannot unpack {archive.name}: {error}") from None
        roots = [p for p in scratch.iterdir() if p.is_dir()]
        if len(roots) != 1:
            raise FetchError(f"{archive.name} does not hold exactly one top directory")
        missing = [name for name in required if not (roots[0] / name).exists()]
        if missing:
            raise FetchError(f"{archive.name} has no {', '.join(missing)}")
        (roots[0] / UNPACKED_MARKER).write_text(sha256 + "\n", encoding="utf-8")
        os.replace(roots[0], target)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return target
