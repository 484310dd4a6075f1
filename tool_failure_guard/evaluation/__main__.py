"""``python -m tool_failure_guard.evaluation``: see :mod:`~tool_failure_guard.evaluation.run`."""

import sys

from tool_failure_guard.evaluation.run import main

sys.exit(main())
