# Two commands a researcher needs: `make demo` and `make test`. Both set everything up themselves.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export HF_HUB_OFFLINE := 1
export HF_DATASETS_OFFLINE := 1
export TRANSFORMERS_NO_ADVISORY_WARNINGS := 1

.PHONY: demo test test-fast lint venv system-deps clean bench docs

# Re-install when the project's packages change too: an editable install maps the top-level
# packages (ptmlab, lightning_modules, hydra_plugins/*) that existed when it ran.
$(STAMP): pyproject.toml constraints.txt $(wildcard platform/*/__init__.py platform/hydra_plugins/*/__init__.py lightning_modules/__init__.py)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -c constraints.txt -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

# apt packages the test suite drives for real: a PostgreSQL server and Debian's Chromium.
system-deps:
	@bash scripts/install_system_deps.sh

demo: venv
	$(BIN)/ptmlab demo

# Lint, format and types (the rules are in pyproject.toml); `make test` runs it first, so a new
# violation fails CI.
lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# The suite runs in lanes side by side (scripts/run_tests.sh says why); PYTEST_ARGS with
# paths runs just those.
test: venv system-deps lint
	PYTHON=$(BIN)/python bash scripts/run_tests.sh $(PYTEST_ARGS)

# The edit-test loop: everything but the real-model threshold runs and the long end-to-end runs
# (markers `threshold` and `slow`; tests/README.md lists them). CI runs the whole `make test`.
test-fast: venv system-deps
	PYTHON=$(BIN)/python bash scripts/run_tests.sh -m "not threshold and not slow" $(PYTEST_ARGS)

bench: venv
	for f in bench/*.py; do $(BIN)/python $$f || exit 1; done

# The docs site (mkdocs.yml) into site/, offline; --strict turns a broken link or reference into a failure.
docs: venv
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

clean:
	rm -rf $(VENV) .ptmlab
