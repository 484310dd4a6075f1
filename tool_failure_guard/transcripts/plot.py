"""``transcripts --plot PATH``: where each rule fires, on succeeded / failed / unrecorded runs.

matplotlib comes with the ``plot`` extra (also part of ``eval``) and is imported only
here, only when a plot is asked for.
"""

from __future__ import annotations

from pathlib import Path

from tool_failure_guard._extras import install_hint
from tool_failure_guard.transcripts.report import OUTCOMES, RULE_LABELS, Fleet

_COLOURS = {"succeeded": "#4c9a2a", "failed": "#c0392b", "not_recorded": "#95a5a6"}


class PlotUnavailable(RuntimeError):
    """matplotlib is not installed."""


def write_plot(summary: Fleet, path: Path) -> None:
    """A horizontal stacked bar per rule: the runs it fires on, by outcome."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise PlotUnavailable(f"--plot needs matplotlib: {install_hint('plot')}") from None
    labels = list(RULE_LABELS.values())
    figure, axes = plt.subplots(figsize=(9, 0.5 * len(labels) + 1.5))
    left = [0] * len(labels)
    for kind in OUTCOMES:
        counts = [summary.rules[rule][kind] for rule in RULE_LABELS]
        axes.barh(labels, counts, left=left, color=_COLOURS[kind], label=kind.replace("_", " "))
        left = [a + b for a, b in zip(left, counts, strict=True)]
    axes.invert_yaxis()
    axes.set_xlabel(f"runs the rule fires on (of {summary.runs})")
    axes.set_title("Where each rule fires, by run outcome")
    axes.legend(loc="lower right")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
