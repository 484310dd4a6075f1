"""The agent's thread pools work in a forked child (the rollout simulator forks sessions)."""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import threading
from typing import Any

import pytest

from tool_failure_guard.session.config import project_files
from tool_failure_guard.session.tools import builtin, executor
from tool_failure_guard.worker_threads import WorkerThreads


def _answer_in_child(pool: Any, queue: Any) -> None:
    pool_of = pool.executor if isinstance(pool, WorkerThreads) else pool
    future = pool_of.submit(threading.current_thread)
    try:
        queue.put(future.result(timeout=10).name)
    except concurrent.futures.TimeoutError:
        queue.put("timed out")


def _run_in_forked_child(pool: Any) -> str:
    # An idle thread in the parent: the state a fork copies into the child.
    executor_ = pool.executor if isinstance(pool, WorkerThreads) else pool
    executor_.submit(lambda: None).result()
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_answer_in_child, args=(pool, queue))
    child.start()
    try:
        return str(queue.get(timeout=30))
    finally:
        child.join(timeout=30)
        if child.is_alive():
            child.kill()


def test_a_plain_pool_copied_by_fork_never_runs_work_which_is_why_ours_are_not_plain() -> None:
    plain = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="plain")
    try:
        assert _run_in_forked_child(plain) == "timed out"
    finally:
        plain.shutdown()


@pytest.mark.parametrize(
    "pool",
    [project_files._READS, executor._CHECKS, builtin._FILE_IO],
    ids=["settings-read", "argument-check", "file-tools"],
)
def test_each_agent_pool_runs_work_in_a_forked_child(pool: WorkerThreads) -> None:
    assert isinstance(pool, WorkerThreads)
    assert _run_in_forked_child(pool) != "timed out"
