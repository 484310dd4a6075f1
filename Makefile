# Every target sets itself up: a fresh Debian machine with Python 3.11 needs
# nothing but `make demo` or `make test` (as root, for the graphviz apt package).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Real MCP servers the tests run, at the exact versions of .mcp-servers/package-lock.json.
MCP_SERVERS := .mcp-servers
MCP_STAMP := $(MCP_SERVERS)/node_modules/.installed
# Real ACP clients (acpx) the tests drive the agent with, and the released original (Qwen Code
# 0.24.4, the parity oracle: docs/parity.md), pinned in .clients/package-lock.json.
CLIENTS := .clients
CLIENTS_STAMP := $(CLIENTS)/node_modules/.installed
# Real coding-agent CLIs (Claude Code, Codex CLI, Gemini CLI, Copilot CLI), pinned in
# .agents/package-lock.json: the coding-CLI hook tests run them headless against local fakes
# (part of `make test`), and the transcript importers' fixtures come from them
# (tests/transcript_capture.py).
AGENTS := .agents
AGENTS_STAMP := $(AGENTS)/node_modules/.installed
# The OpenHands SDK (PyPI, pinned; it needs Python 3.12+) that re-makes the OpenHands
# transcript fixtures runs from a venv of its own (tests/transcript_openhands.py), never the
# project's: PYTHON312 names the interpreter (found on PATH or among pyenv's versions).
PYTHON312 ?= $(shell for p in python3.12 python3.13 \
  $$(ls -d $$(pyenv root 2>/dev/null)/versions/3.1[23]*/bin/python3 2>/dev/null); do \
  $$p -c '' 2>/dev/null && { command -v $$p; break; }; done)
OPENHANDS_VENV := .venv-openhands
OPENHANDS_STAMP := $(OPENHANDS_VENV)/.installed
OPENHANDS_PINS := openhands-sdk==1.58.2 openhands-tools==1.58.2
# mini-swe-agent 1.15 (its `mini-swe-agent-1` trajectories: text actions) cannot share a venv
# with the 2.x of the transcript-agents extra: its own venv, for the v1 fixtures' re-capture
# (tests/transcript_mini.py finds it here, or TOOL_FAILURE_GUARD_MINI1_PYTHON names another).
MINI1 := .mini1
MINI1_VERSION := 1.15.0
MINI1_STAMP := $(MINI1)/.installed-$(MINI1_VERSION)

.PHONY: agents demo test bench bench-growth render lint typecheck unit setup clean eval eval-setup

$(STAMP): pyproject.toml
	@command -v dot >/dev/null 2>&1 || { \
	  echo "installing the graphviz apt package (for SVG diagrams)"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq graphviz >/dev/null) \
	  || echo "warning: could not install graphviz; SVG rendering will be skipped"; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev,agent,rollout,clickhouse,pydantic-ai,openai-agents,langchain,claude-agent-sdk]'
	@touch $(STAMP)

$(MCP_STAMP): $(MCP_SERVERS)/package.json $(MCP_SERVERS)/package-lock.json
	@if command -v npm >/dev/null 2>&1; then \
	  echo "installing the MCP test servers (npm ci, pinned versions)"; \
	  npm ci --prefix $(MCP_SERVERS) --no-audit --no-fund --loglevel=error && touch $@; \
	else \
	  echo "warning: npm not found: tests against real MCP servers will be SKIPPED (install Node.js 20+ with npm, then run make setup)"; \
	fi

$(CLIENTS_STAMP): $(CLIENTS)/package.json $(CLIENTS)/package-lock.json
	@if command -v npm >/dev/null 2>&1; then \
	  echo "installing the ACP test clients (acpx, Qwen Code 0.24.4; npm ci, pinned versions)"; \
	  npm ci --prefix $(CLIENTS) --no-audit --no-fund --loglevel=error && touch $@; \
	else \
	  echo "warning: npm not found: tests driving the agent with acpx and the parity tests against Qwen Code will be SKIPPED (install Node.js 20+ with npm, then run make setup)"; \
	fi

$(AGENTS_STAMP): $(AGENTS)/package.json $(AGENTS)/package-lock.json
	@if command -v npm >/dev/null 2>&1; then \
	  echo "installing the coding-agent CLIs (Claude Code, Codex CLI, Gemini CLI, Copilot CLI; npm ci, pinned versions)"; \
	  npm ci --prefix $(AGENTS) --no-audit --no-fund --loglevel=error && touch $@; \
	else \
	  echo "warning: npm not found: the coding-CLI hook tests and the transcript re-capture tests will be SKIPPED (install Node.js 20+ with npm, then run make setup)"; \
	fi

$(OPENHANDS_STAMP): Makefile
	@if [ -n "$(PYTHON312)" ]; then \
	  echo "installing the OpenHands SDK ($(OPENHANDS_PINS)) into $(OPENHANDS_VENV)"; \
	  $(PYTHON312) -m venv $(OPENHANDS_VENV) && \
	  $(OPENHANDS_VENV)/bin/pip install -q $(OPENHANDS_PINS) && touch $@; \
	else \
	  echo "warning: no Python 3.12+ found (set PYTHON312): the OpenHands re-capture test will be SKIPPED"; \
	fi

setup: $(STAMP) $(MCP_STAMP) $(CLIENTS_STAMP) agents

# The real coding agents that re-make the transcript fixtures: the npm CLIs (.agents, about
# 930 MB, which `make test` installs too: the hook tests run them), and the Python agents
# (mini-swe-agent 2.x from PyPI with litellm, 1.15 in .mini1, the OpenHands SDK in
# .venv-openhands, Python 3.12+, about 660 MB), installed by `make setup` / `make agents`,
# not by `make test`, which keeps CI under its time budget; their re-capture tests skip
# without them unless TOOL_FAILURE_GUARD_REQUIRE_AGENT_CLIS=1.
agents: $(STAMP) $(AGENTS_STAMP) $(OPENHANDS_STAMP) $(MINI1_STAMP)
	$(BIN)/pip install -q -e '.[transcript-agents]'

$(MINI1_STAMP):
	$(PYTHON) -m venv $(MINI1)
	$(MINI1)/bin/pip install -q 'mini-swe-agent==$(MINI1_VERSION)'
	@touch $(MINI1_STAMP)

demo: $(STAMP)
	$(BIN)/tool-failure-guard demo

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy --strict -p tool_failure_guard -p benches

unit: $(STAMP) $(MCP_STAMP) $(CLIENTS_STAMP) $(AGENTS_STAMP)
	$(BIN)/pytest

test: lint typecheck $(STAMP) $(MCP_STAMP) $(CLIENTS_STAMP) $(AGENTS_STAMP)
	$(BIN)/tool-failure-guard render --check
	$(BIN)/pytest

bench: $(STAMP)
	$(BIN)/python -m benches
	$(BIN)/python -m benches.rollout
	$(BIN)/python -m benches.hooks

# How the rollout analysis's cost grows, 100k -> 1M prompts (docs/rollout.md section 8):
# DuckDB only and one repetition by default, since 1M prompts are 4.7 GB of OTLP JSON.
GROWTH_ARGS ?= --prompts 100000,1000000 --repeat 1 --skip-clickhouse --skip-simulate
bench-growth: $(STAMP)
	$(BIN)/python -m benches.rollout $(GROWTH_ARGS)

# The real-model evaluation (docs/evaluation.md): not part of `make test`. Set-up is cached
# outside the repository; OPENAI_BASE_URL + TFG_EVAL_MODEL point it at your own server.
# A run writes a fresh eval-results/run-<UTC time>/; the committed records only with
# EVAL_ARGS="--records docs/evaluation --report docs/evaluation.md".
EVAL_ARGS ?=
eval-setup:
	$(PYTHON) -m tool_failure_guard.evaluation.setup_model

eval: $(STAMP)
	$(BIN)/python -m tool_failure_guard.evaluation run $(EVAL_ARGS)

render: $(STAMP)
	$(BIN)/tool-failure-guard render

clean:
	rm -rf $(VENV) $(MINI1) $(OPENHANDS_VENV) $(MCP_SERVERS)/node_modules $(CLIENTS)/node_modules $(AGENTS)/node_modules .pytest_cache .mypy_cache .ruff_cache .hypothesis
