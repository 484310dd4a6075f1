"""Run the real Gemini CLI (0.61.0, ``.agents/``) against the fake Gemini API; keep its chat log.

``gemini -p ... --output-format stream-json --yolo`` through
:func:`hook_clis.run_gemini` (a private ``HOME``, API-key auth,
``GOOGLE_GEMINI_BASE_URL`` at :mod:`agent_fakes.gemini_api`), no hooks.  The
CLI records the session at
``$HOME/.gemini/tmp/<project>/chats/session-<time>-<id8>.jsonl``.  Scrubbed:
the temporary root becomes ``/tmp/capture``; the CLI's ``<session_context>``
text (the date, the machine's folder listing) is trimmed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agent_fakes.script import Call, Turn
from transcript_scrub import SCRUBBED_ROOT, TRIMMED


def _read(path: str) -> Call:
    return Call(name="read_file", arguments={"file_path": path})


def _shell(command: str) -> Call:
    return Call(name="run_shell_command", arguments={"command": command})


SCENARIOS: dict[str, list[Turn]] = {
    # a two-call batch, a failing command, an unknown tool, a call missing its argument,
    # a command that works, then an answer
    "mixed": [
        Turn(text="Reading it both ways.", calls=(_read("missing.txt"), _shell("cat missing.txt"))),
        Turn(calls=(_shell("exit 3"),)),
        Turn(calls=(Call(name="no_such_tool", arguments={}),)),
        Turn(calls=(Call(name="read_file", arguments={}),)),
        Turn(calls=(_shell("echo ok"),)),
    ],
    # a different missing file each turn: the shipped guard's loop, no identical calls
    "varied-missing": [Turn(calls=(_read(f"missing-{i}.txt"),)) for i in range(10)],
}


def _scrub(record: Any) -> Any:
    if isinstance(record, dict):
        return {k: _scrub(v) for k, v in record.items()}
    if isinstance(record, list):
        return [_scrub(v) for v in record]
    if isinstance(record, str) and record.startswith("<session_context>"):
        return f"<session_context>{TRIMMED}</session_context>"
    return record


def capture(out: Path, only: tuple[str, ...] | None = None, base: Path | None = None) -> list[Path]:
    """Run each scenario (or ``only`` those); write ``<scenario>.session.jsonl`` into ``out``."""
    from hook_clis import run_gemini

    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, turns in SCENARIOS.items():
        if only is not None and name not in only:
            continue
        run = run_gemini(turns, prompt=f"scenario {name}", base=base)
        (log,) = sorted((run.root / "home" / ".gemini" / "tmp").glob("*/chats/session-*.jsonl"))
        lines = []
        for line in log.read_text(encoding="utf-8").splitlines():
            if line.strip():
                text = json.dumps(_scrub(json.loads(line)), ensure_ascii=False)
                lines.append(text.replace(str(run.root), SCRUBBED_ROOT))
        target = out / f"{name}.session.jsonl"
        target.write_text("\n".join(lines) + "\n", encoding="utf-8")
        written.append(target)
    return written
