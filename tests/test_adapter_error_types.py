"""One table of exception -> execution error type for every adapter (issue 34, item 5).

LangChain's ``ToolException`` is typed by its cause as pydantic-ai's ``ToolFailed`` is, so
the same failing tool is the same failure key in both frameworks.
"""

from __future__ import annotations

import pytest
from langchain_core.tools import StructuredTool, ToolException
from langchain_harness import guarded_run as langchain_run
from langchain_harness import replies
from pydantic_ai import ModelRetry, ToolFailed
from pydantic_ai_harness import batches
from pydantic_ai_harness import guarded_run as pydantic_ai_run

from tool_failure_guard.guard import FailureKey
from tool_failure_guard.integrations._errors import FAILURE_SIGNALS, execution_error_type
from tool_failure_guard.integrations.pydantic_ai import stop_of as pydantic_ai_stop_of


def from_cause(signal: type[Exception], cause: BaseException) -> BaseException:
    try:
        raise signal("the file is gone") from cause
    except Exception as exc:
        return exc


def while_handling(signal: type[Exception], cause: BaseException) -> BaseException:
    try:
        try:
            raise cause
        except Exception:
            raise signal("the file is gone")  # noqa: B904 - the implicit context is the point
    except Exception as exc:
        return exc


@pytest.mark.parametrize("signal", [ToolException, ToolFailed, ModelRetry])
def test_a_signal_is_typed_by_the_exception_it_was_raised_from(signal: type[Exception]) -> None:
    assert execution_error_type(from_cause(signal, FileNotFoundError("x"))) == "file_not_found"
    assert execution_error_type(while_handling(signal, TimeoutError())) == "timeout"


def test_a_signal_without_a_classified_cause_is_its_own_row() -> None:
    assert execution_error_type(ToolException("no")) == "tool_failed"
    assert execution_error_type(ToolFailed("no")) == "tool_failed"
    assert execution_error_type(ModelRetry("again")) == "tool_retry"
    assert execution_error_type(from_cause(ToolException, ValueError("odd"))) == "tool_failed"
    # the signal's own error_type wins, and a plain exception keeps the core's rule
    tagged = ToolException("quota")
    tagged.error_type = "quota_exceeded"  # type: ignore[attr-defined]
    assert execution_error_type(tagged) == "quota_exceeded"
    assert execution_error_type(FileNotFoundError()) == "file_not_found"
    assert execution_error_type(RuntimeError()) == "unhandled_exception"


def test_the_table_names_the_frameworks_real_classes() -> None:
    for name in FAILURE_SIGNALS:
        module, _, cls = name.rpartition(".")
        assert isinstance(getattr(__import__(module, fromlist=[cls]), cls), type), name


FAILING = [[("read", {"path": "gone"})] * 4] * 3  # the reminder at 8 failures, then the stop


def test_the_same_failing_tool_is_the_same_key_in_langchain_and_pydantic_ai() -> None:
    def langchain_read(path: str) -> str:
        """Read a file."""
        raise ToolException(f"cannot read {path}") from FileNotFoundError(path)

    tool = StructuredTool.from_function(langchain_read, name="read", handle_tool_error=True)
    ran = langchain_run(replies(*FAILING), [tool], mode="enforce")
    assert ran.stop is not None and ran.stop.key == FailureKey("read", "file_not_found")

    def read(path: str) -> str:
        """Read a file."""
        raise ToolFailed(f"cannot read {path}") from FileNotFoundError(path)

    done = pydantic_ai_run(batches(*FAILING), [read], mode="enforce")
    stop = pydantic_ai_stop_of(done.result.output)
    assert stop is not None and stop.key == FailureKey("read", "file_not_found")
