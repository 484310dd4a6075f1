"""Run the OpenHands SDK (PyPI ``openhands-sdk``) once, in a child process, on a local endpoint.

The SDK needs Python 3.12+, so it lives in its own venv
(:data:`VENV`, made by ``make agents``; ``$TOOL_FAILURE_GUARD_OPENHANDS_PYTHON``
names another interpreter holding it), never in the project's.  The child
builds the SDK's documented agent (``LLM`` with litellm's OpenAI-compatible
route ``openai/test-model`` at ``base_url``; ``Agent`` with the ``terminal``
and ``file_editor`` tools of ``openhands-tools``; a ``Conversation`` with a
``persistence_dir``), sends one message and runs it.  The conversation id is
fixed per scenario, so a re-capture lands in the same folder name.  What the
SDK persisted is ``<persistence_dir>/<id hex>/``: ``base_state.json`` and
``events/event-NNNNN-<event id>.json``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from agent_clis import REQUIRE_ENV_VAR
from transcript_scrub import SCRUBBED_ROOT, TRIMMED

ROOT = Path(__file__).resolve().parent.parent
#: The pins; ``make agents`` installs exactly these into :data:`VENV`.
OPENHANDS_SDK = "openhands-sdk==1.58.2"
OPENHANDS_TOOLS = "openhands-tools==1.58.2"
VENV = ROOT / ".venv-openhands"
PYTHON_ENV = "TOOL_FAILURE_GUARD_OPENHANDS_PYTHON"

_CHILD = textwrap.dedent(
    """
    import sys, uuid
    from pydantic import SecretStr
    from openhands.sdk import LLM, Agent, Conversation, Tool
    from openhands.tools.file_editor import FileEditorTool
    from openhands.tools.terminal import TerminalTool

    base_url, cwd, persist, conversation_id, limit = sys.argv[1:6]
    llm = LLM(
        model="openai/test-model",
        base_url=base_url,
        api_key=SecretStr("sk-test-key"),
        usage_id="agent",
        num_retries=0,
        native_tool_calling=True,
    )
    agent = Agent(llm=llm, tools=[Tool(name=TerminalTool.name), Tool(name=FileEditorTool.name)])
    conversation = Conversation(
        agent=agent,
        workspace=cwd,
        persistence_dir=persist,
        conversation_id=uuid.UUID(conversation_id),
        max_iteration_per_run=int(limit),
        visualizer=None,
        delete_on_close=False,
    )
    conversation.send_message("Print the contents of missing.txt.")
    conversation.run()
    print("execution_status", conversation.state.execution_status.value)
    conversation.close()
    """
)


def python() -> Path:
    """The interpreter that has the pinned SDK; skips (or fails, ``make agents``) without it."""
    given = os.environ.get(PYTHON_ENV)
    path = Path(given) if given else VENV / "bin" / "python"
    reason = None
    if not path.is_file():
        reason = f"the OpenHands SDK venv is missing ({path})"
    else:
        done = subprocess.run(
            [
                str(path),
                "-c",
                "import openhands.sdk, openhands.tools, importlib.metadata as m;"
                "print(m.version('openhands-sdk'))",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        found = done.stdout.strip()
        if done.returncode != 0:
            reason = f"{path} cannot import the OpenHands SDK"
        elif found != OPENHANDS_SDK.split("==")[1]:
            reason = f"{path} has openhands-sdk {found}, the fixtures pin {OPENHANDS_SDK}"
    if reason is not None:
        if os.environ.get(REQUIRE_ENV_VAR) == "1":
            pytest.fail(f"{reason} ({REQUIRE_ENV_VAR}=1)")
        pytest.skip(f"{reason}; `make agents` makes it (Python 3.12+)")
    return path


def run_openhands(
    interpreter: Path, base_url: str, work: Path, persist: Path, conversation_id: str, limit: int
) -> tuple[Path, int]:
    """The conversation folder the SDK wrote, and the child's exit status."""
    home = persist.parent / f"{persist.name}.home"
    home.mkdir(parents=True, exist_ok=True)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "OPENHANDS_SUPPRESS_BANNER": "1",
        "NO_COLOR": "1",
    }
    done = subprocess.run(
        [
            str(interpreter),
            "-c",
            _CHILD,
            base_url,
            str(work),
            str(persist),
            conversation_id,
            str(limit),
        ],
        env=env,
        cwd=work,
        capture_output=True,
        text=True,
        timeout=300,
    )
    folder = persist / conversation_id.replace("-", "")
    if not (folder / "base_state.json").is_file():
        raise RuntimeError(
            f"OpenHands wrote no conversation (exit {done.returncode}):\n{done.stderr[-3000:]}"
        )
    return folder, done.returncode


def _scrub_value(value: object, root: str) -> object:
    if isinstance(value, dict):
        return {k: _scrub_value(v, root) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub_value(v, root) for v in value]
    if isinstance(value, str):
        return value.replace(root, SCRUBBED_ROOT)
    return value


def scrub_conversation(folder: Path, root: Path, target: Path) -> Path:
    """Copy the conversation's state and events (not its lock files) with the temporary root
    replaced, the SDK's system prompt and tool descriptions trimmed (they are the vendor's),
    and the fake server's port and the machine's interpreter path fixed."""
    if target.exists():
        shutil.rmtree(target)
    (target / "events").mkdir(parents=True)
    state = json.loads((folder / "base_state.json").read_text("utf-8"))
    llm = state.get("agent", {}).get("llm", {})
    if "base_url" in llm:
        llm["base_url"] = "http://127.0.0.1:0/v1"
    _write(target / "base_state.json", _scrub_value(state, str(root)))
    for event in sorted((folder / "events").glob("event-*.json")):
        data = json.loads(event.read_text("utf-8"))
        if data.get("kind") == "SystemPromptEvent":
            data["system_prompt"]["text"] = TRIMMED
            data["tools"] = [
                {"name": t.get("name"), "description": TRIMMED}
                for t in data.get("tools", [])
                if isinstance(t, dict)
            ]
            data.pop("dynamic_context", None)
        metadata = data.get("observation", {}).get("metadata")
        if isinstance(metadata, dict):
            for key in ("py_interpreter_path", "hostname", "username"):
                if key in metadata:
                    metadata[key] = TRIMMED
        _write(target / "events" / event.name, _scrub_value(data, str(root)))
    return target


def _write(path: Path, data: object) -> None:
    path.write_text(json.dumps(data, ensure_ascii=False, separators=(",", ":")), "utf-8")


if __name__ == "__main__":
    sys.exit("use tests/transcript_agents.py openhands OUTDIR")
