"""The pydantic-ai attachment bench: every attachment builds and runs the workload to its end.

The counts themselves need valgrind and minutes; this only checks the harness
(each agent makes a whole run, a bad attachment is refused by name), never a number.
"""

from __future__ import annotations

import pytest

from benches.adapters_pydantic_ai import ATTACHMENTS, _runner, main


@pytest.mark.parametrize("attachment", list(ATTACHMENTS))
def test_every_attachment_runs_the_workload_to_the_final_text(attachment: str) -> None:
    run = _runner(attachment, 3)
    run()  # raises unless the run ended with the workload's final text
    run()  # and again: one agent serves every round


def test_an_unknown_attachment_is_refused_by_name(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--attachments", "bare,history_processor"]) == 2
    assert "history_processor" in capsys.readouterr().err
