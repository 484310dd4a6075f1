"""Run mini-swe-agent (PyPI ``mini-swe-agent``) once, in a child process, against a local endpoint.

2.x runs in this interpreter (the ``transcript-agents`` extra); 1.15, whose
trajectories are ``mini-swe-agent-1`` (text actions), cannot share an
environment with it and runs in its own venv (:func:`mini1_python`: ``make
agents`` makes ``.mini1``; ``TOOL_FAILURE_GUARD_MINI1_PYTHON`` names another).

Its default agent and config (``config/default.yaml``'s ``agent`` section, the
bash tool over tool calls) with :class:`LocalEnvironment` in ``cwd`` and
litellm's OpenAI-compatible route: ``openai/test-model`` at ``base_url``.
The child gets a private ``HOME`` (mini-swe-agent reads and may write its
global config there) and litellm's bundled cost map (no network look-up).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

_CHILD = textwrap.dedent(
    """
    import sys
    from pathlib import Path

    import yaml
    from minisweagent import package_dir
    from minisweagent.agents.default import DefaultAgent
    from minisweagent.environments.local import LocalEnvironment
    from minisweagent.models.litellm_model import LitellmModel

    base_url, cwd, out, step_limit = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    config = yaml.safe_load(Path(package_dir / "config" / "default.yaml").read_text())["agent"]
    config.update(step_limit=step_limit, cost_limit=0, output_path=Path(out))
    model = LitellmModel(
        model_name="openai/test-model",
        model_kwargs={"api_base": base_url, "api_key": "sk-test-key", "num_retries": 0},
        cost_tracking="ignore_errors",
    )
    agent = DefaultAgent(model, LocalEnvironment(cwd=cwd, timeout=5), **config)
    agent.run("Print the contents of missing.txt, then submit.")
    """
)


_CHILD_V1 = textwrap.dedent(
    """
    import sys
    from pathlib import Path

    import yaml
    from minisweagent import package_dir
    from minisweagent.agents.default import DefaultAgent
    from minisweagent.environments.local import LocalEnvironment
    from minisweagent.models.litellm_model import LitellmModel
    from minisweagent.run.utils.save import save_traj

    base_url, cwd, out, step_limit = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    config = yaml.safe_load(Path(package_dir / "config" / "default.yaml").read_text())["agent"]
    config.update(step_limit=step_limit, cost_limit=0)
    model = LitellmModel(
        model_name="openai/test-model",
        model_kwargs={"api_base": base_url, "api_key": "sk-test-key", "num_retries": 0},
        cost_tracking="ignore_errors",
    )
    agent = DefaultAgent(model, LocalEnvironment(cwd=cwd, timeout=5), **config)
    exit_status, result = agent.run("Print the contents of missing.txt, then submit.")
    save_traj(agent, Path(out), exit_status=exit_status, result=result, print_path=False)
    """
)
#: mini-swe-agent 1.x's pinned version (the last 1.x on PyPI when the fixtures were made).
MINI1_VERSION = "1.15.0"
MINI1_PYTHON_ENV = "TOOL_FAILURE_GUARD_MINI1_PYTHON"
_MINI1_VENV = Path(__file__).resolve().parent.parent / ".mini1"


def mini1_python() -> Path | None:
    """The interpreter of the venv holding mini-swe-agent 1.15, or None."""
    named = os.environ.get(MINI1_PYTHON_ENV)
    python = Path(named) if named else _MINI1_VENV / "bin" / "python"
    return python if python.is_file() else None


class MiniUnavailable(RuntimeError):
    """mini-swe-agent is not installed here."""


def available() -> str | None:
    """Why mini-swe-agent cannot run here, or None."""
    try:
        import minisweagent  # noqa: F401
    except ImportError:
        return "mini-swe-agent is not installed (pip install mini-swe-agent==2.4.6)"
    return None


def run_mini(
    base_url: str, cwd: Path, out: Path, *, step_limit: int, python: Path | None = None
) -> Path:
    """Run the agent until it submits or reaches ``step_limit``; the trajectory it wrote.

    ``python``: the interpreter of a venv with mini-swe-agent 1.x (its own child script).
    """
    home = out.parent / f"{out.name}.home"
    home.mkdir(parents=True, exist_ok=True)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "MSWEA_CONFIGURED": "true",
        "MSWEA_COST_TRACKING": "ignore_errors",
        "NO_COLOR": "1",
    }
    done = subprocess.run(
        [
            str(python or sys.executable),
            "-c",
            _CHILD if python is None else _CHILD_V1,
            base_url,
            str(cwd),
            str(out),
            str(step_limit),
        ],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=180,
    )
    if not out.is_file():
        raise RuntimeError(
            f"mini-swe-agent wrote no trajectory (exit {done.returncode}):\n{done.stderr[-3000:]}"
        )
    return out
