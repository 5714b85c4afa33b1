#!/usr/bin/env bash
# Binary size of et-run with every portable kernel vs et-run-selected with only
# the operators a program calls (selective build), in a Release build.
#
#   scripts/selective_build_size.sh [BUILD_DIR] [MODEL.pte ...]
#
# Defaults: BUILD_DIR /tmp/etrun-size-build; models build/demo/mlp.pte and
# build/demo/mobilenet_v2.pte (`etmlir-demo` writes them). JOBS (default 2)
# sets the build parallelism, PYTHON (default .venv/bin/python) the interpreter
# that runs scripts/selected_operators.py.
#
# For each model it reconfigures BUILD_DIR with that model's operators
# (-DETMLIR_SELECTED_OPERATORS from scripts/selected_operators.py), builds
# et-run-selected, and checks the selective build: the selected binary runs the
# model and prints the same output values as the full one, registers fewer
# kernels, and links fewer kernel functions (symbols with the kernel signature
# `(etmlir::KernelContext&, etmlir::EValue**)`). It fails if any check fails,
# then prints a Markdown table: file size unstripped and after `strip`.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
build=${1:-/tmp/etrun-size-build}
shift || true
models=("$@")
[ ${#models[@]} -gt 0 ] || models=(build/demo/mlp.pte build/demo/mobilenet_v2.pte)
python=${PYTHON:-.venv/bin/python}
jobs=${JOBS:-2}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

for model in "${models[@]}"; do
  [ -f "$model" ] || { echo "selective_build_size: $model not found (etmlir-demo writes build/demo/*.pte)" >&2; exit 1; }
done

stripped_size() { strip -o "$tmp/stripped" "$1" && stat -c %s "$tmp/stripped"; }
kernel_functions() { nm -C "$1" | grep -c '(etmlir::KernelContext&, etmlir::EValue\*\*)$' || true; }
grouped() { sed ':a;s/\B[0-9]\{3\}\>/,&/;ta' <<<"$1"; }  # 1238720 -> 1,238,720
registered() { sed -n 's/^kernels: \([0-9]*\) registered.*/\1/p' "$1"; }
outputs() { grep '^  output ' "$1"; }
run_model() {  # binary model log
  "$1" "$2" --iterations 1 --warmup 0 >"$3" 2>&1 || { cat "$3" >&2; echo "selective_build_size: $1 $2 failed" >&2; exit 1; }
}

echo "== full: cmake -S $repo -B $build -DCMAKE_BUILD_TYPE=Release; cmake --build $build --target et-run -j$jobs" >&2
cmake -S "$repo" -B "$build" -DCMAKE_BUILD_TYPE=Release -DETMLIR_SELECTED_OPERATORS= >/dev/null
cmake --build "$build" --target et-run -j"$jobs" >/dev/null
cp "$build/et-run" "$tmp/et-run"
full_size=$(stat -c %s "$tmp/et-run")
full_stripped=$(stripped_size "$tmp/et-run")
full_functions=$(kernel_functions "$tmp/et-run")

rows=()
for model in "${models[@]}"; do
  name=$(basename "$model" .pte)
  flag=$("$python" scripts/selected_operators.py "$model")
  count=$(tr ';' '\n' <<<"${flag#*=}" | wc -l)
  echo "== $name: cmake -S $repo -B $build -DCMAKE_BUILD_TYPE=Release '$flag'; cmake --build $build --target et-run-selected -j$jobs" >&2
  cmake -S "$repo" -B "$build" -DCMAKE_BUILD_TYPE=Release "$flag" >/dev/null
  cmake --build "$build" --target et-run-selected -j"$jobs" >/dev/null
  cp "$build/et-run-selected" "$tmp/et-run-$name"
  run_model "$tmp/et-run" "$model" "$tmp/full.log"
  run_model "$tmp/et-run-$name" "$model" "$tmp/selected.log"
  if [ "$(outputs "$tmp/full.log")" != "$(outputs "$tmp/selected.log")" ]; then
    diff <(outputs "$tmp/full.log") <(outputs "$tmp/selected.log") >&2 || true
    echo "selective_build_size: et-run-selected prints different outputs for $model" >&2; exit 1
  fi
  full_registered=$(registered "$tmp/full.log")
  selected_registered=$(registered "$tmp/selected.log")
  functions=$(kernel_functions "$tmp/et-run-$name")
  if [ "$selected_registered" -ge "$full_registered" ] || [ "$functions" -ge "$full_functions" ]; then
    echo "selective_build_size: $name: the selective build registers $selected_registered kernels" \
         "($full_registered in full) and links $functions kernel functions ($full_functions in full)" >&2
    exit 1
  fi
  size=$(stat -c %s "$tmp/et-run-$name")
  stripped=$(stripped_size "$tmp/et-run-$name")
  share=$(awk -v a="$stripped" -v b="$full_stripped" 'BEGIN { printf "%.0f%%", 100 * a / b }')
  rows+=("| et-run-selected ($name: $count operators) | $selected_registered | $functions | $(grouped "$size") | $(grouped "$stripped") | $share |")
done

echo "| binary | kernels registered | kernel functions linked | bytes | bytes stripped | stripped vs et-run |"
echo "|---|---:|---:|---:|---:|---:|"
echo "| et-run (all portable kernels) | $full_registered | $full_functions | $(grouped "$full_size") | $(grouped "$full_stripped") | 100% |"
printf '%s\n' "${rows[@]}"
