# One entry point for setup, the main job and the tests, on a fresh machine.
#   make demo   set up everything, then export every zoo model and print each IR level with op counts
#   make test   set up everything, then run the whole test suite (generated-file check, lit, pytest)
#   make generate   regenerate dialects/edge/* from PyTorch's schemas
# The virtual environment lives in .venv (override with VENV=...).

VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.etmlir-setup
# CI and this machine have two cores: keep thread counts explicit.
export OMP_NUM_THREADS ?= 1

.PHONY: setup demo test lit pytest check-generated generate clean

setup: $(STAMP)

$(STAMP): pyproject.toml CMakeLists.txt scripts/setup.sh
	bash scripts/setup.sh $(VENV)
	touch $(STAMP)

demo: setup
	$(VENV)/bin/etmlir-demo

test: setup
	$(MAKE) --no-print-directory check-generated lit pytest

# Generated files (the edge dialect) must match what their generator makes from the pinned PyTorch.
check-generated:
	$(PY) scripts/gen_edge_dialect.py --check

generate:
	$(PY) scripts/gen_edge_dialect.py

lit:
	PATH=$(abspath $(VENV))/bin:$$PATH $(VENV)/bin/lit -sv test

pytest:
	$(PY) -m pytest -q test/python

clean:
	rm -rf build $(VENV)
