"""``transcripts --plot PATH``: where each rule fires, on succeeded / failed / unrecorded runs.

matplotlib comes with the ``plot`` extra (also part of ``eval``) and is imported only
here, only when a plot is asked for.
"""

from __future__ import annotations

import importlib.util
import os
import tempfile
from pathlib import Path

from tool_failure_guard._extras import install_hint
from tool_failure_guard.transcripts.calibration import UPPER_FIELD
from tool_failure_guard.transcripts.report import OUTCOMES, RULE_LABELS, STOP_RULES, Fleet

_COLOURS = {"succeeded": "#4c9a2a", "failed": "#c0392b", "not_recorded": "#95a5a6"}


#: The file ``--plot DIR`` writes inside DIR.
DEFAULT_NAME = "transcripts.png"


class PlotUnavailable(RuntimeError):
    """matplotlib is not installed, or the plot cannot be written where asked."""


def plot_target(asked: Path) -> Path:
    """Where ``--plot`` writes, checked before any work: a ``.png`` file in an existing
    directory, or :data:`DEFAULT_NAME` inside a directory given; else a clear error."""
    if asked.is_dir():
        target = asked / DEFAULT_NAME
    elif asked.suffix.lower() != ".png":
        raise PlotUnavailable(
            f"--plot {asked}: the plot is a PNG image; name a .png file or a directory"
        )
    else:
        target = asked
    folder = target.parent
    if not folder.is_dir():
        raise PlotUnavailable(f"--plot {asked}: no directory {folder}")
    if not os.access(folder, os.W_OK):
        raise PlotUnavailable(f"--plot {asked}: the directory {folder} is not writable")
    if target.is_dir():
        raise PlotUnavailable(f"--plot {asked}: {target} is a directory")
    if importlib.util.find_spec("matplotlib") is None:
        raise PlotUnavailable("--plot needs matplotlib: pip install 'tool-failure-guard[eval]'")
    return target


def write_plot(summary: Fleet, path: Path) -> None:
    """Two panels: per rule, the runs it fires on by outcome (stacked bars); per stop rule,
    the rate of successful runs it stops with its exact 95 % upper bound."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise PlotUnavailable(f"--plot needs matplotlib: {install_hint('plot')}") from None
    labels = list(RULE_LABELS.values())
    stops = list(STOP_RULES)
    figure, (axes, bounds) = plt.subplots(
        2,
        1,
        figsize=(12, 0.5 * (len(labels) + len(stops)) + 3),
        height_ratios=[len(labels), len(stops)],
    )
    left = [0] * len(labels)
    for kind in OUTCOMES:
        counts = [summary.rules[rule][kind] for rule in RULE_LABELS]
        axes.barh(labels, counts, left=left, color=_COLOURS[kind], label=kind.replace("_", " "))
        left = [a + b for a, b in zip(left, counts, strict=True)]
    axes.invert_yaxis()
    axes.set_xlabel(f"runs the rule fires on (of {summary.runs})")
    axes.set_title("Where each rule fires, by run outcome")
    axes.legend(loc="lower right")
    rows = [summary.calibration[rule] for rule in stops]
    upper = [100 * (row[UPPER_FIELD] or 0.0) for row in rows]
    seen = [
        100 * row["succeeded_stopped"] / row["succeeded_runs"] if row["succeeded_runs"] else 0.0
        for row in rows
    ]
    names = [STOP_RULES[rule] for rule in stops]
    bounds.barh(names, upper, color="#f5b7b1", label="95% upper bound (Clopper-Pearson)")
    bounds.barh(names, seen, color=_COLOURS["failed"], label="seen")
    for y, row in enumerate(rows):
        n = row["succeeded_runs"]
        bounds.annotate(
            f"{row['succeeded_stopped']}/{n}" if n else "no successful run: no bound",
            (upper[y], y),
            xytext=(4, 0),
            textcoords="offset points",
            va="center",
            fontsize=8,
        )
    bounds.set_xlim(0, max([*upper, 1.0]) * 1.3)
    bounds.invert_yaxis()
    bounds.set_xlabel("successful runs stopped (%)")
    bounds.set_title("False stops per stop rule, runs with a known outcome")
    bounds.legend(loc="best", fontsize=8)
    figure.tight_layout()
    # written beside the target and renamed into place: never half a PNG
    handle, temporary = tempfile.mkstemp(prefix=".transcripts-", suffix=".png", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as out:
            figure.savefig(out, dpi=100, format="png")
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    finally:
        plt.close(figure)
