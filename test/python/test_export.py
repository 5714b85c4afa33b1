"""etmlir.export: ATen-level import, source locations, weights, parameter names, dynamic dims."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from conftest import export_zoo
from torch_mlir import ir

from etmlir import models
from etmlir.dialects import attrs
from etmlir.frontend.locations import file_locations

ZOO = list(models.ZOO)


def _all_ops(program):
    ops = []
    program.module.operation.walk(lambda op: (ops.append(op), ir.WalkResult.ADVANCE)[1])
    return ops


@pytest.mark.parametrize("name", ZOO)
def test_every_op_and_argument_has_a_location_in_the_model_file(zoo, name):
    program = export_zoo(zoo, name)
    model_file = inspect.getsourcefile(type(zoo[name][0]))
    ops = _all_ops(program)
    assert ops
    for op in ops:
        files = [f for f, _, _ in file_locations(op.location)]
        assert model_file in files, f"{op.name} has location {op.location}"
    main = next(op for op in ops if op.name == "func.func")
    for argument in main.regions[0].blocks[0].arguments:
        assert model_file in [f for f, _, _ in file_locations(argument.location)]


def test_parameter_names_are_fully_qualified_and_on_the_literals(zoo):
    program = export_zoo(zoo, "mobilenet_v2")
    model = zoo["mobilenet_v2"][0]
    assert set(program.param_names) == set(model.state_dict()) - {
        k for k in model.state_dict() if k.endswith("num_batches_tracked")}
    tagged = {ir.StringAttr(op.attributes[attrs.PARAM]).value
              for op in _all_ops(program) if op.name == "torch.vtensor.literal" and attrs.PARAM in op.attributes}
    assert "features.0.0.weight" in tagged and "classifier.1.bias" in tagged


def test_weights_are_imported_without_copies(zoo):
    program = export_zoo(zoo, "mlp")
    state = zoo["mlp"][0].state_dict()
    for name, buffer in program.weight_buffers.items():
        assert np.shares_memory(buffer, state[name].numpy()), name
        np.testing.assert_array_equal(program.weights()[name].numpy(), state[name].numpy())


def test_printed_module_elides_weight_blobs_unless_asked(zoo):
    program = export_zoo(zoo, "mlp")
    weight_bytes = sum(buffer.nbytes for buffer in program.weight_buffers.values())  # 2.1 MB
    elided = program.mlir()
    assert "dense_resource<layers.0.weight>" in elided
    assert "layers.0.weight: \"0x" not in elided and len(elided) < 20_000
    full = program.mlir(large_elements_limit=None)  # what et-opt re-parses: every byte, as hex
    assert "layers.0.weight: \"0x" in full and len(full) > 2 * weight_bytes


def test_dynamic_sequence_dim_stays_dynamic_with_bounds(zoo):
    program = export_zoo(zoo, "nanogpt")
    (dim,) = program.dynamic_dims
    assert (dim.input_index, dim.dim, dim.min, dim.max) == (0, 1, 2, 256)
    text = program.mlir(debug_info=False)
    assert "!torch.vtensor<[1,?],si64>" in text
    assert 'etmlir.dynamic_dims = {"1" = {max = 256 : i64, min = 2 : i64' in text


def test_export_rejects_non_modules():
    import etmlir

    with pytest.raises(TypeError, match="expects a torch.nn.Module"):
        etmlir.export(lambda x: x, ())
