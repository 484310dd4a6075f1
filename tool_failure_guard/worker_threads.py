"""Thread pools that survive ``fork``: a forked child gets its own, never its parent's.

A ``ThreadPoolExecutor`` copied by ``fork`` still believes in its parent's
threads, which do not exist in the child: work submitted there waits forever
(an idle parent thread released the pool's semaphore, so the child's pool
starts no thread of its own).  The agent's module-level pools (settings reads,
argument checks, file tools) are :class:`WorkerThreads`: the pool is made on
first use and forgotten in a forked child, which makes a fresh one.  The
rollout simulator runs sessions in forked worker processes, which is how this
was found.
"""

from __future__ import annotations

import concurrent.futures
import os


class WorkerThreads:
    """A lazily made ``ThreadPoolExecutor`` that a forked child replaces."""

    def __init__(self, max_workers: int, name: str) -> None:
        self._max_workers = max_workers
        self._name = name
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        os.register_at_fork(after_in_child=self._forget)

    @property
    def executor(self) -> concurrent.futures.ThreadPoolExecutor:
        """This process's pool (made on first use)."""
        if self._pool is None:
            self._pool = concurrent.futures.ThreadPoolExecutor(
                max_workers=self._max_workers, thread_name_prefix=self._name
            )
        return self._pool

    def _forget(self) -> None:
        self._pool = None
