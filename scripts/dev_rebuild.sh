#!/usr/bin/env bash
# Rebuild the native parts (runtime, kernels, Python extension) into .venv
# after a C++ change: an incremental `pip install -e .` under a lock, so
# several shells can call it at once.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${VENV:-.venv}
exec flock /tmp/etmlir-dev-rebuild.lock \
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-build-isolation --no-deps -e .
