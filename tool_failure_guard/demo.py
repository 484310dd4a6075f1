"""Interim ``demo``: replaced by the ACP session demo (issue 4)."""

from __future__ import annotations

import argparse

HELP = "run the built-in demo"


def configure(parser: argparse.ArgumentParser) -> None:
    return None


def run(args: argparse.Namespace) -> int:
    print("demo: not yet available")
    return 1
