"""Portable copy, factory and padding kernels against PyTorch eager.

Each test calls one kernel through etmlir.runtime.kernels.call and compares
with the same ATen op run by PyTorch. These kernels move or fill elements,
so every comparison is exact (NaN positions included), except float16 arange
(PyTorch's vectorized path rounds twice) and float→float16 conversions,
which are compared exactly too because both sides round once to nearest even.
bfloat16 cannot pass through numpy, so float16 stands in for the half types.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from etmlir.runtime import kernels
from etmlir.runtime.kernels import Out

A = torch.ops.aten
ALL_DTYPES = [torch.float32, torch.float64, torch.float16, torch.int64, torch.int32, torch.int16, torch.int8,
              torch.uint8, torch.bool]
# One dtype per element size, plus bool.
WIDTHS = [torch.int8, torch.float16, torch.float32, torch.int64, torch.bool]

_gen = torch.Generator().manual_seed(0)


def rand(shape, dtype=torch.float32):
    """Random tensor: normal floats, small ints (incl. 0 and negatives; uint8 non-negative), bools."""
    shape = tuple(shape)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=_gen).to(dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=_gen).bool()
    low = 0 if dtype == torch.uint8 else -9
    return torch.randint(low, 10, shape, generator=_gen, dtype=dtype)


def out_like(t: torch.Tensor, dynamic: bool = False) -> Out:
    return Out(tuple(t.shape), t.dtype, dynamic)


def check(got: np.ndarray, want: torch.Tensor, rtol: float = 0.0) -> None:
    want_np = want.contiguous().numpy()
    assert got.shape == want_np.shape, f"shape {got.shape} != {want_np.shape}"
    assert got.dtype == want_np.dtype, f"dtype {got.dtype} != {want_np.dtype}"
    if want.dtype.is_floating_point:
        np.testing.assert_allclose(got, want_np, rtol=rtol, atol=0, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, want_np)


def call1(name: str, *args) -> np.ndarray:
    (result,) = kernels.call(name, *args)
    return result


def run_like(name: str, want: torch.Tensor, *args) -> None:
    """Calls `name` with args + an out shaped like `want` and compares."""
    check(call1(name, *args, out_like(want)), want)


def raises_naming(op: str):
    return pytest.raises(Exception, match=re.escape(op))


# ---------------------------------------------------------------------------
# Reshapes and strided views, every element size
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_view_ops_take_every_dtype(dtype):
    x = rand((2, 3, 4), dtype)
    run_like("aten::view_copy.out", x.reshape(4, 6), x, [4, -1])
    run_like("aten::permute_copy.out", x.permute(2, 0, 1), x, [2, 0, 1])
    run_like("aten::expand_copy.out", x[:, :1].expand(5, 2, 3, 4), x[:, :1].contiguous(), [5, 2, 3, 4], False)
    run_like("aten::unsqueeze_copy.out", x.unsqueeze(1), x, 1)
    run_like("aten::slice_copy.Tensor_out", x[:, 1::2], x, 1, 1, None, 2)
    run_like("aten::select_copy.int_out", x[:, :, -1], x, 2, -1)
    run_like("aten::clone.out", x, x, None)
    run_like("aten::alias_copy.out", x, x)
    run_like("aten::detach_copy.out", x, x)
    run_like("aten::transpose_copy.int_out", x.transpose(0, 2), x, 0, -1)
    run_like("aten::flip.out", x.flip(0, 2), x, [0, 2])
    run_like("aten::repeat.out", x.repeat(2, 1, 1, 3), x, [2, 1, 1, 3])
    parts = torch.split(x, [1, 3], 2)
    got = kernels.call("aten::split_with_sizes_copy.out", x, [1, 3], 2, [out_like(p) for p in parts])
    for g, w in zip(got, parts):
        check(g, w)
    run_like("aten::cat.out", torch.cat([x, x[:1]]), [x, x[:1].contiguous()], 0)


@pytest.mark.parametrize("shape,dim", [((1, 3, 1), None), ((1, 3, 1), 0), ((1, 3, 1), -1), ((2, 3), 1), ((), 0), ((), -1)])
def test_squeeze_copy(shape, dim):
    x = rand(shape)
    if dim is None:
        run_like("aten::squeeze_copy.out", x.squeeze(), x)
    else:
        run_like("aten::squeeze_copy.dim_out", x.squeeze(dim), x, dim)


def test_squeeze_copy_errors():
    with raises_naming("aten::squeeze_copy.dim_out"):
        kernels.call("aten::squeeze_copy.dim_out", rand((2, 3)), 2, Out((2, 3)))
    with raises_naming("aten::squeeze_copy.dims_out"):  # repeated dim, like PyTorch
        kernels.call("aten::squeeze_copy.dims_out", rand((1, 3)), [0, 0], Out((3,)))


@pytest.mark.parametrize("shape", [(3, 5), (7,), (), (0, 2)])
def test_t_copy(shape):
    x = rand(shape, torch.int16)
    run_like("aten::t_copy.out", x.t(), x)


def test_t_copy_rejects_rank_3():
    with raises_naming("aten::t_copy.out"):
        kernels.call("aten::t_copy.out", rand((2, 3, 4)), Out((4, 3, 2)))


@pytest.mark.parametrize("shape,d0,d1", [((2, 3, 4), 0, 1), ((2, 3, 4), -1, 0), ((5,), 0, 0), ((), 0, -1), ((17, 33), 1, 0)])
def test_transpose_copy(shape, d0, d1):
    x = rand(shape, torch.float16)
    run_like("aten::transpose_copy.int_out", x.transpose(d0, d1), x, d0, d1)


@pytest.mark.parametrize(
    "size,stride,offset",
    [([2, 2], [4, 1], None), ([3, 3], [1, 3], 0), ([2, 3], [1, 1], 5), ([4], [3], 0), ([2, 2, 2], [0, 6, 1], 1),
     ([0, 5], [100, 100], 1000), ([], [], 11), ([12], [1], 0)],
)
def test_as_strided_copy(size, stride, offset):
    x = rand((3, 4), torch.int32)
    want = torch.as_strided(x, size, stride, 0 if offset is None else offset)
    run_like("aten::as_strided_copy.out", want, x, size, stride, offset)


@pytest.mark.parametrize(
    "size,stride,offset",
    [([2, 2], [4, 1], 9),  # last element read is 13 of 12
     ([12], [1], 1),
     ([2], [-1], 1),  # negative stride
     ([2], [1], -1),  # negative offset
     ([2, 2], [1], 0),  # lengths differ
     ([-1, 2], [1, 1], 0),
     ([2, 2], [2**62, 2**62], 0)],  # the extent overflows
)
def test_as_strided_copy_never_reads_out_of_bounds(size, stride, offset):
    with raises_naming("aten::as_strided_copy.out"):
        kernels.call("aten::as_strided_copy.out", rand((3, 4)), size, stride, offset, Out((16,), dynamic=True))


@pytest.mark.parametrize(
    "shape,offset,d1,d2",
    [((4, 4), 0, 0, 1), ((3, 5), 2, 0, 1), ((3, 5), -1, 0, 1), ((3, 5), 7, 0, 1), ((3, 5), -4, 1, 0),
     ((2, 3, 4), 1, 2, 0), ((2, 3, 4), -1, -1, -2), ((0, 3), 0, 0, 1)],
)
def test_diagonal_copy(shape, offset, d1, d2):
    x = rand(shape, torch.int64)
    run_like("aten::diagonal_copy.out", torch.diagonal(x, offset, d1, d2), x, offset, d1, d2)


def test_diagonal_copy_errors():
    with raises_naming("aten::diagonal_copy.out"):  # same dim twice
        kernels.call("aten::diagonal_copy.out", rand((3, 3)), 0, 1, -1, Out((3,)))
    with raises_naming("aten::diagonal_copy.out"):  # rank 1
        kernels.call("aten::diagonal_copy.out", rand((3,)), 0, 0, 1, Out((3,)))


@pytest.mark.parametrize(
    "shape,dim,size,step",
    [((3, 8), 1, 3, 2), ((3, 8), -1, 8, 1), ((3, 8), 0, 2, 1), ((3, 8), 1, 0, 3), ((10,), 0, 4, 3), ((), 0, 1, 1),
     ((), -1, 0, 2), ((0, 3), 0, 0, 1), ((2, 5, 3), 1, 2, 7)],
)
def test_unfold_copy(shape, dim, size, step):
    x = rand(shape, torch.float16)
    run_like("aten::unfold_copy.out", x.unfold(dim, size, step), x, dim, size, step)


@pytest.mark.parametrize("dim,size,step", [(1, 9, 1), (1, -1, 1), (1, 2, 0), (2, 1, 1)])
def test_unfold_copy_errors(dim, size, step):
    with raises_naming("aten::unfold_copy.out"):
        kernels.call("aten::unfold_copy.out", rand((3, 8)), dim, size, step, Out((64,), dynamic=True))


@pytest.mark.parametrize(
    "shape,dims", [((4, 5), [0]), ((4, 5), [1]), ((4, 5), [-1, 0]), ((2, 3, 4, 5), [1, 3]), ((), [0]), ((), []),
                   ((0, 3), [1]), ((7,), [])]
)
@pytest.mark.parametrize("dtype", WIDTHS)
def test_flip(shape, dims, dtype):
    x = rand(shape, dtype)
    run_like("aten::flip.out", torch.flip(x, dims), x, dims)


def test_flip_rejects_repeated_dim():
    with raises_naming("aten::flip.out"):
        kernels.call("aten::flip.out", rand((2, 3)), [0, -2], Out((2, 3)))


@pytest.mark.parametrize(
    "shape,repeats",
    [((2, 3), [2, 2]), ((2, 3), [1, 1]), ((2, 3), [3, 1, 4]), ((3,), [1, 50]), ((2, 1, 3), [2, 3, 1]), ((), []),
     ((), [3, 2]), ((2, 3), [0, 2]), ((0, 3), [2, 2]), ((4, 1), [1, 100]), ((1, 1, 2), [1, 1, 1, 2])],
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.int8, torch.bool])
def test_repeat(shape, repeats, dtype):
    x = rand(shape, dtype)
    run_like("aten::repeat.out", x.repeat(repeats), x, repeats)


def test_repeat_errors():
    with raises_naming("aten::repeat.out"):  # fewer repeats than dims
        kernels.call("aten::repeat.out", rand((2, 3)), [2], Out((4, 3)))
    with raises_naming("aten::repeat.out"):
        kernels.call("aten::repeat.out", rand((2, 3)), [-1, 2], Out((4, 6), dynamic=True))


# ---------------------------------------------------------------------------
# Slices, splits, scatters
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("dim,start,length", [(0, 1, 2), (1, -3, 3), (1, 5, 0), (-1, 0, 5), (0, 3, 0), (0, -3, 3)])
def test_narrow_copy(dim, start, length):
    x = rand((3, 5), torch.uint8)
    run_like("aten::narrow_copy.out", torch.narrow_copy(x, dim, start, length), x, dim, start, length)


@pytest.mark.parametrize("shape,dim,start,length", [((3, 5), 0, 4, 0), ((3, 5), 0, -4, 0), ((3, 5), 0, 2, 2),
                                                    ((3, 5), 0, 0, -1), ((), 0, 0, 1)])
def test_narrow_copy_errors(shape, dim, start, length):
    with raises_naming("aten::narrow_copy.out"):
        kernels.call("aten::narrow_copy.out", rand(shape), dim, start, length, Out((8, 8), dynamic=True))


@pytest.mark.parametrize("shape,split,dim", [((7, 3), 2, 0), ((7, 3), 3, -1), ((7, 3), 10, 0), ((0, 2), 0, 0),
                                             ((0, 2), 3, 0), ((4, 6), 2, 1)])
def test_split_copy(shape, split, dim):
    x = rand(shape, torch.float16)
    want = torch.split(x, split, dim)
    got = kernels.call("aten::split_copy.Tensor_out", x, split, dim, [out_like(w) for w in want])
    assert len(got) == len(want)
    for g, w in zip(got, want):
        check(g, w)


def test_split_copy_errors():
    x = rand((7, 3))
    with raises_naming("aten::split_copy.Tensor_out"):  # wrong number of outs
        kernels.call("aten::split_copy.Tensor_out", x, 2, 0, [Out((2, 3))] * 3)
    with raises_naming("aten::split_copy.Tensor_out"):  # zero split of a non-empty dim
        kernels.call("aten::split_copy.Tensor_out", x, 0, 0, [Out((7, 3))])
    with raises_naming("aten::split_copy.Tensor_out"):
        kernels.call("aten::split_copy.Tensor_out", x, -1, 0, [Out((7, 3))])
    with raises_naming("aten::split_copy.Tensor_out"):  # zero-dim self
        kernels.call("aten::split_copy.Tensor_out", rand(()), 1, 0, [Out(())])


@pytest.mark.parametrize("shape,dim", [((3, 4), 0), ((3, 4), -1), ((2, 3, 4), 1), ((0, 4), 0), ((1,), 0)])
def test_unbind_copy(shape, dim):
    x = rand(shape, torch.int32)
    want = torch.unbind(x, dim)
    got = kernels.call("aten::unbind_copy.int_out", x, dim, [out_like(w) for w in want]) if want else ()
    assert len(got) == len(want)
    for g, w in zip(got, want):
        check(g, w)


def test_unbind_copy_errors():
    with raises_naming("aten::unbind_copy.int_out"):
        kernels.call("aten::unbind_copy.int_out", rand((3, 4)), 0, [Out((4,))] * 2)
    with raises_naming("aten::unbind_copy.int_out"):
        kernels.call("aten::unbind_copy.int_out", rand(()), 0, [Out(())])


@pytest.mark.parametrize("dim,index", [(0, 0), (0, -1), (1, 2), (-1, 3)])
@pytest.mark.parametrize("src_dtype", [torch.float32, torch.int64, torch.float16])
def test_select_scatter(dim, index, src_dtype):
    x = rand((3, 4, 5))
    src = (rand(x.select(dim, index).shape) * 4).to(src_dtype)
    want = torch.select_scatter(x, src, dim, index)
    run_like("aten::select_scatter.out", want, x, src, dim, index)


def test_select_scatter_errors():
    x = rand((3, 4))
    with raises_naming("aten::select_scatter.out"):  # index out of range
        kernels.call("aten::select_scatter.out", x, rand((4,)), 0, 3, Out((3, 4)))
    with raises_naming("aten::select_scatter.out"):  # src is not the slice's shape
        kernels.call("aten::select_scatter.out", x, rand((1, 4)), 0, 0, Out((3, 4)))
    with raises_naming("aten::select_scatter.out"):
        kernels.call("aten::select_scatter.out", rand(()), rand(()), 0, 0, Out(()))


@pytest.mark.parametrize(
    "dim,start,end,step", [(0, None, None, 1), (1, 1, 4, 2), (-1, -3, None, 1), (1, 0, 100, 3), (0, 2, 1, 1),
                           (2, None, None, 5)]
)
@pytest.mark.parametrize("dtype", [torch.float16, torch.int8, torch.bool])
def test_slice_scatter(dim, start, end, step, dtype):
    x = rand((4, 6, 5), dtype)
    src = rand(A.slice(x, dim, start, end, step).shape, dtype)
    want = torch.slice_scatter(x, src, dim, start, end, step)
    run_like("aten::slice_scatter.out", want, x, src, dim, start, end, step)


def test_slice_scatter_converts_src():
    x = rand((3, 4), torch.int32)
    src = rand((3, 2), torch.float64) * 5
    want = torch.slice_scatter(x, src.to(torch.int32), 1, 0, None, 2)  # copy_ truncates toward zero
    run_like("aten::slice_scatter.out", want, x, src, 1, 0, None, 2)


def test_slice_scatter_errors():
    x = rand((3, 4))
    with raises_naming("aten::slice_scatter.out"):  # src is not the slice's shape
        kernels.call("aten::slice_scatter.out", x, rand((3, 3)), 1, 0, None, 2, Out((3, 4)))
    with raises_naming("aten::slice_scatter.out"):
        kernels.call("aten::slice_scatter.out", x, rand((3, 2)), 1, 0, None, 0, Out((3, 4)))


# ---------------------------------------------------------------------------
# Converting copies
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "self_shape,src_shape", [((2, 3), (2, 3)), ((2, 3), (3,)), ((2, 3), (2, 1)), ((2, 3), ()), ((4, 2, 3), (2, 1)),
                             ((), ()), ((0, 3), (1, 3))]
)
@pytest.mark.parametrize("self_dtype,src_dtype", [(torch.float32, torch.float32), (torch.float32, torch.int32),
                                                  (torch.float16, torch.float64), (torch.int64, torch.bool),
                                                  (torch.bool, torch.float32), (torch.uint8, torch.int16)])
def test_copy_broadcasts_and_converts(self_shape, src_shape, self_dtype, src_dtype):
    x = rand(self_shape, self_dtype)
    src = rand(src_shape, src_dtype)
    if src_dtype.is_floating_point:
        src = src * 100
    want = A.copy(x, src)
    run_like("aten::copy.out", want, x, src, False)


def test_copy_negative_floats_wrap_into_uint8():
    src = torch.tensor([-3.7, -1.0, 0.5, 200.9, 255.0])
    want = A.copy(torch.zeros(5, dtype=torch.uint8), src)
    run_like("aten::copy.out", want, torch.zeros(5, dtype=torch.uint8), src, False)


@pytest.mark.parametrize("self_shape,src_shape", [((3,), (2, 3)), ((3,), (1, 3)), ((3,), (4,)), ((4, 1, 3), (2, 1))])
def test_copy_rejects_src_that_does_not_broadcast_to_self(self_shape, src_shape):
    with pytest.raises(RuntimeError):
        A.copy(rand(self_shape), rand(src_shape))
    with raises_naming("aten::copy.out"):
        kernels.call("aten::copy.out", rand(self_shape), rand(src_shape), False, Out(self_shape))


@pytest.mark.parametrize("src", [torch.float16, torch.float32, torch.int16, torch.bool])
@pytest.mark.parametrize("dst", [torch.float16, torch.float64, torch.int8, torch.int32, torch.bool])
def test_to_copy_half_and_small_ints(src, dst):
    x = rand((3, 4), src)
    if src.is_floating_point:
        x = x * 50
    run_like("aten::_to_copy.out", x.to(dst), x, False, None)


def test_cat_converts_half():
    xs = [rand((2, 3), torch.float16), rand((1, 3), torch.int8)]
    want = torch.cat(xs)
    run_like("aten::cat.out", want, xs, 0)


# ---------------------------------------------------------------------------
# Factories
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("value", [3, -2.5, True, float("inf"), float("nan")])
def test_fill_and_full_every_dtype(dtype, value):
    x = rand((2, 3), dtype)
    try:
        want = torch.full((2, 3), value, dtype=dtype)
    except RuntimeError:  # e.g. inf into an integer: we must refuse too
        with raises_naming("aten::full.out"):
            kernels.call("aten::full.out", [2, 3], value, Out((2, 3), dtype))
        with raises_naming("aten::fill.Scalar_out"):
            kernels.call("aten::fill.Scalar_out", x, value, Out((2, 3), dtype))
        return
    check(call1("aten::full.out", [2, 3], value, Out((2, 3), dtype)), want)
    run_like("aten::fill.Scalar_out", A.fill.Scalar(x, value), x, value)
    run_like("aten::full_like.out", torch.full_like(x, value), x, value, None)


@pytest.mark.parametrize(
    "value,dtype",
    [(300, torch.uint8), (-256, torch.uint8), (-1.0, torch.uint8), (128, torch.int8), (70000.0, torch.float16),
     (2**40, torch.float16), (1e300, torch.float32), (2147483647.5, torch.int32), (float("nan"), torch.int64)],
)
def test_fill_rejects_overflowing_values_like_pytorch(value, dtype):
    with pytest.raises(RuntimeError):
        torch.full((2,), value, dtype=dtype)
    with raises_naming("aten::full.out"):
        kernels.call("aten::full.out", [2], value, Out((2,), dtype))
    with raises_naming("aten::scalar_tensor.out"):
        kernels.call("aten::scalar_tensor.out", value, Out((), dtype))


@pytest.mark.parametrize("value,dtype", [(-1, torch.uint8), (-255, torch.uint8), (2, torch.bool), (65504.0, torch.float16)])
def test_fill_accepts_what_pytorch_accepts(value, dtype):
    check(call1("aten::full.out", [2], value, Out((2,), dtype)), torch.full((2,), value, dtype=dtype))


def test_fill_requires_self_dtype():
    with raises_naming("aten::fill.Scalar_out"):
        kernels.call("aten::fill.Scalar_out", rand((2,)), 1, Out((2,), torch.int64))


@pytest.mark.parametrize("dtype", [torch.float16, torch.int16, torch.int8, torch.uint8])
def test_zeros_ones_scalar_tensor_small_dtypes(dtype):
    check(call1("aten::zeros.out", [2, 3], Out((2, 3), dtype)), torch.zeros((2, 3), dtype=dtype))
    check(call1("aten::ones.out", [2, 3], Out((2, 3), dtype)), torch.ones((2, 3), dtype=dtype))
    check(call1("aten::scalar_tensor.out", 7, Out((), dtype)), torch.scalar_tensor(7, dtype=dtype))


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_empty_resizes_and_zeroes(dtype):
    out = Out((4, 4), dtype, dynamic=True)
    check(call1("aten::empty.out", [2, 3], None, out), torch.zeros((2, 3), dtype=dtype))
    check(call1("aten::empty_strided.out", [3, 2], [1, 3], out), torch.zeros((3, 2), dtype=dtype))
    check(call1("aten::empty.out", [0, 4], 0, out), torch.zeros((0, 4), dtype=dtype))


def test_empty_errors():
    with raises_naming("aten::empty.out"):
        kernels.call("aten::empty.out", [5, 5], None, Out((4, 4), dynamic=True))
    with raises_naming("aten::empty.out"):
        kernels.call("aten::empty.out", [2, 2], 2, Out((2, 2)))  # channels_last
    with raises_naming("aten::empty_strided.out"):
        kernels.call("aten::empty_strided.out", [2, 2], [1], Out((2, 2)))


@pytest.mark.parametrize("start,end,step", [(0, 10, 1), (0, 10, 0.5), (5, -3, -2), (-2.5, 3, 0.25), (0, 300, 7)])
@pytest.mark.parametrize("dtype", [torch.float16, torch.int16, torch.int8, torch.uint8])
def test_arange_half_and_small_ints(start, end, step, dtype):
    out = Out((1024,), dtype, dynamic=True)
    try:
        want = torch.arange(start, end, step, dtype=dtype)
    except RuntimeError:
        with raises_naming("aten::arange.start_out"):
            kernels.call("aten::arange.start_out", start, end, step, out)
        return
    check(call1("aten::arange.start_out", start, end, step, out), want)


def test_arange_rejects_bool():
    with raises_naming("aten::arange.out"):
        kernels.call("aten::arange.out", 3, Out((3,), torch.bool))


# ---------------------------------------------------------------------------
# Padding
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "shape,pad",
    [((2, 3), [1, 2]), ((2, 3), [1, 1, 2, 0]), ((2, 3, 4), [0, 0, 1, 1]), ((2, 3, 4), [2, 1, 0, 3, 1, 1]),
     ((2, 3), [-1, 2]), ((2, 3), [-2, -1]), ((2, 3), [-3, 1]), ((4, 5), [1, -2, -1, 3]), ((2, 3), []), ((), []),
     ((2, 0), [1, 1]), ((2, 0), [0, 0, 1, 1]), ((2, 4), [0, -1]), ((4, 1, 4, 4), [0, -3]), ((3, 4, 5), [0, 0, 0, 0, -1, 2]), ((2, 3, 4, 5), [1, 1])],
)
@pytest.mark.parametrize("dtype", WIDTHS)
def test_constant_pad_nd(shape, pad, dtype):
    x = rand(shape, dtype)
    value = True if dtype == torch.bool else 7
    run_like("aten::constant_pad_nd.out", torch.constant_pad_nd(x, pad, value), x, pad, value)


def test_constant_pad_nd_value_converts_like_fill():
    x = rand((2, 3), torch.int32)
    run_like("aten::constant_pad_nd.out", torch.constant_pad_nd(x, [1, 1], 2.5), x, [1, 1], 2.5)
    x = rand((2, 3), torch.float16)
    run_like("aten::constant_pad_nd.out", torch.constant_pad_nd(x, [1, 1], -0.1), x, [1, 1], -0.1)
    with raises_naming("aten::constant_pad_nd.out"):  # overflows uint8, like PyTorch
        kernels.call("aten::constant_pad_nd.out", rand((2, 3), torch.uint8), [1, 1], 300, Out((2, 5), torch.uint8))


@pytest.mark.parametrize("pad", [[1], [1, 1, 1, 1, 1, 1], [-4, 5], [-2, -2]], ids=str)
def test_constant_pad_nd_errors(pad):
    with raises_naming("aten::constant_pad_nd.out"):
        kernels.call("aten::constant_pad_nd.out", rand((2, 3)), pad, 0, Out((8, 8), dynamic=True))


def test_padding_matches_pytorch_on_random_shapes_and_pads():
    """Seeded sweep: ranks 1-4, sizes 0-4, pads in [-3, 3]; errors must match PyTorch's too."""
    import random

    rng = random.Random(1)
    edge_ops = [("reflection_pad1d", 1), ("reflection_pad2d", 2), ("reflection_pad3d", 3), ("replication_pad2d", 2),
                ("replication_pad3d", 3)]
    for _ in range(300):
        if rng.random() < 0.5:
            rank = rng.randint(1, 4)
            x = rand([rng.randint(0, 4) for _ in range(rank)])
            pad = [rng.randint(-3, 3) for _ in range(2 * rng.randint(0, rank))]
            name, want_fn, args = "aten::constant_pad_nd.out", lambda: torch.constant_pad_nd(x, pad, 1.5), (x, pad, 1.5)
        else:
            op, k = rng.choice(edge_ops)
            rank = rng.choice([k + 1, k + 2])
            x = rand([rng.randint(0, 4) for _ in range(rank)])
            pad = [rng.randint(-3, 3) for _ in range(2 * k)]
            name, want_fn, args = f"aten::{op}.out", lambda: getattr(A, op)(x, pad), (x, pad)
        out = Out((10,) * rank, torch.float32, dynamic=True)
        try:
            want = want_fn()
        except RuntimeError:
            with raises_naming(name):
                kernels.call(name, *args, out)
            continue
        check(call1(name, *args, out), want)


EDGE_CASES = {
    1: [((2, 5), [2, 3]), ((1, 2, 5), [4, 4]), ((3, 4), [-1, 2]), ((3, 4), [-3, 1]), ((0, 2, 3), [1, 1]),
        ((2, 4), [0, 0]), ((2, 3), [2, -1])],
    2: [((1, 4, 5), [1, 2, 3, 0]), ((2, 2, 3, 4), [2, 2, 2, 2]), ((2, 3, 4), [-1, 2, 1, -2]), ((1, 3, 4), [3, 3, 2, 2]),
        ((0, 1, 3, 3), [1, 1, 1, 1]), ((1, 2, 3), [-2, -1, 0, 0])],
    3: [((1, 3, 4, 5), [1, 2, 0, 3, 2, 1]), ((2, 1, 2, 3, 4), [1, 1, 1, 1, 1, 1]), ((1, 4, 3, 5), [-1, 2, 2, -1, 1, -2])],
}


def _edge_cases(ops):
    return [(op, k, shape, pad) for op, k in ops for shape, pad in EDGE_CASES[k]]


@pytest.mark.parametrize(
    "op,k,shape,pad",
    _edge_cases([("reflection_pad1d", 1), ("reflection_pad2d", 2), ("reflection_pad3d", 3), ("replication_pad2d", 2),
                 ("replication_pad3d", 3)]),
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64, torch.uint8])
def test_reflection_and_replication_pad(op, k, shape, pad, dtype):
    x = rand(shape, dtype)
    try:
        want = getattr(A, op)(x, pad)
    except RuntimeError:  # e.g. reflection pads not smaller than the dim: we must refuse too
        with raises_naming(f"aten::{op}.out"):
            kernels.call(f"aten::{op}.out", x, pad, Out((64,) * x.dim(), dtype, dynamic=True))
        return
    run_like(f"aten::{op}.out", want, x, pad)


@pytest.mark.parametrize(
    "op,shape,pad",
    [("reflection_pad1d", (2, 3), [3, 0]),  # pad not smaller than the dim
     ("reflection_pad1d", (2, 3), [1]),
     ("reflection_pad1d", (3,), [1, 1]),  # rank
     ("reflection_pad1d", (2, 0, 3), [1, 1]),  # empty non-batch dim
     ("reflection_pad1d", (2, 3), [-2, -1]),  # empty result
     ("reflection_pad2d", (1, 2, 3), [-2, -1, -1, -1]),
     ("replication_pad2d", (1, 2, 3), [-3, -1, 0, 0]),  # negative size
     ("replication_pad3d", (1, 1, 2, 3), [1, 1, 1, 1]),
     ("replication_pad2d", (1, 2, 3), [1, 1, 1, 1, 1, 1])],
)
def test_edge_pad_errors(op, shape, pad):
    x = rand(shape)
    with pytest.raises(RuntimeError):
        getattr(A, op)(x, pad)
    with raises_naming(f"aten::{op}.out"):
        kernels.call(f"aten::{op}.out", x, pad, Out((16,) * len(shape), dynamic=True))


def test_edge_pad_rejects_bool_like_pytorch():
    x = rand((1, 2, 3), torch.bool)
    with raises_naming("aten::replication_pad2d.out"):
        kernels.call("aten::replication_pad2d.out", x, [1, 1, 1, 1], Out((1, 4, 5), torch.bool))


# ---------------------------------------------------------------------------
# Registration
# ---------------------------------------------------------------------------


def test_every_shape_kernel_is_registered_with_its_schema_signature():
    from etmlir.runtime.signatures import expected_signature

    ops = """alias_copy.out as_strided_copy.out constant_pad_nd.out copy.out detach_copy.out diagonal_copy.out
    empty.out empty_strided.out fill.Scalar_out flip.out narrow_copy.out reflection_pad1d.out reflection_pad2d.out
    reflection_pad3d.out repeat.out replication_pad2d.out replication_pad3d.out select_scatter.out
    slice_scatter.out split_copy.Tensor_out squeeze_copy.out squeeze_copy.dim_out t_copy.out
    transpose_copy.int_out unbind_copy.int_out unfold_copy.out view_copy.out permute_copy.out expand_copy.out
    unsqueeze_copy.out squeeze_copy.dims_out split_with_sizes_copy.out slice_copy.Tensor_out select_copy.int_out
    cat.out clone.out _to_copy.out full.out full_like.out zeros.out ones.out scalar_tensor.out arange.start_out
    arange.out""".split()
    for op in ops:
        name = f"aten::{op}"
        assert kernels.signature(name) == expected_signature(name), name
