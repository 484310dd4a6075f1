"""``python -m benches [--batches N] [--rounds R] [--seed S]``: the guard's measured costs."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from benches import guard


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benches", description=guard.HELP, allow_abbrev=False
    )
    guard.configure(parser)
    return guard.run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
