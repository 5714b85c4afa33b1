# One entry point for setup, the main job and the tests, on a fresh machine.
#   make demo   set up everything, then export every zoo model and print each IR level with op counts
#   make test   set up everything, then run the whole test suite (generated-file check, lit, pytest)
#   make bench-memory   planned memory per zoo model, ours vs ExecuTorch 1.5.1 (own environment)
#   make generate   regenerate dialects/edge/* from PyTorch's schemas and python/etmlir/schema from program.fbs
# The virtual environment lives in .venv (override with VENV=...).

VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.etmlir-setup
# CI and this machine have two cores: keep thread counts explicit.
export OMP_NUM_THREADS ?= 1

.PHONY: setup demo test lit pytest check-generated generate bench-memory clean

setup: $(STAMP)

$(STAMP): pyproject.toml CMakeLists.txt scripts/setup.sh $(wildcard tools/*.cpp runtime/schema/program.fbs)
	bash scripts/setup.sh $(VENV)
	touch $(STAMP)

demo: setup
	$(VENV)/bin/etmlir-demo

test: setup
	$(MAKE) --no-print-directory check-generated lit pytest

# Generated files must match what their generators make: the edge dialect
# (from the pinned PyTorch) and the schema's Python code (from flatc 2.0.8).
check-generated:
	$(PY) scripts/gen_edge_dialect.py --check
	bash scripts/gen_schema.sh --check

generate:
	$(PY) scripts/gen_edge_dialect.py
	bash scripts/gen_schema.sh

lit:
	PATH=$(abspath $(VENV))/bin:$$PATH $(VENV)/bin/lit -sv test

pytest:
	$(PY) -m pytest -q test/python

# Planned arena bytes, ours vs ExecuTorch 1.5.1, per zoo model (separate environment: the bench extra).
BENCH_VENV ?= .venv-bench
bench-memory:
	bash scripts/setup_bench.sh $(BENCH_VENV)
	$(BENCH_VENV)/bin/python bench/memory_plan.py

clean:
	rm -rf build $(VENV) $(BENCH_VENV)
