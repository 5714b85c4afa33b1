"""The Edge level: generated dialect coverage, to_edge on every zoo model, numerics, bounds, API.

Numerics: each edge module is rebuilt as torch IR from the generated op table
(`devtools.edge_to_torch`) and run by the reference runner (torch-mlir's
linalg lowering + MLIR JIT), which shares no kernels with PyTorch eager.
Tolerance: atol 1e-4 and rtol 1e-4 in float32 (observed: ~1e-5 MobileNetV2,
~2e-6 nanoGPT, ~2e-7 MLP and seed CNN).
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch
from conftest import export_zoo
from torch_mlir import ir

import etmlir
import etmlir.dialects.edge
from etmlir import models
from etmlir.devtools.edge_to_torch import edge_to_torch
from etmlir.devtools.reference_runner import ReferenceRunner
from etmlir.dialects.edge import DYNAMIC, edge_ops, edge_ops_by_aten
from etmlir.frontend.aten_ops import lookup_overload
from etmlir.frontend.core_aten import core_aten_overloads

ATOL = RTOL = 1e-4


@pytest.fixture(scope="module")
def edge_zoo(zoo):
    return {name: etmlir.to_edge(export_zoo(zoo, name)) for name in models.ZOO}


def test_every_core_op_has_an_edge_op():
    missing = []
    for name in core_aten_overloads():
        schema = lookup_overload(name)._schema
        if any(a.alias_info is not None and a.alias_info.is_write for a in schema.arguments):
            continue  # out variants (atan2.out): their functional overload stands for them
        if name not in edge_ops_by_aten():
            missing.append(name)
    assert missing == []
    assert edge_ops_by_aten()["aten.view.default"].mnemonic == "view_copy"
    assert edge_ops()["add_tensor"].aten == "aten::add.Tensor"
    assert edge_ops()["add_tensor"].overload_name == "aten.add.Tensor"


@pytest.mark.parametrize("name", list(models.ZOO))
def test_edge_module_roundtrips_through_et_opt_and_verifies(edge_zoo, name, tmp_path):
    edge = edge_zoo[name]
    assert all(op.startswith("edge.") for op in edge.op_histogram())
    path = tmp_path / f"{name}.edge.mlir"
    path.write_text(edge.mlir(large_elements_limit=None))
    result = subprocess.run([sys.executable, "-m", "etmlir.tools.et_opt", str(path), "--et-edge-verify"],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    reparsed_ops = result.stdout.count('"edge.')
    assert reparsed_ops == edge.mlir(large_elements_limit=None).count('"edge.')


@pytest.mark.parametrize("name", list(models.ZOO))
def test_edge_module_matches_eager(zoo, edge_zoo, name):
    model, args, dynamic = zoo[name]
    runner = ReferenceRunner(edge_to_torch(edge_zoo[name].module))
    samples = [args]
    if dynamic is not None:  # nanoGPT: one edge module, several sequence lengths
        samples += [(torch.randint(0, 65, (1, t)),) for t in (2, 17)]
    for sample in samples:
        with torch.no_grad():
            expected = model(*sample).numpy()
        actual = runner(*[a.numpy() for a in sample])
        assert actual.shape == expected.shape
        np.testing.assert_allclose(actual, expected, atol=ATOL, rtol=RTOL)


def test_dynamic_dims_keep_upper_bounds(edge_zoo):
    edge = edge_zoo["nanogpt"]
    assert edge.inputs[0].sizes == (1, None) and edge.inputs[0].upper_bounds == (1, 256)
    assert edge.outputs[0].sizes == (1, None, 65) and edge.outputs[0].upper_bounds == (1, 256, 65)
    unbounded = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        dynamic = any("?" in str(r.type) for r in op.results) and op.name.startswith("edge.")
        if dynamic:
            if "etmlir.upper_bounds" not in op.attributes:
                unbounded.append(op.name)
            else:
                bounds = [list(ir.DenseI64ArrayAttr(a)) for a in ir.ArrayAttr(op.attributes["etmlir.upper_bounds"])]
                if any(DYNAMIC in b for b in bounds):
                    unbounded.append(op.name)
        return ir.WalkResult.ADVANCE

    edge.module.operation.walk(visit)
    assert unbounded == []


def test_to_edge_leaves_the_aten_program_unchanged_and_shares_weights(zoo):
    aten = export_zoo(zoo, "mlp")
    before = aten.mlir()
    edge = etmlir.to_edge(aten)
    assert aten.mlir() == before
    assert edge.weight_buffers is aten.weight_buffers
    text = edge.mlir(large_elements_limit=None)
    assert 'etmlir.param = "layers.0.weight", value = dense_resource<' in text


def test_transform_runs_python_callables_and_registered_passes(zoo):
    edge = etmlir.to_edge(export_zoo(zoo, "seed_cnn"), etmlir.EdgeCompileConfig(canonicalize=False))
    seen = []

    def count_relus(module: ir.Operation) -> None:
        module.walk(lambda op: (seen.append(op.name) if op.name == "edge.relu" else None) or ir.WalkResult.ADVANCE)

    edge.transform([count_relus, "et-edge-canonicalize", "et-edge-verify"])
    assert seen == ["edge.relu"]
    assert edge.op_histogram()["edge.convolution"] == 1


def test_generator_reports_the_op_count():
    header = (etmlir.dialects.edge.dialects_dir() / "edge" / "edge.irdl.mlir").read_text().splitlines()[:2]
    assert header[0].startswith("// GENERATED by scripts/gen_edge_dialect.py")
    assert f"{len(edge_ops()) + 2} edge ops" in header[1]
