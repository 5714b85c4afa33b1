#!/usr/bin/env bash
# pytest and the C++ tests side by side (make test): they are independent and each mostly keeps one
# core busy. pytest prints live; the C++ tests (one build job) write build/cpp-test.log, printed when
# both are done. Fails if either fails.
# Usage: scripts/pytest_and_cpp_test.sh [VENV_DIR]   (default .venv)
set -uo pipefail
cd "$(dirname "$0")/.."
venv=${1:-.venv}
mkdir -p build
log=build/cpp-test.log
echo "[test] C++ tests (scripts/cpp_test.sh, 1 job) running beside pytest; their output: $log"
JOBS=1 bash scripts/cpp_test.sh "$venv" > "$log" 2>&1 &
cpp=$!
"$venv/bin/python" -m pytest -q test/python
pytest_rc=$?
echo "[test] pytest exit $pytest_rc; waiting for the C++ tests"
wait "$cpp"
cpp_rc=$?
cat "$log"
echo "[test] pytest exit $pytest_rc, C++ tests exit $cpp_rc"
[ "$pytest_rc" -eq 0 ] && [ "$cpp_rc" -eq 0 ]
