#!/usr/bin/env bash
# The runtime's C++ tests (test/cpp, GoogleTest), twice:
#   build/cpp-test   Release build of the runtime, kernels and tests
#   build/cpp-asan   the same with ASan + UBSan over everything (ETMLIR_SANITIZE=ON)
# The .pte fixtures (and PyTorch eager reference outputs) are written by
# test/cpp/make_fixtures.py into build/cpp-fixtures, again only when a source
# they depend on changed.
#
# Usage: scripts/cpp_test.sh [VENV_DIR]     (default .venv)
#   JOBS=2               parallel compile and test jobs
#   CPP_TEST_BUILD=build where the three directories go
# Passed on to the tests: ETMLIR_FUZZ_ITERATIONS (default 3000 per fixture), ETMLIR_FUZZ_SEED.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${1:-.venv}
jobs=${JOBS:-2}
root=${CPP_TEST_BUILD:-build}
fixtures=$root/cpp-fixtures
begin=$(date +%s)

step() { printf '[cpp-test] %s (%ds)\n' "$*" $(($(date +%s) - begin)); }

# --- Fixtures --------------------------------------------------------------------
stamp=$fixtures/.stamp
if [ -f "$stamp" ] && [ -z "$(find test/cpp/make_fixtures.py python/etmlir runtime/schema \
                                   -newer "$stamp" \( -name '*.py' -o -name '*.fbs' \) -print -quit)" ]; then
  step "fixtures in $fixtures are up to date"
else
  step "writing fixtures into $fixtures"
  rm -f "$stamp"
  OMP_NUM_THREADS=1 "$venv/bin/python" test/cpp/make_fixtures.py "$fixtures"
  touch "$stamp"
fi
export ETMLIR_TEST_PTE_DIR=$(cd "$fixtures" && pwd)

# --- Builds and runs ---------------------------------------------------------------
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# Leaks inside third-party Vulkan drivers (lavapipe) are not ours: test/cpp/lsan_suppressions.txt.
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/test/cpp/lsan_suppressions.txt:print_suppressions=0}

run_suite() {  # NAME BUILD_DIR CMAKE_ARGS...
  local name=$1 dir=$2
  shift 2
  step "$name: configuring $dir"
  cmake -S test/cpp -B "$dir" "$@" >"$dir.configure.log" 2>&1 || { cat "$dir.configure.log"; exit 1; }
  step "$name: building"
  cmake --build "$dir" -j "$jobs"
  step "$name: running ctest"
  ctest --test-dir "$dir" --output-on-failure --no-tests=error -j "$jobs"
  # The fuzzer's outcome counts (ctest keeps every test's output in LastTest.log).
  grep '^\[fuzz\] summary' "$dir/Testing/Temporary/LastTest.log" | sed "s/^\[fuzz\] summary/[cpp-test] $name fuzz/" || true
  step "$name: passed"
}

mkdir -p "$root"
run_suite "release" "$root/cpp-test" -DCMAKE_BUILD_TYPE=Release -DETMLIR_SANITIZE=OFF
run_suite "asan+ubsan" "$root/cpp-asan" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DETMLIR_SANITIZE=ON
step "all C++ tests passed"
