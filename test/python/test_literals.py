"""etmlir.frontend.literals: tensor values as numpy arrays and MLIR attributes, bit for bit.

bfloat16 has no numpy dtype: its array is a tagged int16 view of its bits, its
attribute takes the bf16 element type from the tensor, and the serializer
writes dense bf16 constants (splats and lists) with the same bits.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch_mlir import ir

from etmlir.executable.serialize import _dense_bytes
from etmlir.frontend.literals import literal_array, literal_attribute, splat_attribute, tensor_of_array

# Values whose bits matter: signed zero, NaN, infinities, a subnormal, the largest finite, an inexact 0.1.
SPECIAL = [1.5, -2.0, float("nan"), float("inf"), -float("inf"), 1e-40, 3.3895e38, -0.0, 0.1, 123456.0]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32, torch.int64, torch.int32,
                                   torch.bool, torch.uint8], ids=str)
def test_literal_array_round_trips_bits(dtype):
    tensor = torch.tensor(SPECIAL[:2] * 3).reshape(2, 3).to(dtype)
    array = literal_array(tensor)
    assert array.flags.c_contiguous and array.nbytes == tensor.numel() * tensor.element_size()
    back = tensor_of_array(array)
    assert back.dtype == dtype and torch.equal(back.view(torch.uint8), tensor.view(torch.uint8))


def test_bfloat16_array_is_a_tagged_int16_view_that_survives_copies():
    tensor = torch.tensor(SPECIAL, dtype=torch.bfloat16)
    array = literal_array(tensor)
    assert array.dtype == np.int16 and array.dtype.metadata == {"etmlir.dtype": "bfloat16"}
    assert np.array_equal(array, tensor.view(torch.int16).numpy())
    for copy in (np.array(array, copy=True), array[2:], np.ascontiguousarray(array)):
        assert tensor_of_array(copy).dtype == torch.bfloat16
    assert torch.equal(tensor_of_array(array[2:]).view(torch.int16), tensor[2:].view(torch.int16))


def test_non_contiguous_and_quantized_tensors():
    tensor = torch.arange(12, dtype=torch.float32).reshape(3, 4).to(torch.bfloat16).t()
    assert torch.equal(tensor_of_array(literal_array(tensor)), tensor.contiguous())
    quantized = torch.quantize_per_tensor(torch.ones(3), 0.1, 0, torch.qint8)
    assert literal_array(quantized) is None  # left to the importer, which names the dtype


def test_bfloat16_attributes_carry_bf16_and_serialize_to_the_same_bits():
    tensor = torch.tensor(SPECIAL, dtype=torch.bfloat16).reshape(2, 5)
    bits = tensor.view(torch.int16).numpy().tobytes()
    with ir.Context(), ir.Location.unknown():
        array = literal_array(tensor)
        resource = literal_attribute(tensor, array, "w")
        assert str(resource.type) == "tensor<2x5xbf16>" and str(resource).startswith("dense_resource<w>")
        # Dense (non-resource) bf16 elements, as a constant fold or a delegate copy may hold them:
        dense = ir.DenseElementsAttr.get(array, type=ir.RankedTensorType.get([2, 5], ir.BF16Type.get()))
        assert _dense_bytes(dense, ir.RankedTensorType(dense.type)) == bits
        large = torch.randn(3000, generator=torch.Generator().manual_seed(0)).to(torch.bfloat16)
        dense = ir.DenseElementsAttr.get(literal_array(large), type=ir.RankedTensorType.get([3000], ir.BF16Type.get()))
        assert _dense_bytes(dense, ir.RankedTensorType(dense.type)) == large.view(torch.int16).numpy().tobytes()
        # Splats: a one-element tensor, and a splat broadcast to a shape.
        one = torch.tensor(0.1, dtype=torch.bfloat16)
        splat = splat_attribute(one)
        assert str(splat) == "dense<1.000980e-01> : tensor<bf16>"
        assert _dense_bytes(splat, ir.RankedTensorType(splat.type)) == one.view(torch.int16).numpy().tobytes()
        t = ir.RankedTensorType.get([3], ir.BF16Type.get())
        broadcast = ir.DenseElementsAttr.get_splat(t, ir.FloatAttr.get(ir.BF16Type.get(), -0.0))
        minus_zero = torch.full((3,), -0.0, dtype=torch.bfloat16)
        assert _dense_bytes(broadcast, t) == minus_zero.view(torch.int16).numpy().tobytes()
