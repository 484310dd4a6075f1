"""Use the guard in your own loop: the protection core around a plain chat-completions loop.

Needs the official ``openai`` SDK beside the lean package: the ``agent`` extra brings it
(from a checkout, ``pip install -e '.[agent]'``), or ``pip install openai``.  Any
OpenAI-compatible endpoint::

    OPENAI_BASE_URL=http://localhost:11434/v1 OPENAI_API_KEY=ollama \\
        python examples/own_loop.py --model qwen2.5 --mode warn --workspace . "Read notes.txt"

The model gets two tools working in ``--workspace``: ``read_file(path)`` and
``list_directory(path=".")``.  Each model response's tool calls are one batch:
admitted by the core (replayed call ids never run again), each call settled on
its path of the outcome contract (``tool_failure_guard.core.outcomes``), then
the core says what to do next: continue (adding its system texts, the
reminder, after the tool results) or stop (no further model request; the stop
notice is the run's output).  The mode is ``--mode``, else the
``QWEN_CODE_ACP_REPEATED_TOOL_FAILURE_GUARD`` environment variable, else ``shadow``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs
import openai

import tool_failure_guard as tfg
from tool_failure_guard.core import outcomes

SYSTEM_PROMPT = "You are a careful assistant. Use the tools to answer."
MAX_OUTPUT_CHARS = 20_000
_PATH = {"type": "string", "description": "a path relative to the workspace"}
TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a text file in the workspace.",
            "parameters": {"type": "object", "properties": {"path": _PATH}, "required": ["path"]},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "list_directory",
            "description": "List a directory of the workspace.",
            "parameters": {"type": "object", "properties": {"path": _PATH}, "required": []},
        },
    },
]
_SCHEMAS = {tool["function"]["name"]: tool["function"]["parameters"] for tool in TOOLS}


def _inside(workspace: Path, path: str) -> Path:
    target = (workspace / path).resolve()
    if target != workspace and workspace not in target.parents:
        raise PermissionError(f"{path} is outside the workspace")
    return target


def read_file(workspace: Path, path: str) -> str:
    return _inside(workspace, path).read_text(encoding="utf-8")  # FileNotFoundError, ...


def list_directory(workspace: Path, path: str = ".") -> str:
    return "\n".join(sorted(p.name for p in _inside(workspace, path).iterdir()))


IMPLEMENTATIONS: dict[str, Callable[..., str]] = {
    "read_file": read_file,
    "list_directory": list_directory,
}


def argument_problem(name: str, args: Mapping[str, Any]) -> str | None:
    """Why ``args`` do not fit the tool's schema (required keys, string values), if they don't."""
    schema = _SCHEMAS[name]
    missing = [key for key in schema["required"] if key not in args]
    if missing:
        return f"missing required argument(s): {', '.join(missing)}"
    unknown = [key for key in args if key not in schema["properties"]]
    if unknown:
        return f"unknown argument(s): {', '.join(unknown)}"
    wrong = [key for key, value in args.items() if not isinstance(value, str)]
    return f"argument(s) must be strings: {', '.join(wrong)}" if wrong else None


def settle(call: tfg.FunctionCall, workspace: Path) -> tfg.CallOutcome:
    """Run one call and settle it on its path of the outcome contract."""
    if call.name not in IMPLEMENTATIONS:
        return outcomes.unknown_tool(call)
    if call.arguments_error is not None:
        return outcomes.invalid_arguments(call, f"arguments are not JSON: {call.arguments_error}")
    problem = argument_problem(call.name, call.args)
    if problem is not None:
        return outcomes.invalid_arguments(call, problem)
    try:
        output = IMPLEMENTATIONS[call.name](workspace, **call.args)
    except OSError as exc:  # typed by the core from the class (FileNotFoundError: file_not_found)
        return outcomes.raised(
            call, exc, message=f"{call.args.get('path', '.')}: {exc.strerror or exc}"
        )
    except Exception as exc:  # typed by its error_type attribute, else its class
        return outcomes.raised(call, exc)
    return outcomes.succeeded(call, output[:MAX_OUTPUT_CHARS])


def function_call(tool_call: Any) -> tfg.FunctionCall:
    """The core's value for one of the SDK's tool calls (arguments decoded, or why not)."""
    raw = tool_call.function.arguments or "{}"
    try:
        args = json.loads(raw)
    except ValueError as exc:
        return tfg.FunctionCall(
            call_id=tool_call.id, name=tool_call.function.name, arguments_error=str(exc)
        )
    if not isinstance(args, dict):
        return tfg.FunctionCall(
            call_id=tool_call.id, name=tool_call.function.name, arguments_error="not an object"
        )
    return tfg.FunctionCall(call_id=tool_call.id or "", name=tool_call.function.name, args=args)


@attrs.frozen(kw_only=True)
class RunResult:
    output: str  #: the model's answer, or the stop notice
    stopped: tfg.Stop | None  #: the typed stop signal (None when the model finished)
    decisions: tuple[tfg.Decision, ...]  #: the guard's decision for every batch it reduced
    messages: tuple[dict[str, Any], ...]  #: the run's history


def run(
    client: openai.OpenAI,
    model: str,
    prompt: str,
    workspace: Path,
    mode: tfg.GuardMode,
    *,
    max_turns: int = 50,
) -> RunResult:
    """One guarded run: model turns and tool batches until an answer, a stop or ``max_turns``."""
    protection = tfg.PromptProtection(mode)  # one per run
    workspace = workspace.resolve()
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": prompt},
    ]
    decisions: list[tfg.Decision] = []

    def result(output: str, stopped: tfg.Stop | None = None) -> RunResult:
        return RunResult(
            output=output, stopped=stopped, decisions=tuple(decisions), messages=tuple(messages)
        )

    for _ in range(max_turns):
        reply = client.chat.completions.create(model=model, messages=messages, tools=TOOLS)  # type: ignore[arg-type]
        message = reply.choices[0].message
        tool_calls = message.tool_calls or []
        assistant: dict[str, Any] = {"role": "assistant", "content": message.content}
        if tool_calls:
            assistant["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.function.name, "arguments": c.function.arguments},
                }
                for c in tool_calls
            ]
        messages.append(assistant)
        if not tool_calls:
            return result(message.content or "")

        admission = protection.admit([function_call(c) for c in tool_calls])
        batch = protection.open_batch(admission)
        for call in admission.calls:
            if batch.is_provider_duplicate(call.call_id):
                batch.settle(outcomes.provider_duplicate(call, tool=call.name))
            else:
                batch.settle(settle(call, workspace))
        for call, outcome in zip(admission.calls, batch.outcomes(), strict=True):
            text = outcome.output if outcome is not None else "the call did not settle"
            messages.append({"role": "tool", "tool_call_id": call.call_id, "content": text})

        action = protection.after_batch(batch)  # no mid-run user input here: a quiet boundary
        if action.decision is not None:
            decisions.append(action.decision)
        if isinstance(action, tfg.Stop):
            return result(action.notice, action)  # no further model request
        for text in action.system_texts:  # the reminder, once per streak, at its place
            messages.append({"role": "system", "content": text})
    return result(f"(no answer after {max_turns} model turns)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("prompt")
    parser.add_argument("--model", required=True)
    parser.add_argument("--mode", choices=[m.value for m in tfg.GuardMode])
    parser.add_argument("--workspace", type=Path, default=Path("."))
    args = parser.parse_args(argv)
    client = openai.OpenAI(max_retries=0)  # OPENAI_BASE_URL, OPENAI_API_KEY
    outcome = run(client, args.model, args.prompt, args.workspace, tfg.mode_for_run(args.mode))
    for decision in outcome.decisions:
        print(f"guard: {decision.kind.value}", file=sys.stderr)
    if outcome.stopped is not None:
        print(f"stopped: {outcome.stopped.loop_type}", file=sys.stderr)
    print(outcome.output)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
