# Two commands do all the set-up on a fresh machine with Python 3.11+:
#   make demo   - venv, install, run the demo on an embedded SQLite ledger
#   make test   - venv, install, lint, type-check, layering check, tests
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PKG_DIRS := api domain projections application adapters
# Re-install when a package folder gains or loses a file (strict editable mode links files).
PKG_STAMP := $(shell find $(PKG_DIRS) -type d -not -name __pycache__ 2>/dev/null)

.PHONY: demo test lint typecheck layers unit bench clean chromium

$(BIN)/.installed: pyproject.toml $(PKG_STAMP)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	flock /tmp/contextledger-install.lock sh -c '$(BIN)/python -m pip install -q --upgrade pip && \
	  $(BIN)/python -m pip install -q -e ".[dev]" --config-settings editable_mode=strict'
	touch $@

demo: $(BIN)/.installed
	rm -f demo.db demo.db-wal demo.db-shm
	$(BIN)/contextledger demo --db sqlite:///demo.db

lint: $(BIN)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(BIN)/.installed
	$(BIN)/mypy -p contextledger

layers: $(BIN)/.installed
	$(BIN)/lint-imports

unit: $(BIN)/.installed chromium
	$(BIN)/pytest -q -n 2

# The inspector's browser tests drive Debian's chromium (never a downloaded build): installed when missing
# and root (CI on a fresh machine); otherwise they are skipped, except with CI=true where they fail.
chromium:
	@if command -v chromium >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium; \
	else echo "chromium is missing (not root, or no apt-get): the browser tests will be skipped"; fi

test: lint typecheck layers unit

# make bench: fast mode; make bench BENCH_ARGS=--full for the full sizes (the bench extra adds langchain-core).
bench: $(BIN)/.installed
	$(BIN)/python -c "import langchain_core" 2>/dev/null || flock /tmp/contextledger-install.lock \
	  $(BIN)/python -m pip install -q -e ".[dev,bench]" --config-settings editable_mode=strict
	$(BIN)/pytest -q -p no:xdist bench/test_replay.py
	$(BIN)/python bench/run_all.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info .mypy_cache .ruff_cache .pytest_cache .hypothesis
