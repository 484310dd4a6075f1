"""Run the real agents against the scripted endpoint, to make the transcript fixtures.

``python tests/transcript_agents.py qwen-code|mini-swe-agent OUTDIR`` writes the
logs each agent itself wrote (see ``tests/fixtures/transcripts/README.md``);
the tests call the same functions to check a fresh log maps like the
committed one.  Temporary paths in the logs are replaced by a fixed one
(:data:`FIXED_ROOT`), nothing else is changed.

- Qwen Code 0.24.4 (``tests/qwen_original.py`` installs and finds it), run
  non-interactively (``-p``) with ``--approval-mode yolo`` against
  :class:`~openai_server.FakeOpenAI`: it writes its session record to
  ``~/.qwen/projects/<cwd with / as ->/chats/<session id>.jsonl``.
- mini-swe-agent (PyPI ``mini-swe-agent``) through litellm's OpenAI-compatible
  route (``openai/<model>`` with ``api_base``) against the same server: it
  writes ``<name>.traj.json``.
- the OpenHands SDK (PyPI ``openhands-sdk``, its own Python 3.12 venv:
  ``tests/transcript_openhands.py``) the same way: it writes a conversation
  folder (``python tests/transcript_agents.py openhands OUTDIR``).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from openai_server import FakeOpenAI, Reply, call, serve
from qwen_original import cli_path, environment, make_home

#: What the temporary directory of a generated log is replaced with.
FIXED_ROOT = "/tmp/transcript-fixture"


def _qwen_scenarios(work: Path) -> dict[str, list[Reply]]:
    missing = [str(work / f"missing-{i}.txt") for i in range(14)]
    notes = str(work / "notes.txt")
    return {
        # a different missing file each turn: the shipped guard's loop, no identical calls
        "varied-missing-reads": [
            *(
                Reply(calls=(call(f"call_v{i}", "read_file", {"file_path": missing[i]}),))
                for i in range(12)
            ),
            Reply(text="None of the files exist."),
        ],
        # the same call again and again: Qwen Code's own identical-call check halts it
        "identical-missing-read": [
            *(
                Reply(calls=(call(f"call_i{i}", "read_file", {"file_path": missing[0]}),))
                for i in range(7)
            ),
            Reply(text="It does not exist."),
        ],
        # a run that works: a read, a two-call batch, one failing shell command, an answer
        "mostly-successful": [
            Reply(calls=(call("call_s0", "read_file", {"file_path": notes}),)),
            Reply(
                calls=(
                    call("call_s1", "run_shell_command", {"command": "echo hello"}),
                    call("call_s2", "read_file", {"file_path": notes}),
                )
            ),
            Reply(calls=(call("call_s3", "run_shell_command", {"command": "exit 3"}),)),
            Reply(calls=(call("call_s4", "run_shell_command", {"command": "echo done"}),)),
            Reply(text="Done: the notes say hello."),
        ],
    }


def _fix_paths(text: str, root: Path) -> str:
    return text.replace(str(root), FIXED_ROOT)


def qwen_code(out: Path, only: Sequence[str] | None = None) -> list[Path]:
    """Run Qwen Code once per scenario (or those ``only`` names); copy each session record."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    with tempfile.TemporaryDirectory(prefix="tfg-qwen-") as tmp:
        root = Path(tmp)
        work = root / "work"
        work.mkdir()
        (work / "notes.txt").write_text("hello\n", encoding="utf-8")
        for name, replies in _qwen_scenarios(work).items():
            if only is not None and name not in only:
                continue
            home = make_home(root / f"home-{name}")
            with serve(FakeOpenAI(list(replies))) as fake:
                env = environment(home=home, base_url=fake.base_url, mode="shadow")
                env["QWEN_CODE_SUPPRESS_YOLO_WARNING"] = "1"
                argv = ["node", str(cli_path()), "-p", f"scenario {name}", "--auth-type", "openai"]
                argv += ["--approval-mode", "yolo", "-m", "test-model"]
                subprocess.run(argv, env=env, cwd=work, capture_output=True, timeout=180)
            records = sorted((home / ".qwen" / "projects").glob("*/chats/*.jsonl"))
            if len(records) != 1:
                raise RuntimeError(f"Qwen Code wrote {len(records)} session records for {name}")
            target = out / f"{name}.jsonl"
            target.write_text(_fix_paths(records[0].read_text("utf-8"), root), "utf-8")
            written.append(target)
    return written


async def _qwen_acp_prompt(home: Path, base_url: str, project: Path) -> None:
    from acp import RequestError, text_block
    from qwen_original import Host, spawn_original

    async with spawn_original(
        Host("bare"), home=home, base_url=base_url, mode="enforce", cwd=project
    ) as conn:
        session = await conn.new_session(cwd=str(project), mcp_servers=[])
        with contextlib.suppress(RequestError):  # its guard stops the prompt: the point
            await conn.prompt(session_id=session.session_id, prompt=[text_block("go")])


def qwen_code_acp(out: Path) -> Path:
    """Qwen Code as an ACP agent in enforce: three failing reads a turn until its guard stops."""
    import asyncio

    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="tfg-qacp-") as tmp:
        root = Path(tmp)
        project = root / "project"
        project.mkdir()
        home = make_home(root / "home")
        replies = [
            Reply(
                text="Reading.",
                calls=tuple(
                    call(
                        f"call_a{t}_{k}", "read_file", {"file_path": str(project / f"m{t}-{k}.txt")}
                    )
                    for k in range(3)
                ),
            )
            for t in range(6)
        ]
        with serve(FakeOpenAI([*replies, Reply(text="Done.")])) as fake:
            asyncio.run(asyncio.wait_for(_qwen_acp_prompt(home, fake.base_url, project), 150))
        (record,) = sorted((home / ".qwen" / "projects").glob("*/chats/*.jsonl"))
        target = out / "acp-enforce-stopped.jsonl"
        target.write_text(_fix_paths(record.read_text("utf-8"), root), "utf-8")
    return target


def _mini_replies() -> dict[str, list[Reply]]:
    def bash(call_id: str, command: str) -> tuple[str, str, str]:
        return call(call_id, "bash", {"command": command})

    return {
        # the same failing command over and over, then the step limit ends the run
        "failing-command": [
            Reply(text="THOUGHT: read it.", calls=(bash(f"call_f{i}", "cat missing.txt"),))
            for i in range(16)
        ],
        # a run that submits: a failure, a two-call batch, a timeout, then the submit command
        "submits": [
            Reply(text="THOUGHT: look.", calls=(bash("call_s0", "cat missing.txt"),)),
            Reply(
                text="THOUGHT: write and read.",
                calls=(bash("call_s1", "echo hello > notes.txt"), bash("call_s2", "cat notes.txt")),
            ),
            Reply(text="THOUGHT: wait.", calls=(bash("call_s3", "sleep 9"),)),
            Reply(text="THOUGHT: no tool call."),
            Reply(text="THOUGHT: wrong tool.", calls=(call("call_sx", "python", {"code": "1"}),)),
            Reply(
                text="THOUGHT: done.",
                calls=(bash("call_s4", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"),),
            ),
        ],
    }


def mini_swe_agent(out: Path, only: Sequence[str] | None = None) -> list[Path]:
    """Run mini-swe-agent's default agent once per scenario (or ``only``); copy each trajectory."""
    from transcript_mini import run_mini

    out.mkdir(parents=True, exist_ok=True)
    written = []
    with tempfile.TemporaryDirectory(prefix="tfg-mini-") as tmp:
        root = Path(tmp)
        for name, script in _mini_replies().items():
            if only is not None and name not in only:
                continue
            work = root / name
            work.mkdir()
            with serve(FakeOpenAI(list(script))) as fake:
                traj = run_mini(fake.base_url, work, root / f"{name}.traj.json", step_limit=14)
            target = out / f"{name}.traj.json"
            target.write_text(_fix_paths(traj.read_text("utf-8"), root), "utf-8")
            written.append(target)
    return written


def _mini1_replies() -> dict[str, list[Reply]]:
    def bash(command: str, thought: str = "THOUGHT: next.") -> Reply:
        return Reply(text=f"{thought}\n\n```bash\n{command}\n```")

    return {
        # the same failing command over and over, then the step limit ends the run
        "v1-failing-command": [bash("cat missing.txt") for _ in range(16)],
        # a failure, a success, a timeout, two blocks (refused), no block, then the submit
        "v1-submits": [
            bash("cat missing.txt", "THOUGHT: look."),
            bash("echo hello > notes.txt && cat notes.txt", "THOUGHT: write and read."),
            bash("sleep 9", "THOUGHT: wait."),
            Reply(text="THOUGHT: two.\n\n```bash\nls\n```\n\n```bash\npwd\n```"),
            Reply(text="THOUGHT: no block at all."),
            bash("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT", "THOUGHT: done."),
        ],
    }


def mini_swe_agent_1(out: Path, only: Sequence[str] | None = None) -> list[Path]:
    """Run mini-swe-agent 1.15's default agent (its own venv) once per scenario; copy each."""
    from transcript_mini import mini1_python, run_mini

    python = mini1_python()
    if python is None:
        raise RuntimeError("mini-swe-agent 1.15 is not installed (make agents makes .mini1)")
    out.mkdir(parents=True, exist_ok=True)
    written = []
    with tempfile.TemporaryDirectory(prefix="tfg-mini1-") as tmp:
        root = Path(tmp)
        for name, script in _mini1_replies().items():
            if only is not None and name not in only:
                continue
            work = root / name
            work.mkdir()
            with serve(FakeOpenAI(list(script))) as fake:
                traj = run_mini(
                    fake.base_url, work, root / f"{name}.traj.json", step_limit=14, python=python
                )
            target = out / f"{name}.traj.json"
            target.write_text(_fix_paths(traj.read_text("utf-8"), root), "utf-8")
            written.append(target)
    return written


async def _own_session(state: Path, home: Path, project: Path, mode: str, scenario: str) -> str:
    from acp import text_block

    from tool_failure_guard.session.transport.client import RecordingClient, spawn_guarded_agent

    client = RecordingClient()
    async with spawn_guarded_agent(
        client, mode=mode, state_dir=state, home=home, scenario=scenario
    ) as conn:
        session = await conn.new_session(cwd=str(project), mcp_servers=[])
        for text in ("read the config", "what exists?"):
            try:
                await conn.prompt(session_id=session.session_id, prompt=[text_block(text)])
            except Exception:  # a scenario with one prompt: the second one has no script
                break
        return str(session.session_id)


def own_history(out: Path) -> list[Path]:
    """The project's own agent (scripted model scenarios) in shadow and enforce: its histories."""
    import asyncio

    out.mkdir(parents=True, exist_ok=True)
    written = []
    with tempfile.TemporaryDirectory(prefix="tfg-own-") as tmp:
        root = Path(tmp)
        for mode, scenario in (("shadow", "read-loop"), ("enforce", "siblings")):
            state, home, project = root / "state", root / "home", root / "project"
            for folder in (home, project):
                folder.mkdir(exist_ok=True)
            sid = asyncio.run(_own_session(state, home, project, mode, scenario))
            source = state / "sessions" / f"{sid}.jsonl"
            target = out / f"{scenario}-{mode}.jsonl"
            target.write_text(_fix_paths(source.read_text("utf-8"), root), "utf-8")
            written.append(target)
    return written


#: scenario -> (fixed conversation id, iteration limit)
OPENHANDS_SCENARIOS = {
    "failing-command": ("0e0e0e0e-0000-4000-8000-000000000001", 14),
    "mixed": ("0e0e0e0e-0000-4000-8000-000000000002", 14),
    "varied-missing": ("0e0e0e0e-0000-4000-8000-000000000003", 10),
}


def _openhands_replies(work: Path) -> dict[str, list[Reply]]:
    def terminal(call_id: str, command: str, **more: object) -> tuple[str, str, str]:
        return call(call_id, "terminal", {"command": command, **more})

    missing = str(work / "missing.txt")
    return {
        # the same failing command again and again: the SDK's stuck detector ends the run
        "failing-command": [
            Reply(text="Reading it.", calls=(terminal(f"call_f{i}", "cat missing.txt"),))
            for i in range(16)
        ],
        # a different missing file each turn (no identical calls) until the iteration limit
        "varied-missing": [
            Reply(calls=(terminal(f"call_v{i}", f"cat missing-{i}.txt"),)) for i in range(12)
        ],
        # a two-call batch, a missing file, an unknown tool, a call its validation refuses,
        # a command past its timeout, then the finish tool
        "mixed": [
            Reply(
                text="Write and read.",
                calls=(
                    terminal("call_m0", "echo hello > notes.txt"),
                    call("call_m1", "file_editor", {"command": "view", "path": missing}),
                ),
            ),
            Reply(calls=(terminal("call_m2", "cat notes.txt"),)),
            Reply(calls=(call("call_m3", "python", {"code": "1"}),)),
            Reply(calls=(call("call_m4", "terminal", {"timeout": 1}),)),
            Reply(calls=(terminal("call_m5", "sleep 8", timeout=1),)),
            Reply(calls=(terminal("call_m6", "ls nope"),)),
            Reply(text="Done.", calls=(call("call_m7", "finish", {"message": "It is missing."}),)),
        ],
    }


def openhands(out: Path, only: Sequence[str] | None = None) -> list[Path]:
    """Run the OpenHands SDK once per scenario (or ``only``); copy each conversation folder."""
    from transcript_openhands import python, run_openhands, scrub_conversation

    interpreter = python()
    out.mkdir(parents=True, exist_ok=True)
    written = []
    with tempfile.TemporaryDirectory(prefix="tfg-openhands-") as tmp:
        root = Path(tmp)
        for name, (conversation_id, limit) in OPENHANDS_SCENARIOS.items():
            if only is not None and name not in only:
                continue
            work = root / name
            work.mkdir()
            with serve(FakeOpenAI(_openhands_replies(work)[name], numbered_ids=True)) as fake:
                folder, _ = run_openhands(
                    interpreter,
                    fake.base_url,
                    work,
                    root / f"{name}.persist",
                    conversation_id,
                    limit,
                )
            written.append(scrub_conversation(folder, root, out / name))
    return written


def main(argv: Sequence[str]) -> int:
    kind, out = argv[0], Path(argv[1])
    makers = {
        "qwen-code": qwen_code,
        "mini-swe-agent": mini_swe_agent,
        "mini-swe-agent-1": mini_swe_agent_1,
        "openhands": openhands,
    }
    made = makers.get(kind, own_history)(out)
    if kind == "qwen-code":
        made.append(qwen_code_acp(out))
    for path in made:
        print(path)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main(sys.argv[1:]))
