"""``tool-failure-guard agent``: serve the guarded ACP agent on stdio."""

from __future__ import annotations

import argparse
import math
import os
import stat
import sys
from pathlib import Path

HELP = "serve the guarded ACP agent on stdio"
DEFAULT_SCENARIO = "read-loop"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model",
        default="scripted",
        metavar="scripted|openai:NAME",
        help="the model: the scripted scenario player (default), or NAME at the "
        "OpenAI-compatible endpoint $OPENAI_BASE_URL with key $OPENAI_API_KEY",
    )
    parser.add_argument(
        "--system-prompt-file",
        type=Path,
        default=None,
        metavar="FILE",
        help="replace the built-in coding-agent system prompt (openai models)",
    )
    parser.add_argument(
        "--model-max-retries",
        type=int,
        default=2,
        metavar="N",
        help="retries of a rate-limited (429) or failed (5xx) model request, "
        "with exponential backoff (default: 2)",
    )
    parser.add_argument(
        "--temperature",
        type=float,
        default=None,
        metavar="T",
        help="sampling temperature sent with every request (openai models; default: the "
        "endpoint's)",
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=None,
        metavar="N",
        help="sampling seed sent with every request (openai models; honoured by llama.cpp, "
        "vLLM and OpenAI's best effort)",
    )
    parser.add_argument(
        "--max-tokens",
        type=int,
        default=None,
        metavar="N",
        help="output-token limit of one model turn (openai models; default: the endpoint's)",
    )
    parser.add_argument(
        "--scenario",
        default=None,
        metavar="NAME|FILE",
        help="the scripted model's built-in scenario name or scenario JSON file (default: "
        f"{DEFAULT_SCENARIO}; not with --model openai:NAME)",
    )
    parser.add_argument(
        "--telemetry",
        type=_telemetry_kind,
        default="none",
        metavar="none|console|otlp|file:PATH",
        help="telemetry sink for guard decisions and prompt outcomes; file:PATH appends "
        "OTLP JSON lines (default: none)",
    )
    parser.add_argument(
        "--state-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="where session histories are kept "
        "(default: $TOOL_FAILURE_GUARD_STATE_DIR or $XDG_DATA_HOME/tool-failure-guard)",
    )
    parser.add_argument(
        "--drain-timeout",
        type=float,
        default=2.0,
        metavar="SECONDS",
        help="timeout of one mid-turn drain request (default: 2)",
    )
    parser.add_argument(
        "--max-tool-calls",
        type=int,
        default=None,
        metavar="N",
        help="per-prompt tool-call cap (default: $TOOL_FAILURE_GUARD_MAX_TOOL_CALLS or 100)",
    )
    parser.add_argument(
        "--max-frame-bytes",
        type=int,
        default=None,
        metavar="BYTES",
        help="refuse (and skip, unbuffered) any incoming JSON-RPC line longer than this "
        "(default: 8388608, 8 MiB; at least 1024)",
    )
    parser.add_argument(
        "--report-decisions",
        action="store_true",
        help="add a per-batch guard decision table to each prompt response's _meta",
    )
    parser.add_argument(
        "--log-level",
        default="WARNING",
        choices=("DEBUG", "INFO", "WARNING", "ERROR"),
        help="stderr log level (default: WARNING)",
    )


def parse_model_option(value: str) -> str | None:
    """``scripted`` -> None; ``openai:<name>`` -> the name; anything else: ValueError."""
    if value == "scripted":
        return None
    prefix = "openai:"
    if value.startswith(prefix) and value[len(prefix) :].strip():
        return value[len(prefix) :].strip()
    raise ValueError(f"--model must be 'scripted' or 'openai:<model name>', got {value!r}")


def _telemetry_kind(value: str) -> str:
    if value in ("none", "console", "otlp") or (value.startswith("file:") and len(value) > 5):
        return value
    raise argparse.ArgumentTypeError(f"{value!r} is not one of none, console, otlp, file:PATH")


def _stdio_problem() -> str | None:
    """ACP runs over stdin/stdout: they must be pipes or sockets (a terminal is fine too)."""
    for name, fd in (("standard input", 0), ("standard output", 1)):
        try:
            mode = os.fstat(fd).st_mode
        except OSError:
            return f"{name} is closed; run the agent under an ACP client"
        if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or os.isatty(fd)):
            return (
                f"{name} is not a pipe, socket or terminal; "
                "run the agent under an ACP client, which talks to it over pipes"
            )
    return None


def run(args: argparse.Namespace) -> int:
    import asyncio
    import logging

    from tool_failure_guard._extras import AGENT_MODULES, MissingExtra, require_extra

    try:
        require_extra("agent", *AGENT_MODULES)
    except MissingExtra as missing:
        print(f"tool-failure-guard agent: {missing}", file=sys.stderr)
        return 2
    from tool_failure_guard.sdk_import import import_acp

    import_acp()  # first: the SDK's models are then built when first used
    from tool_failure_guard.session.config.envconfig import EnvConfig
    from tool_failure_guard.session.config.redact import install_redaction
    from tool_failure_guard.session.model.base import (
        Model,
        ScenarioError,
        ScriptedModel,
        load_scenario,
    )
    from tool_failure_guard.session.persistence.history import default_state_dir
    from tool_failure_guard.session.transport.agent import AgentConfig, GuardedAgent
    from tool_failure_guard.session.transport.framing import (
        DEFAULT_MAX_FRAME_BYTES,
        MIN_MAX_FRAME_BYTES,
    )
    from tool_failure_guard.session.transport.serve import serve
    from tool_failure_guard.telemetry.build import build_telemetry

    logging.basicConfig(
        stream=sys.stderr, level=args.log_level, format="agent %(levelname)s %(name)s: %(message)s"
    )
    install_redaction()  # credentials in a URL never reach a log line
    try:
        model_name = parse_model_option(args.model)
    except ValueError as exc:
        print(f"tool-failure-guard agent: {exc}", file=sys.stderr)
        return 2
    if model_name is not None and args.scenario is not None:
        print(
            "tool-failure-guard agent: --scenario plays the scripted model; it cannot be "
            "combined with --model openai:NAME",
            file=sys.stderr,
        )
        return 2
    try:
        scenario = load_scenario(args.scenario or DEFAULT_SCENARIO)
    except ScenarioError as exc:
        print(f"tool-failure-guard agent: bad scenario: {exc}", file=sys.stderr)
        return 2
    if args.model_max_retries < 0:
        print("tool-failure-guard agent: --model-max-retries must be 0 or more", file=sys.stderr)
        return 2
    session_model_factory = None
    if model_name is not None:
        # Imported only here: the scripted agent (demo, most tests) never pays for the SDK.
        from tool_failure_guard.session.model.openai import (
            OpenAIChatModel,
            OpenAISettings,
            Sampling,
            SystemPromptError,
            read_system_prompt,
        )

        if args.temperature is not None and not (
            math.isfinite(args.temperature) and 0 <= args.temperature <= 2
        ):
            print(
                "tool-failure-guard agent: --temperature must be between 0 and 2", file=sys.stderr
            )
            return 2
        if args.max_tokens is not None and args.max_tokens < 1:
            print("tool-failure-guard agent: --max-tokens must be at least 1", file=sys.stderr)
            return 2
        sampling = Sampling(
            temperature=args.temperature, seed=args.seed, max_tokens=args.max_tokens
        )

        try:
            system_prompt = read_system_prompt(args.system_prompt_file)
        except SystemPromptError as exc:
            print(f"tool-failure-guard agent: bad system prompt: {exc}", file=sys.stderr)
            return 2
        name, retries = model_name, args.model_max_retries

        def session_model_factory(env: EnvConfig) -> Model:
            settings = OpenAISettings.from_env(
                name,
                env.values,
                max_retries=retries,
                system_prompt=system_prompt,
                sampling=sampling,
            )
            return OpenAIChatModel(settings)

    if not math.isfinite(args.drain_timeout) or args.drain_timeout <= 0:
        print(
            "tool-failure-guard agent: --drain-timeout must be a positive number of seconds",
            file=sys.stderr,
        )
        return 2
    if args.max_tool_calls is not None and args.max_tool_calls < 1:
        print("tool-failure-guard agent: --max-tool-calls must be at least 1", file=sys.stderr)
        return 2
    max_frame_bytes = DEFAULT_MAX_FRAME_BYTES
    if args.max_frame_bytes is not None:
        if args.max_frame_bytes < MIN_MAX_FRAME_BYTES:
            print(
                "tool-failure-guard agent: --max-frame-bytes must be at least "
                f"{MIN_MAX_FRAME_BYTES} bytes",
                file=sys.stderr,
            )
            return 2
        max_frame_bytes = args.max_frame_bytes
    try:
        telemetry = build_telemetry(args.telemetry)
    except ValueError as exc:
        print(f"tool-failure-guard agent: --telemetry {args.telemetry}: {exc}", file=sys.stderr)
        return 2
    config = AgentConfig(
        model_factory=lambda: ScriptedModel(scenario),
        session_model_factory=session_model_factory,
        state_dir=args.state_dir or default_state_dir(),
        telemetry=telemetry,
        drain_timeout=args.drain_timeout,
        report_decisions=args.report_decisions,
        tool_call_cap=args.max_tool_calls,
    )
    # Last: every option error above is worth reporting even without an ACP client.
    problem = _stdio_problem()
    if problem is not None:
        print(f"tool-failure-guard agent: {problem}", file=sys.stderr)
        return 2
    try:
        asyncio.run(serve(GuardedAgent(config), max_frame_bytes=max_frame_bytes))
    except KeyboardInterrupt:
        return 130
    return 0
