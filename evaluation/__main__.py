"""``python -m evaluation``: see :mod:`evaluation.run`."""

import sys

from evaluation.run import main

sys.exit(main())
