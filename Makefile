# One entry point for setup, the main job and the tests, on a fresh machine.
#   make demo   set up everything, then export every zoo model and print each IR level with op counts
#   make test   set up everything, then run the whole test suite (generated-file check, lit, pytest, C++ tests)
#   make bench-memory   planned memory per zoo model, ours vs ExecuTorch 1.5.1 (own environment)
#   make bench-latency  latency per zoo model: our runtime vs torch eager vs ExecuTorch 1.5.1 portable, 1 thread
#   make bench-cpu      latency per zoo model + a LLaMA decoder + ResNet-18: our cpu delegate vs ExecuTorch 1.5.1
#                       XNNPACK vs IREE 3.13 vs torch eager, at 1 and 2 threads (own environment for ET and IREE)
#   make bench-vulkan   latency per zoo model: our vulkan delegate on this machine's Vulkan device vs our portable
#                       runtime vs torch eager; prints the device (on lavapipe: a functional check, not a GPU number)
#   make bench-portable each portable kernel family on a representative shape vs torch eager, 1 thread
#   make op-coverage    sweep PyTorch's OpInfo samples through the runtime and rewrite docs/op_coverage.md
#   make model-coverage every real architecture through portable / nested / cpu; rewrite docs/model_coverage.md
#   make generate   regenerate the kernel registration (runtime/kernels/portable/*.yaml), dialects/edge/* from
#                   PyTorch's schemas and the kernel table, python/etmlir/schema from program.fbs and
#                   python/etmlir/payload_schema from payload.fbs
# The virtual environment lives in .venv (override with VENV=...).

VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.etmlir-setup
# CI and this machine have two cores: keep thread counts explicit.
export OMP_NUM_THREADS ?= 1

.PHONY: setup demo test lit pytest cpp-test check-generated generate bench-memory bench-latency bench-cpu \
	bench-vulkan bench-portable op-coverage model-coverage clean

setup: $(STAMP)

# Any native source change reruns the (incremental) editable install, which rebuilds the extension and tools.
# Backends: every runtime/backends/<id>/ folder (its CMakeLists.txt, sources, headers, payload C sources).
NATIVE_SOURCES := $(wildcard tools/*.cpp tools/*.h cmake/*.cmake lib/*.cpp lib/*.h include/etmlir/runtime/*.h \
	runtime/kernels/portable/*.cpp runtime/kernels/portable/*.h runtime/kernels/portable/generated/* \
	runtime/backends/CMakeLists.txt runtime/backends/*/CMakeLists.txt runtime/backends/*/*.cpp \
	runtime/backends/*/*.h runtime/backends/*/*/*.c runtime/backends/*/*/*.cpp runtime/backends/*/*/*.h runtime/backends/*/*/*.map \
	runtime/python/*.cpp runtime/schema/*.fbs)
$(STAMP): pyproject.toml CMakeLists.txt scripts/setup.sh $(NATIVE_SOURCES)
	bash scripts/setup.sh $(VENV)
	touch $(STAMP)

demo: setup
	$(VENV)/bin/etmlir-demo

# pytest and the C++ tests are independent and each mostly uses one core: they run side by side
# (the C++ build with one job, its output printed when both are done); either failing fails the target.
test: setup
	$(MAKE) --no-print-directory check-generated lit
	bash scripts/pytest_and_cpp_test.sh $(VENV)

# Generated files must match what their generators make: the kernel registration
# (from the kernel table), the edge dialect (from the pinned PyTorch and the kernel
# table) and the schemas' Python code (from flatc 2.0.8). docs/op_coverage.md is
# checked by test/python/test_opinfo.py, which runs the sweep it is made from.
check-generated:
	$(PY) scripts/gen_kernels.py --check
	$(PY) scripts/gen_edge_dialect.py --check
	bash scripts/gen_schema.sh --check

generate:
	$(PY) scripts/gen_kernels.py
	$(PY) scripts/gen_edge_dialect.py
	bash scripts/gen_schema.sh

lit:
	PATH=$(abspath $(VENV))/bin:$$PATH $(VENV)/bin/lit -sv test

pytest:
	$(PY) -m pytest -q test/python

# GoogleTest suites of the runtime core, plus the loader fuzz test under ASan+UBSan (test/cpp).
cpp-test: setup
	bash scripts/cpp_test.sh $(VENV)

# Planned arena bytes, ours vs ExecuTorch 1.5.1, per zoo model (separate environment: the bench extra).
BENCH_VENV ?= .venv-bench
bench-memory:
	bash scripts/setup_bench.sh $(BENCH_VENV)
	$(BENCH_VENV)/bin/python bench/memory_plan.py

# Latency per zoo model: our runtime vs torch eager vs ExecuTorch 1.5.1 portable kernels, 1 thread.
bench-latency: setup
	bash scripts/setup_bench.sh $(BENCH_VENV)
	$(PY) bench/runtime_latency.py --executorch-python $(BENCH_VENV)/bin/python

# Latency per zoo model, a LLaMA-style decoder and a ResNet-18: our "cpu" delegate vs ExecuTorch 1.5.1 with
# XNNPACK vs IREE 3.13 (llvm-cpu) vs torch eager, at 1 and 2 threads side by side, with ratios, goals and the
# 2-thread speedups, plus compile times and what each side delegated.
bench-cpu: setup
	bash scripts/setup_bench.sh $(BENCH_VENV)
	$(PY) bench/cpu_backend.py --executorch-python $(BENCH_VENV)/bin/python --threads 1 2

# Latency per zoo model: our "vulkan" delegate on the Vulkan device (lavapipe, on the CPU, here and in CI: a
# functional check, not a GPU number) vs our portable runtime vs torch eager; exits 1 without a Vulkan device.
bench-vulkan: setup
	$(PY) bench/vulkan_backend.py

# Each portable kernel family vs torch eager, 1 thread: per-op and geomean ratios.
bench-portable: setup
	$(PY) bench/portable_ops.py

# Real architectures (transformers, torch.nn) through each path; rewrites docs/model_coverage.md.
model-coverage: setup
	$(PY) scripts/model_coverage.py

# PyTorch's OpInfo samples through export -> edge -> .pte -> runtime; rewrites docs/op_coverage.md.
op-coverage: setup
	$(PY) scripts/op_coverage.py

clean:
	rm -rf build $(VENV) $(BENCH_VENV)
