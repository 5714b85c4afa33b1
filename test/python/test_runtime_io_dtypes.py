"""Tensor dtypes through the Python runtime API (kernels.call and Method calls).

numpy has no bfloat16: bfloat16 tensors go in as torch tensors (read through
DLPack) and come out as torch tensors, whatever the other inputs were; a
bfloat16 result is never handed back as a mislabelled uint16 array. float16
goes through numpy. Results are compared exactly with PyTorch eager (the
kernels compute half types in float and round once, as PyTorch's CPU
kernels do).
"""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch

import etmlir
import etmlir.runtime as rt
from etmlir.runtime import kernels
from etmlir.runtime.kernels import Out

_gen = torch.Generator().manual_seed(0)


def randn(*shape, dtype=torch.float32):
    return torch.randn(shape, generator=_gen).to(dtype)


# ---------------------------------------------------------------------------
# kernels.call
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(3, 5), (), (0, 4)], ids=str)
def test_kernel_call_takes_and_returns_bfloat16(shape):
    a, b = randn(*shape, dtype=torch.bfloat16), randn(*shape, dtype=torch.bfloat16)
    (got,) = kernels.call("aten::add.out", a, b, 2, Out(shape, torch.bfloat16))
    assert isinstance(got, torch.Tensor) and got.dtype == torch.bfloat16
    assert torch.equal(got, torch.add(a, b, alpha=2))


def test_kernel_call_mixes_bfloat16_with_numpy_and_broadcasts():
    a, b = randn(2, 3, dtype=torch.bfloat16), randn(3).numpy()
    (got,) = kernels.call("aten::add.out", a, b, 1, Out((2, 3), torch.float32))
    assert isinstance(got, np.ndarray) and got.dtype == np.float32  # not bfloat16: numpy as before
    np.testing.assert_array_equal(got, (a + torch.from_numpy(b)).numpy())


def test_kernel_call_returns_bfloat16_out_as_torch_even_for_numpy_inputs():
    a, b = randn(4).numpy(), randn(4).numpy()
    (got,) = kernels.call("aten::mul.out", a, b, Out((4,), torch.bfloat16))
    assert isinstance(got, torch.Tensor) and got.dtype == torch.bfloat16
    assert torch.equal(got, (torch.from_numpy(a) * torch.from_numpy(b)).bfloat16())


def test_kernel_call_float16_goes_through_numpy():
    a, b = randn(3, 4, dtype=torch.float16), randn(4, dtype=torch.float16)
    (got,) = kernels.call("aten::add.out", a, b, 1, Out((3, 4), torch.float16))
    assert isinstance(got, np.ndarray) and got.dtype == np.float16
    assert torch.equal(torch.from_numpy(got), a + b)


def test_kernel_call_bfloat16_in_tensor_lists_and_non_contiguous_inputs():
    a = randn(4, 3, dtype=torch.bfloat16).t()  # non-contiguous: copied to contiguous
    b = randn(3, 4, dtype=torch.bfloat16)
    (got,) = kernels.call("aten::cat.out", [a, b], 0, Out((6, 4), torch.bfloat16))
    assert torch.equal(got, torch.cat([a, b]))


def test_bfloat16_result_without_torch_is_an_error_not_a_uint16_array(monkeypatch):
    out = Out((2,), torch.bfloat16).buffer()  # made while torch is importable
    monkeypatch.setitem(sys.modules, "torch.utils.dlpack", None)  # import torch.utils.dlpack now fails
    with pytest.raises(rt.Error, match="bfloat16 result needs torch"):
        kernels._runtime.run_kernel("aten::add.out", [("tensor", np.ones(2, np.float32)),
                                                      ("tensor", np.ones(2, np.float32)), ("int", 1),
                                                      ("out", out, False)])


# ---------------------------------------------------------------------------
# Method calls
# ---------------------------------------------------------------------------


class _Add(torch.nn.Module):
    def forward(self, x, y):
        return x + y, (x * y).float()


class _ToBF16(torch.nn.Module):
    def forward(self, x):
        return (x * 2).to(torch.bfloat16)


def _method(model, args):
    return rt.load(etmlir.to_edge(etmlir.export(model, args)).to_executorch().buffer).method("forward")


def test_method_takes_and_returns_bfloat16():
    x, y = randn(3, 4, dtype=torch.bfloat16), randn(3, 4, dtype=torch.bfloat16)
    forward = _method(_Add(), (x, y))
    assert str(forward.inputs[0]) == "bfloat16[3, 4]"
    total, product = forward(x, y)
    assert total.dtype == torch.bfloat16 and torch.equal(total, x + y)
    assert product.dtype == torch.float32 and torch.equal(product, (x * y).float())
    with pytest.raises(rt.Error, match=r"input 0 \('x'\): expected bfloat16\[3, 4\], got float32\[3, 4\]"):
        forward(x.float().numpy(), y)


def test_method_with_numpy_inputs_returns_bfloat16_as_torch():
    x = randn(5)
    forward = _method(_ToBF16(), (x,))
    (got,) = forward(x.numpy())
    assert isinstance(got, torch.Tensor) and got.dtype == torch.bfloat16
    assert torch.equal(got, (x * 2).bfloat16())


# ---------------------------------------------------------------------------
# Tensor elements as Scalar values: etmlir_prim::_local_scalar_dense (Tensor.item())
# and etmlir_prim::sym_is_contiguous
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("value, dtype, slot", [
    (2.5, torch.float32, 0.0), (-1e300, torch.float64, 0.0), (0.1, torch.float16, 0.0), (3.140625, torch.bfloat16, 0.0),
    (float("nan"), torch.float32, 0.0), (-7, torch.int64, 0), (2 ** 40, torch.int64, 0), (-3, torch.int8, 0),
    (200, torch.uint8, 0), (-30000, torch.int16, 0), (123456, torch.int32, 0), (True, torch.bool, False),
], ids=str)
def test_local_scalar_dense_reads_the_element_as_its_scalar_kind(value, dtype, slot):
    t = torch.tensor(value, dtype=dtype)
    for shaped in (t, t.reshape(1, 1)):
        (got,) = kernels.call_scalars("etmlir_prim::_local_scalar_dense", shaped, slot)
        want = t.item()
        assert type(got) is type(want) and (got == want or (got != got and want != want))


def test_local_scalar_dense_rejects_several_elements_and_a_slot_of_the_wrong_kind():
    with pytest.raises(rt.Error, match="_local_scalar_dense: self has 2 elements"):
        kernels.call_scalars("etmlir_prim::_local_scalar_dense", torch.ones(2), 0.0)
    with pytest.raises(rt.Error, match="result slot's kind is int, but a float32 element gives a double Scalar"):
        kernels.call_scalars("etmlir_prim::_local_scalar_dense", torch.ones(()), 0)


@pytest.mark.parametrize("shape, memory_format", [
    ((2, 3), torch.contiguous_format), ((2, 3, 4, 5), torch.channels_last), ((2, 1, 4, 5), torch.channels_last),
    ((2, 3, 1, 1), torch.channels_last), ((1, 1, 4, 5), torch.channels_last), ((3,), torch.channels_last),
    ((2, 3, 4, 5, 6), torch.channels_last_3d), ((2, 1, 4, 5, 6), torch.channels_last_3d),
    ((2, 3, 4), torch.preserve_format), ((0, 3, 2, 2), torch.channels_last),
], ids=str)
def test_sym_is_contiguous_matches_pytorch_for_row_major_tensors(shape, memory_format):
    from etmlir.executable.dtypes import MEMORY_FORMATS

    x = torch.zeros(shape)
    want = x.is_contiguous(memory_format=memory_format)
    code = MEMORY_FORMATS[str(memory_format)]
    assert kernels.call_scalars("etmlir_prim::sym_is_contiguous", x, code, False) == [want]
    assert kernels.call_scalars("etmlir_prim::sym_is_contiguous", x, code, 0) == [int(want)]  # an Int slot


def test_sym_is_contiguous_rejects_an_unknown_memory_format():
    with pytest.raises(rt.Error, match="sym_is_contiguous: memory_format 7 is not one of"):
        kernels.call_scalars("etmlir_prim::sym_is_contiguous", torch.zeros(2), 7, False)
    with pytest.raises(rt.Error, match="sym_is_contiguous: the result slot's kind is double; expected bool"):
        kernels.call_scalars("etmlir_prim::sym_is_contiguous", torch.zeros(2), 0, 0.0)
