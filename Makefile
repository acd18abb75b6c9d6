# The two commands: `make site` (the main job) and `make test`. Everything else is a step of those.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
NPM_STAMP := node_modules/.installed-stamp
TRACE  ?= traces/cpu

.PHONY: site test install vendor native trace experiments build serve browser bench clean gpu-wheels lint py312

## site: install, materialise the vendor copy, compile the recorder's hot path, trace on CPU, run the experiments, build the site into site/
site: install vendor native trace experiments build

## test: install, materialise the vendor copy, make sure Chromium is there, a Python 3.12 beside it, the recorder's hot path
## compiled for both, lint and type-check, run the test suite
## TEST_WORKERS: pytest-xdist processes (a whole test file to each; the expensive session fixtures are made once
## per run and shared, tests/once.py); 0 runs the suite in this process. 2 on 2 cores: a third was a little faster
## (589 s against 615 s) but on a fresh clone it starved a browser test's 10 s wait for the search results
TEST_WORKERS ?= 2
test: install vendor browser py312 native lint
	ANNOTATE_PY312=$(VENV312)/bin/python $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile

## lint: ruff and mypy, configured in pyproject.toml
lint: install
	$(BIN)/ruff check .
	$(BIN)/mypy

## install: the Python package (.venv) and the build-time JS tools (KaTeX, from package-lock.json)
install: $(STAMP) $(NPM_STAMP)
$(NPM_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $(NPM_STAMP)
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,native]'
	touch $(STAMP)

## native: the recorder's per-line modules compiled by mypyc for each venv (annotate/trace/record/native.py: loaded only
## while they match their sources; a no-op when they do). Optional: without a C compiler, headers or mypy it says
## which is missing and the recorder runs as Python, with the same records
native: install
	@$(BIN)/annotate native || echo "[native] not built for $(VENV): the recorder runs as Python (same records, slower)"
	@if [ -x $(VENV312)/bin/annotate ]; then $(VENV312)/bin/annotate native || \
	  echo "[native] not built for $(VENV312): the recorder runs as Python there (same records, slower)"; fi

vendor: install
	$(BIN)/annotate vendor sync

## trace: the default bf16 trace (traces/cpu) the panels show, with its tensors (35 MB, git-ignored: the
## diagrams page draws one recorded token at H = 1024 from them), a float32 one (the aliasing hazard on the
## numerics page), a tiny bf16 one with full tensors (element-wise numerics), the tiny one on 2 tensor-parallel
## ranks (gloo, 2 processes: the 张量并行 page and the rank switch) and the whole depth of the 0.6B shape
## (28 layers × FULL_DEPTH_TOKENS tokens, git-ignored like the others: the panels compare the committed 28-layer
## H200 trace, traces/cuda-full-depth, with it, on the ids both runs share); each re-runs only when stale
FULL_DEPTH_TOKENS ?= 32
trace: install vendor
	$(BIN)/annotate trace --out $(TRACE) --full-tensors --if-stale
	$(BIN)/annotate trace --dtype float32 --if-stale
	$(BIN)/annotate trace --preset tiny --if-stale
	$(BIN)/annotate trace --preset tiny --tp 2 --full-tensors --if-stale
	$(BIN)/annotate trace --layers 28 --tokens $(FULL_DEPTH_TOKENS) --out traces/cpu-full-depth --if-stale

## experiments: every experiments/*.yml on a scratch copy of nano-vllm, traced like its baseline (recorded by
## `trace` above: tiny bf16, or the float32 one) into traces/experiments/NAME; each re-runs only when stale.
## One process per experiment: the edited package is imported once per process.
experiments: install vendor trace
	for f in experiments/*.yml; do $(BIN)/annotate experiment "$$(basename "$$f" .yml)" --if-stale || exit 1; done

build: install vendor
	$(BIN)/annotate build

serve: install vendor
	$(BIN)/annotate serve

## browser: Debian's Chromium for the page tests (tools that download their own browser fail here), and the
## CJK fonts a Chinese reader has (fonts-noto-cjk): without them every Chinese character is a box of
## another width and the layout tests would measure a page no reader sees (they check a CJK font is used)
APT_GET := $$(if [ "$$(id -u)" = 0 ]; then echo apt-get; else echo sudo apt-get; fi)
browser:
	@command -v chromium >/dev/null 2>&1 || { $(APT_GET) update -q && $(APT_GET) install -y -q chromium; }
	@test -n "$$(fc-list :lang=zh 2>/dev/null)" || { $(APT_GET) update -q && $(APT_GET) install -y -q fonts-noto-cjk; }

## py312: a second venv (.venv312) on Python 3.12, where the recorder takes its line events from sys.monitoring
## (PEP 669), as on the GPU image: tests/test_monitor.py records the tiny trace there with both backends and
## compares them. pip takes torch 2.13.0 from the package index for 3.12 (a CUDA build, ~2.6 GB of downloads;
## it runs on the CPU). No Python 3.12 on this machine: it says so, and those tests skip.
VENV312 := .venv312
PY312 = $(shell scripts/find-python.sh 3.12)
py312: $(VENV312)/.installed-stamp
$(VENV312)/.installed-stamp: pyproject.toml
	@if [ -z "$(PY312)" ]; then echo "[py312] no Python 3.12 found (PATH, pyenv): the sys.monitoring tests will skip"; else \
	  { test -x $(VENV312)/bin/python || $(PY312) -m venv $(VENV312); } && \
	  $(VENV312)/bin/python -m pip install --quiet --upgrade pip && \
	  $(VENV312)/bin/python -m pip install --quiet -e '.[native]' && touch $@ || \
	  echo "[py312] could not install the project into $(VENV312) (see pip's message above): the sys.monitoring tests will skip; run make py312 again"; fi

## bench: every benchmark (bench/results/*.json, from which docs/guide/performance.md's tables are generated); the trace overhead rows
## also on Python 3.12, and again with the recorder as Python source (ANNOTATE_NATIVE=0: the *-python.json files)
bench: install vendor native
	for b in bench/bench_*.py; do $(BIN)/python $$b || exit 1; done
	ANNOTATE_NATIVE=0 $(BIN)/python bench/bench_trace.py --no-identify
	if [ -x $(VENV312)/bin/python ]; then $(VENV312)/bin/python bench/bench_trace.py --no-identify && \
	  ANNOTATE_NATIVE=0 $(VENV312)/bin/python bench/bench_trace.py --no-identify; fi

## gpu-wheels: the ten wheels scripts/gpu-check.sh carries to the GPU image (cp312; list in
## scripts/gpu-wheels.txt) into gpu-wheels/ (git-ignored). Then, with the device tool's run:
##   command `bash scripts/gpu-check.sh "$$OUT" gpu-wheels`, carry ["vendor/nano-vllm", "gpu-wheels"]
GPU_WHEELS ?= gpu-wheels
gpu-wheels: install
	PYTHON=$(BIN)/python scripts/gpu-wheels.sh $(GPU_WHEELS) 3.12

clean:
	rm -rf site .cache test-artifacts node_modules $(VENV312) annotate/trace/record/_native
