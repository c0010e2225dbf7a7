# ablate — every target installs what it needs first; `make install` does nothing when up to date.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
TORCH   := torch==2.13.0
CONSTR  := $(VENV)/constraints.txt
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export HF_DATASETS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: install demo test test-slow test-gpu lint format bench study passk tune report ui worker clean

install: $(STAMP)

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# torch first, pinned (CPU build from local disk); then it constrains every later install.
	$(BIN)/python -m pip install --quiet $(TORCH)
	echo "$(TORCH)" > $(CONSTR)
	$(BIN)/python -m pip install --quiet -c $(CONSTR) -e ".[dev]"
	touch $(STAMP)

demo: install
	$(BIN)/ablate demo

test: install
	$(BIN)/python -m pytest -m "not slow and not gpu" -q

test-slow: install
	$(BIN)/python -m pytest -m "slow" -q

test-gpu: install
	$(BIN)/python -m pytest -m "gpu" -q

lint: install
	$(BIN)/ruff check ablate baselines tests studies
	$(BIN)/ruff format --check ablate baselines tests studies

format: install
	$(BIN)/ruff format ablate baselines tests studies
	$(BIN)/ruff check --fix ablate baselines tests studies

bench: install
	$(BIN)/ablate bench

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache build *.egg-info
