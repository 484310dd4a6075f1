# Every target sets itself up: a fresh Debian machine with Python 3.11 needs
# nothing but `make demo` or `make test` (as root, for the graphviz apt package).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test bench render lint typecheck unit setup clean

$(STAMP): pyproject.toml
	@command -v dot >/dev/null 2>&1 || { \
	  echo "installing the graphviz apt package (for SVG diagrams)"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq graphviz >/dev/null) \
	  || echo "warning: could not install graphviz; SVG rendering will be skipped"; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev,rollout]'
	@touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	$(BIN)/tool-failure-guard demo

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy --strict statecharts guard session tool_failure_guard rollout

unit: $(STAMP)
	$(BIN)/pytest

test: lint typecheck $(STAMP)
	$(BIN)/tool-failure-guard render --check
	$(BIN)/pytest

bench: $(STAMP)
	$(BIN)/tool-failure-guard bench
	$(BIN)/python -m rollout.bench

render: $(STAMP)
	$(BIN)/tool-failure-guard render

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
