"""et-fold-constants in `to_executorch`: weight transposes are computed at compile time, the folded
weights are stored byte for byte, and every zoo model still matches eager on the runtime.

Tolerances as in test_runtime.py (float32, portable kernels vs eager): MLP atol 1e-5 / rtol 1e-4,
MobileNetV2 atol 2e-3 / rtol 1e-3, nanoGPT atol 1e-3 / rtol 1e-3.
"""

from __future__ import annotations

import collections
import subprocess
import sys

import numpy as np
import pytest
import torch
from torch_mlir import ir

from etmlir.dialects import attrs
import etmlir
import etmlir.runtime as rt
from etmlir.dialects import new_context
from etmlir.executable import pte
from etmlir.passes.fold_constants import DEFAULT_MAX_BYTES, fold
from etmlir.passes.pipeline import run_pipeline
from etmlir.program import clone_module
from etmlir.schema.Value import Value

TOLERANCES = {"mlp": (1e-5, 1e-4), "mobilenet_v2": (2e-3, 1e-3), "nanogpt": (1e-3, 1e-3)}
NO_FOLD = etmlir.ExecutorchConfig(fold_constants=False)


def _eager(model, args) -> np.ndarray:
    with torch.no_grad():
        return model(*args).numpy()


def _folded(model: torch.nn.Module, max_bytes: int = DEFAULT_MAX_BYTES) -> int:
    """What folds in a zoo model: the weight transpose of each nn.Linear whose weight is at most max_bytes."""
    return sum(isinstance(m, torch.nn.Linear) and m.weight.numel() * m.weight.element_size() <= max_bytes
               for m in model.modules())


@pytest.mark.parametrize("name", list(etmlir.models.ZOO))
def test_zoo_folds_its_weight_transposes(zoo, edge_zoo, name):
    module = clone_module(edge_zoo[name].module)
    folded = _folded(zoo[name][0])
    assert collections.Counter(fold(module.operation)) == ({"edge.permute_copy": folded} if folded else {})


@pytest.mark.parametrize("name", list(TOLERANCES))
def test_folded_program_has_fewer_permutes_and_matches_eager(zoo, edge_zoo, pte_zoo, name):
    model, args, _ = zoo[name]
    folded, unfolded = pte_zoo[name].kernel_histogram(), edge_zoo[name].to_executorch(NO_FOLD).kernel_histogram()
    removed = _folded(model)
    assert unfolded["aten::permute_copy.out"] - folded.get("aten::permute_copy.out", 0) == removed
    assert {k: v for k, v in folded.items() if k != "aten::permute_copy.out"} == \
        {k: v for k, v in unfolded.items() if k != "aten::permute_copy.out"}
    (actual,) = rt.load(pte_zoo[name].buffer).method()(*args)
    atol, rtol = TOLERANCES[name]
    np.testing.assert_allclose(actual.numpy(), _eager(model, args), atol=atol, rtol=rtol)


def test_mlp_runs_without_permute_calls_and_fold_constants_false_keeps_them(zoo, edge_zoo, pte_zoo):
    model, args, _ = zoo["mlp"]
    linears, relus = (sum(isinstance(m, kind) for m in model.modules()) for kind in (torch.nn.Linear, torch.nn.ReLU))
    assert pte_zoo["mlp"].kernel_histogram() == {"aten::addmm.out": linears, "aten::relu.out": relus}
    unfolded = edge_zoo["mlp"].to_executorch(NO_FOLD)
    assert unfolded.kernel_histogram()["aten::permute_copy.out"] == linears  # one weight transpose per linear
    (actual,) = rt.load(unfolded.buffer).method()(*args)
    np.testing.assert_allclose(actual.numpy(), _eager(model, args), atol=1e-5, rtol=1e-4)


def test_folded_weights_are_stored_byte_for_byte(zoo, pte_zoo):
    model, _, _ = zoo["mlp"]
    f = pte.read(pte_zoo["mlp"].buffer)
    constants = f.segment(f.program.constantSegment)
    stored = {bytes(constants[t.constant.offset:t.constant.offset + t.constant.size])
              for t in (v.value for v in f.program.methods[0].values if v.valueType == Value.Tensor)
              if t.constant is not None}
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    assert linears  # the loop below checks every one
    for layer in linears:
        weight = layer.weight.detach()
        assert weight.T.contiguous().numpy().tobytes() in stored
        assert weight.numpy().tobytes() not in stored  # only the transpose is needed


def test_small_max_bytes_keeps_large_folds_at_run_time(zoo, edge_zoo):
    et = edge_zoo["mlp"].to_executorch(etmlir.ExecutorchConfig(fold_max_bytes=1 << 16))
    # fc3's 10x256 weight (10,240 bytes) folds; the two larger ones (over 64 KiB) do not.
    model = zoo["mlp"][0]
    assert 0 < _folded(model, 1 << 16) < _folded(model)
    assert et.kernel_histogram()["aten::permute_copy.out"] == _folded(model) - _folded(model, 1 << 16)


def test_to_executorch_with_folding_leaves_the_edge_program_unchanged(edge_zoo):
    edge = edge_zoo["nanogpt"]
    before = edge.mlir(debug_info=False)
    edge.to_executorch()
    assert edge.mlir(debug_info=False) == before


def test_et_opt_folds_and_emits_a_pte_that_runs(zoo, edge_zoo, tmp_path):
    """The IR alone carries a folded constant's data: et-emit gets no weight buffers."""
    model, args, _ = zoo["mlp"]
    source = tmp_path / "mlp.edge.mlir"
    source.write_text(edge_zoo["mlp"].mlir(large_elements_limit=None))
    out = tmp_path / "mlp.pte"
    result = subprocess.run([sys.executable, "-m", "etmlir.tools.et_opt", str(source), "--et-fold-constants",
                             "--et-to-out-variants", "--et-plan-memory", f"--et-emit={out}", "-o", "/dev/null"],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    operators = {o.name.decode() for o in pte.read(out.read_bytes()).program.methods[0].operators}
    assert operators == {"aten::addmm", "aten::relu"}
    (actual,) = rt.load(out).method()(*args)
    np.testing.assert_allclose(actual.numpy(), _eager(model, args), atol=1e-5, rtol=1e-4)


def test_folding_keeps_a_constant_another_op_uses():
    text = """
    func.func @main(%x: tensor<2x3xf32>) -> (tensor<2x2xf32>, tensor<2x3xf32>) {
      %one = "edge.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
      %w = "edge.constant"() {etmlir.param = "w", value = dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>} : () -> tensor<2x3xf32>
      %t = "edge.permute_copy"(%w) {dims = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
      %0 = "edge.mm"(%x, %t) : (tensor<2x3xf32>, tensor<3x2xf32>) -> tensor<2x2xf32>
      %1 = "edge.add_tensor"(%x, %w, %one) : (tensor<2x3xf32>, tensor<2x3xf32>, tensor<i64>) -> tensor<2x3xf32>
      return %0, %1 : tensor<2x2xf32>, tensor<2x3xf32>
    }"""
    with new_context(), ir.Location.unknown():
        module = ir.Module.parse(text)
        assert fold(module.operation) == ["edge.permute_copy"]
        constants = [op for op in module.body.operations[0].regions[0].blocks[0].operations
                     if op.operation.name == "edge.constant" and attrs.PARAM in op.operation.attributes]
        assert sorted(ir.StringAttr(op.attributes[attrs.PARAM]).value for op in constants) == \
            ["w", "w.permute_copy"]
        run_pipeline(module, "et-to-out-variants,et-plan-memory")
        data = etmlir.serialize(module)
    x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    w = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    mm, add = rt.load(data).method()(x)
    torch.testing.assert_close(mm, x @ w.T)
    torch.testing.assert_close(add, x + w)
