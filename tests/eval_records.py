"""Episode records built by hand, in the shape the evaluation saves (``episodes.jsonl``).

For the tests of the evaluation's offline replays and report sections: a batch
of calls, each a (tool, arguments, error type or None for success), and an
episode around batches.
"""

from __future__ import annotations

from typing import Any

READ_FAIL = ("read_file", '{"path": "config.yaml"}', "file_not_found")
CAT_FAIL = ("run_shell_command", '{"command": "cat config.yaml"}', "shell_execute_error")
LIST_OK = ("list_directory", '{"path": "."}', None)


def batch(*calls: tuple[str, str, str | None], decision: str = "none") -> dict[str, Any]:
    """calls: (tool, args, error type or None for success)."""
    return {
        "calls": [
            {
                "name": tool,
                "args": args,
                "duplicate": False,
                "terminal_status": "error" if error else "success",
                "execution_status": "error" if error else "success",
                "execution_error_type": error,
                "tool_type": "native",
                "error_text": f"{tool} failed: {error}" if error else "",
            }
            for tool, args, error in calls
        ],
        "decision": decision,
    }


def episode(arm: str, kind: str, batches: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    return {
        "arm": arm,
        "kind": kind,
        "task": "t",
        "seed": 1,
        "batches": batches,
        "tool_calls": sum(len(b["calls"]) for b in batches),
        "decisions": ["none"] * len(batches),
        "final_text": "",
        "success": False,
        **fields,
    }
