# One-command set-up, training and tests. `make help` lists the targets.
# The first Python 3.11 or newer on PATH; `make PYTHON=/path/to/python3.x` picks another.
PYTHON ?= $(shell for p in python3.11 python3.12 python3.13 python3.14 python3 python; do \
	command -v $$p >/dev/null 2>&1 && $$p -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
	2>/dev/null && echo $$p && break; done)
# Extras installed by `make install` (track: MLflow and W&B); add cluster (SLURM launcher) with EXTRAS=export,dev,tune,track,cluster
EXTRAS ?= export,dev,tune,track
VENV   := .venv
BIN    := $(VENV)/bin
comma  := ,
STAMP  := $(VENV)/.installed-$(subst $(comma),-,$(EXTRAS))

.DEFAULT_GOAL := help
.PHONY: help install train test test-slow coverage lint format docs clean

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

# Re-installs only when pyproject.toml or constraints.txt changes, so a second
# `make install` does nothing. constraints.txt pins the torch that CI tests.
$(STAMP): pyproject.toml constraints.txt
	@test -n "$(PYTHON)" || { echo "no Python 3.11 or newer on PATH: install one, or run make PYTHON=/path/to/python3.x"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[$(EXTRAS)]' -c constraints.txt
	@touch $(STAMP)

install: $(STAMP)  ## create .venv and install the package (editable) with the extras export,dev,tune,track

# With no ARGS: download CamVid into data/CamVid if it is missing, then the recipe measured
# on a GPU (experiment=camvid_gpu: bf16, about 8 minutes on one H100) on a GPU machine, or
# the 15-minute CPU recipe (experiment=camvid_quick) where no GPU is found, saying which.
# Any ARGS replace that choice.
train: install  ## train SegNet on CamVid (pass ARGS="key=value ..." for anything else)
	@if [ -n "$(ARGS)" ]; then $(BIN)/python train.py $(ARGS); \
	elif $(BIN)/python -c 'import torch, sys; sys.exit(not torch.cuda.is_available())'; then \
		echo "make train: GPU found: experiment=camvid_gpu (the full SegNet in bf16, about 8 min on one H100)."; \
		echo "The SegNet paper recipe instead: make train ARGS='data.download=true'"; \
		$(BIN)/python train.py experiment=camvid_gpu data.download=true; \
	else \
		echo "make train: no GPU: the paper recipe (full SegNet, 360x480, 100 epochs) would take"; \
		echo "days here; running experiment=camvid_quick (about 15 min on 2 cores)."; \
		echo "For the paper recipe anyway: make train ARGS='data.download=true'"; \
		$(BIN)/python train.py experiment=camvid_quick data.download=true; \
	fi

# One test process per core (pytest-xdist), each test file's tests in one process, so
# that a file's trained fixtures are made once.
test: install  ## run the default test suite (a few minutes; slow tests are marked)
	$(BIN)/python -m pytest -n auto --maxprocesses 4 --dist loadfile $(ARGS)

test-slow: install  ## run only the slow tests (real-data training, long command-line runs)
	$(BIN)/python -m pytest -m slow $(ARGS)

coverage: install  ## the default suite under coverage.py, child processes included; prints the report
	rm -rf .coverage-data && mkdir -p .coverage-data
	$(BIN)/python -m coverage run -m pytest -n auto --maxprocesses 4 --dist loadfile $(ARGS); \
	status=$$?; $(BIN)/python -m coverage combine -q && $(BIN)/python -m coverage report; \
	exit $$status

lint: install  ## ruff check + ruff format --check
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

docs: install  ## build the documentation site into site/ (strict: broken links fail)
	$(BIN)/mkdocs build --strict --quiet

format: install  ## apply ruff's fixes and formatting
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

clean:  ## remove the virtual environment and caches (never outputs/ or data/)
	rm -rf $(VENV) .pytest_cache .ruff_cache site .coverage-data build dist
