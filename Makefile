# One-command set-up, training and tests. `make help` lists the targets.
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.DEFAULT_GOAL := help
.PHONY: help install train test test-slow lint format clean

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

# Re-installs only when pyproject.toml changes, so a second `make install` does nothing.
$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "$(PYTHON) not found: install Python 3.11 or run make PYTHON=/path/to/python3.11"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[export,dev,tune,cluster]'
	@touch $(STAMP)

install: $(STAMP)  ## create .venv and install the package (editable, all extras)

train: install  ## train SegNet on CamVid (python train.py; pass ARGS="key=value ...")
	$(BIN)/python train.py $(ARGS)

test: install  ## run the default test suite (fast; slow tests are marked)
	$(BIN)/python -m pytest $(ARGS)

test-slow: install  ## run only the slow tests (real-data training runs)
	$(BIN)/python -m pytest -m slow $(ARGS)

lint: install  ## ruff check + ruff format --check
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: install  ## apply ruff's fixes and formatting
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

clean:  ## remove the virtual environment and caches (never outputs/ or data/)
	rm -rf $(VENV) .pytest_cache .ruff_cache
