"""Every zoo model: ATen -> text -> et-opt re-parse -> Core ATen -> verified -> matches eager.

Numerics are checked with the reference runner (torch-mlir's linalg lowering
compiled by MLIR's JIT), which shares no kernels with PyTorch eager.
Tolerance: atol 1e-4 and rtol 1e-4 in float32 (observed max errors are ~1e-5
for MobileNetV2, ~2e-6 for nanoGPT).
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import assert_runner_matches_eager, export_zoo
from torch_mlir import ir

from etmlir import models
from etmlir.devtools.reference_runner import ReferenceRunner

ATOL = RTOL = 1e-4


@pytest.mark.parametrize("name", list(models.ZOO))
def test_printed_module_reparses_and_decomposes_with_et_opt(zoo, name, tmp_path):
    program = export_zoo(zoo, name)
    path = tmp_path / f"{name}.mlir"
    path.write_text(program.mlir(large_elements_limit=None))  # weights included: a full round trip
    result = subprocess.run(
        [sys.executable, "-m", "etmlir.tools.et_opt", str(path), "--et-decompose-to-core-aten",
         "--et-verify-core-aten", "--mlir-elide-elementsattrs-if-larger=16"],
        capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert "torch.aten." in result.stdout


@pytest.mark.parametrize("name", list(models.ZOO))
def test_core_aten_module_matches_eager(zoo, name):
    model, args, dynamic = zoo[name]
    program = export_zoo(zoo, name)
    program.to_core_aten()
    histogram = program.op_histogram()
    assert not any(op in histogram for op in ("torch.aten.linear", "torch.aten.conv2d", "torch.aten.batch_norm"))
    assert_runner_matches_eager(ReferenceRunner(program.module), model, args, dynamic, atol=ATOL, rtol=RTOL)


def test_keep_list_preserves_ops_for_a_backend(zoo):
    program = export_zoo(zoo, "nanogpt")
    keep = ["aten.scaled_dot_product_attention", "aten.linear.default"]
    program.to_core_aten(keep=keep)
    histogram = program.op_histogram()
    n_layer = zoo["nanogpt"][0].cfg.n_layer
    assert histogram["torch.aten.scaled_dot_product_attention"] == n_layer  # one attention per block
    assert histogram["torch.aten.linear"] == 4 * n_layer + 1  # c_attn, c_proj, c_fc, c_proj per block + lm_head
    assert histogram["torch.aten.native_layer_norm"] == 2 * n_layer + 1  # ln_1, ln_2 per block + ln_f; decomposed
    # A later et-verify-core-aten allows the kept ops only when given the same keep list.
    program.transform(f"builtin.module(et-verify-core-aten{{keep={','.join(keep)}}})")
    with pytest.raises(ir.MLIRError, match=r"\(aten.scaled_dot_product_attention.default\) is not a Core ATen op"):
        program.transform("builtin.module(et-verify-core-aten)")
