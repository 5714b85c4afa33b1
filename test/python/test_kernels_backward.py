"""Portable backward kernels (backward_ops.cpp), each called alone and compared with PyTorch eager.

The reference is the same ATen op run by torch (torch.ops.aten.convolution_backward, ...),
on random shapes including 1-D/2-D, groups, stride/padding/dilation, transposed
convolutions, ceil_mode, count_include_pad, divisor_override, padding_idx,
scale_grad_by_freq, missing weight/bias, output_mask and zero-size dims; plus the
error paths, whose messages name the op.

output_mask: an out whose gradient is not requested is left as planned (not resized,
not written); PyTorch returns None there.

Tolerances: float32 convolution gradients rtol=1e-4, atol=2e-4 (GEMM sums of up to a
few thousand terms in another order than ATen's); float32 pooling and embedding
gradients rtol=1e-5, atol=1e-5; float32 norm gradients rtol=1e-4, atol=1e-4 (their
row sums accumulate in double here, in float in ATen, and small groups amplify the
rounding of the float32 mean/rstd both see); float64 everything rtol=1e-10, atol=1e-10; int64 avg pooling exact.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from etmlir.runtime import kernels

aten = torch.ops.aten
CONV_TOL = dict(rtol=1e-4, atol=2e-4)
TOL = dict(rtol=1e-5, atol=1e-5)
NORM_TOL = dict(rtol=1e-4, atol=1e-4)
F64_TOL = dict(rtol=1e-10, atol=1e-10)

CONV = "aten::convolution_backward.out"
MAXPOOL = "aten::max_pool2d_with_indices_backward.grad_input"
AVGPOOL = "aten::avg_pool2d_backward.grad_input"
ADAPTIVE = "aten::_adaptive_avg_pool2d_backward.out"
EMBEDDING = "aten::embedding_dense_backward.out"
LAYER_NORM = "aten::native_layer_norm_backward.out"
GROUP_NORM = "aten::native_group_norm_backward.out"
UNTOUCHED = kernels.Out((1,), torch.float32)  # where a gradient is not requested


def out_for(t: torch.Tensor) -> kernels.Out:
    return kernels.Out(tuple(t.shape), t.dtype)


def tol_for(dtype, f32=TOL):
    return F64_TOL if dtype == torch.float64 else f32


def check(actual: np.ndarray, expected: torch.Tensor, **tol) -> None:
    assert actual.shape == tuple(expected.shape)
    np.testing.assert_allclose(actual, expected.numpy(), **tol)


def check_outs(outs, expected, mask, **tol) -> None:
    for got, want, wanted in zip(outs, expected, mask):
        if wanted:
            check(got, want, **tol)
        else:
            assert got.shape == (1,)  # left as planned: not resized


def expect_error(op: str, text: str, *args, **kwargs) -> None:
    with pytest.raises(Exception, match=re.escape(op)) as info:
        kernels.call(op, *args, **kwargs)
    assert text in str(info.value), str(info.value)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def test_every_kernel_is_registered():
    names = set(kernels.registered())
    assert {CONV, MAXPOOL, AVGPOOL, ADAPTIVE, EMBEDDING, LAYER_NORM, GROUP_NORM} <= names


# --- convolution_backward -------------------------------------------------------------------------

# (input shape, weight shape, stride, padding, dilation, groups, transposed, output_padding)
CONV_CASES = [
    ((2, 3, 9, 8), (4, 3, 3, 3), [1, 1], [0, 0], [1, 1], 1, False, [0, 0]),
    ((2, 4, 10, 7), (6, 2, 3, 2), [2, 1], [1, 2], [1, 2], 2, False, [0, 0]),
    ((1, 6, 8, 8), (6, 1, 3, 3), [1], [1], [1], 6, False, [0]),  # depthwise, one value for both dims
    ((3, 5, 6, 6), (7, 5, 1, 1), [1, 1], [0, 0], [1, 1], 1, False, [0, 0]),  # 1x1: im2col is the input
    ((2, 4, 6, 6), (4, 4, 1, 1), [2, 2], [0, 0], [1, 1], 1, False, [0, 0]),  # 1x1 strided
    ((2, 3, 5, 5), (2, 3, 5, 5), [1, 1], [2, 2], [1, 1], 1, False, [0, 0]),  # kernel > input without padding
    ((2, 3, 17), (5, 3, 4), [3], [2], [2], 1, False, [0]),  # 1-D
    ((1, 4, 12), (4, 2, 3), [1], [0], [1], 2, False, [0]),
    ((2, 4, 5, 6), (4, 3, 3, 3), [2, 2], [1, 0], [1, 1], 1, True, [1, 0]),  # transposed
    ((1, 6, 4, 5), (6, 2, 2, 3), [1, 2], [0, 1], [2, 1], 3, True, [1, 1]),  # transposed, groups, op < dilation
    ((2, 3, 7), (3, 4, 3), [2], [1], [1], 1, True, [1]),  # transposed 1-D
    ((2, 3, 7, 6), (6, 1, 3, 3), [2, 1], [1, 0], [1, 2], 3, False, [0, 0]),  # depthwise, multiplier 2
    ((1, 4, 5, 5), (4, 1, 3, 3), [2, 2], [1, 1], [1, 1], 4, True, [1, 1]),  # transposed depthwise
    ((2, 1, 8, 8), (8, 1, 3, 3), [1, 1], [1, 1], [1, 1], 1, False, [0, 0]),  # one input channel, GEMM path
    ((1, 16, 9, 9), (18, 16, 3, 3), [1, 1], [1, 1], [1, 1], 1, False, [0, 0]),  # rows > one packed block
    ((0, 3, 5, 5), (4, 3, 3, 3), [1, 1], [0, 0], [1, 1], 1, False, [0, 0]),  # empty batch
]


def conv_reference(gy, x, w, stride, padding, dilation, groups, transposed, output_padding, mask):
    bias_sizes = [w.shape[1] * groups if transposed else w.shape[0]]
    return aten.convolution_backward(gy, x, w, bias_sizes, stride, padding, dilation, transposed, output_padding,
                                     groups, mask)


@pytest.mark.parametrize("case", CONV_CASES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_convolution_backward_matches_torch(case, dtype):
    in_shape, w_shape, stride, padding, dilation, groups, transposed, output_padding = case
    x, w = torch.randn(in_shape, dtype=dtype), torch.randn(w_shape, dtype=dtype)
    y = aten.convolution(x, w, None, stride, padding, dilation, transposed, output_padding, groups)
    gy = torch.randn(y.shape, dtype=dtype)
    mask = [True, True, True]
    expected = conv_reference(gy, x, w, stride, padding, dilation, groups, transposed, output_padding, mask)
    outs = kernels.call(CONV, gy, x, w, None, stride, padding, dilation, transposed, output_padding, groups, mask,
                        *[out_for(e) for e in expected])
    check_outs(outs, expected, mask, **tol_for(dtype, CONV_TOL))


@pytest.mark.parametrize("mask", [[True, False, False], [False, True, False], [False, False, True],
                                  [False, True, True], [False, False, False]])
def test_convolution_backward_writes_only_requested_outputs(mask):
    x, w = torch.randn(2, 3, 7, 7), torch.randn(4, 3, 3, 3)
    gy = torch.randn(2, 4, 5, 5)
    expected = conv_reference(gy, x, w, [1, 1], [0, 0], [1, 1], 1, False, [0, 0], mask)
    plans = [out_for(e) if m else UNTOUCHED for e, m in zip(expected, mask)]
    outs = kernels.call(CONV, gy, x, w, [4], [1, 1], [0, 0], [1, 1], False, [0, 0], 1, mask, *plans)
    check_outs(outs, expected, mask, **CONV_TOL)


@pytest.mark.parametrize("transposed", [False, True])
def test_convolution_backward_in_column_chunks(transposed):
    # 64 KiB of temp memory: the im2col columns are cut into chunks, the GEMM packs on the stack.
    x = torch.randn(2, 8, 30, 31)
    w = torch.randn(8, 6, 3, 3) if transposed else torch.randn(6, 8, 3, 3)
    args = ([1, 2], [1, 1], [1, 1], transposed, [0, 1] if transposed else [0, 0], 1)
    y = aten.convolution(x, w, None, *args)
    gy = torch.randn(y.shape)
    mask = [True, True, True]
    expected = conv_reference(gy, x, w, *args[:3], args[5], transposed, args[4], mask)
    outs = kernels.call(CONV, gy, x, w, None, *args, mask, *[out_for(e) for e in expected], temp_bytes=64 << 10)
    check_outs(outs, expected, mask, **CONV_TOL)


def test_convolution_backward_errors():
    x, w, gy = torch.randn(1, 3, 6, 6), torch.randn(4, 3, 3, 3), torch.randn(1, 4, 4, 4)
    outs = [out_for(x), out_for(w), kernels.Out((4,))]
    common = ([1, 1], [0, 0], [1, 1], False, [0, 0], 1, [True, True, True])
    expect_error(CONV, "grad_output", torch.randn(1, 4, 5, 4), x, w, None, *common, *outs)
    expect_error(CONV, "weight", gy, x, w.double(), None, *common, *outs)
    expect_error(CONV, "float32, float64", gy.long(), x.long(), w.long(), None, *common, *outs)
    expect_error(CONV, "stride", gy, x, w, None, [1, 1, 1], *common[1:], *outs)
    expect_error(CONV, "groups", gy, x, w, None, *common[:5], 2, common[6], *outs)
    expect_error(CONV, "4-D", torch.randn(1, 4, 4, 4, 4), torch.randn(1, 3, 6, 6, 6), torch.randn(4, 3, 3, 3, 3),
                 None, [1, 1, 1], [0, 0, 0], [1, 1, 1], False, [0, 0, 0], 1, [True, True, True],
                 kernels.Out((1, 3, 6, 6, 6)), kernels.Out((4, 3, 3, 3, 3)), kernels.Out((4,)))
    # No temp memory for the im2col columns: a clean error, not a crash.
    expect_error(CONV, "temp memory", gy, x, w, None, *common, *outs, temp_bytes=0)


# --- max_pool2d_with_indices_backward -------------------------------------------------------------

# (input shape, kernel_size, stride, padding, dilation, ceil_mode)
MAXPOOL_CASES = [
    ((2, 3, 8, 8), [2, 2], [2, 2], [0, 0], [1, 1], False),
    ((1, 2, 9, 7), [3, 2], [2, 1], [1, 1], [1, 1], True),
    ((2, 2, 10, 11), [3, 3], [], [1, 0], [2, 1], False),  # empty stride means kernel_size
    ((3, 7, 7), [3], [2], [1], [1], True),  # 3-D, one value for both dims
    ((1, 1, 5, 5), [5, 5], [1, 1], [2, 2], [1, 1], False),  # overlapping windows accumulate
    ((0, 2, 4, 4), [2, 2], [2, 2], [0, 0], [1, 1], False),
]


@pytest.mark.parametrize("case", MAXPOOL_CASES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_max_pool2d_backward_matches_torch(case, dtype):
    shape, k, s, p, d, ceil = case
    x = torch.randn(shape, dtype=dtype)
    _, indices = aten.max_pool2d_with_indices(x, k, s, p, d, ceil)
    gy = torch.randn(indices.shape, dtype=dtype)
    expected = aten.max_pool2d_with_indices_backward(gy, x, k, s, p, d, ceil, indices)
    (gx,) = kernels.call(MAXPOOL, gy, x, k, s, p, d, ceil, indices, out_for(x))
    check(gx, expected, **tol_for(dtype))
    (gx32,) = kernels.call(MAXPOOL, gy, x, k, s, p, d, ceil, indices.int(), out_for(x))
    check(gx32, expected, **tol_for(dtype))


def test_max_pool2d_backward_errors():
    x = torch.randn(1, 1, 4, 4)
    _, indices = aten.max_pool2d_with_indices(x, [2, 2], [2, 2], [0, 0], [1, 1], False)
    gy = torch.randn(indices.shape)
    args = ([2, 2], [2, 2], [0, 0], [1, 1], False)
    bad = indices.clone()
    bad[0, 0, 1, 1] = 16
    expect_error(MAXPOOL, "indices holds 16", gy, x, *args, bad, out_for(x))
    expect_error(MAXPOOL, "grad_output", torch.randn(1, 1, 3, 2), x, *args, indices, out_for(x))
    expect_error(MAXPOOL, "padding", gy, x, [2, 2], [2, 2], [2, 0], [1, 1], False, indices, out_for(x))
    expect_error(MAXPOOL, "int64, int32", gy, x, *args, indices.float(), out_for(x))


# --- avg_pool2d_backward ----------------------------------------------------------------------------

# (input shape, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)
AVGPOOL_CASES = [
    ((2, 3, 8, 8), [2, 2], [2, 2], [0, 0], False, True, None),
    ((1, 2, 9, 7), [3, 2], [2, 1], [1, 1], True, True, None),
    ((1, 2, 9, 7), [3, 2], [2, 1], [1, 1], True, False, None),
    ((2, 2, 10, 11), [3, 3], [], [1, 0], False, False, None),
    ((3, 7, 7), [3], [2], [1], True, False, 5),  # 3-D
    ((1, 1, 6, 5), [4, 3], [1, 2], [2, 1], False, True, -3),
    ((0, 2, 4, 4), [2, 2], [2, 2], [0, 0], False, True, None),
]


@pytest.mark.parametrize("case", AVGPOOL_CASES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64])
def test_avg_pool2d_backward_matches_torch(case, dtype):
    shape, k, s, p, ceil, include_pad, divisor = case
    x = torch.randn(shape).to(dtype) if dtype.is_floating_point else torch.randint(-50, 50, shape)
    out_shape = aten.avg_pool2d(x.double(), k, s, p, ceil, include_pad, divisor).shape
    gy = torch.randn(out_shape, dtype=dtype) if dtype.is_floating_point else torch.randint(-100, 100, out_shape)
    expected = aten.avg_pool2d_backward(gy, x, k, s, p, ceil, include_pad, divisor)
    (gx,) = kernels.call(AVGPOOL, gy, x, k, s, p, ceil, include_pad, divisor, out_for(x))
    if dtype == torch.int64:
        np.testing.assert_array_equal(gx, expected.numpy())
    else:
        check(gx, expected, **tol_for(dtype))


def test_avg_pool2d_backward_errors():
    x, gy = torch.randn(1, 1, 4, 4), torch.randn(1, 1, 2, 2)
    expect_error(AVGPOOL, "divisor_override", gy, x, [2, 2], [2, 2], [0, 0], False, True, 0, out_for(x))
    expect_error(AVGPOOL, "grad_output", gy, x, [2, 2], [1, 1], [0, 0], False, True, None, out_for(x))
    expect_error(AVGPOOL, "kernel_size", gy, x, [0, 2], [2, 2], [0, 0], False, True, None, out_for(x))
    expect_error(AVGPOOL, "int32", gy.int(), x.int(), [2, 2], [2, 2], [0, 0], False, True, None,
                 kernels.Out((1, 1, 4, 4), torch.int32))


# --- _adaptive_avg_pool2d_backward ------------------------------------------------------------------

@pytest.mark.parametrize("shape,out_hw", [
    ((2, 3, 8, 8), (4, 4)), ((1, 2, 7, 10), (3, 4)), ((3, 5, 6), (5, 4)), ((1, 1, 5, 5), (1, 1)),
    ((2, 2, 3, 4), (6, 7)), ((0, 2, 4, 4), (2, 2)),
])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_adaptive_avg_pool2d_backward_matches_torch(shape, out_hw, dtype):
    x = torch.randn(shape, dtype=dtype)
    gy = torch.randn(shape[:-2] + out_hw, dtype=dtype)
    expected = aten._adaptive_avg_pool2d_backward(gy, x)
    (gx,) = kernels.call(ADAPTIVE, gy, x, out_for(x))
    check(gx, expected, **tol_for(dtype))


def test_adaptive_avg_pool2d_backward_errors():
    x = torch.randn(2, 3, 4, 4)
    expect_error(ADAPTIVE, "leading dims", torch.randn(2, 2, 2, 2), x, out_for(x))
    expect_error(ADAPTIVE, "grad_output", torch.randn(2, 3, 2, 2).double(), x, out_for(x))


# --- embedding_dense_backward -----------------------------------------------------------------------

@pytest.mark.parametrize("index_shape,num_weights,padding_idx,scale", [
    ((7,), 10, -1, False), ((3, 5), 6, 2, False), ((4, 6), 5, -1, True), ((2, 3, 4), 4, 1, True),
    ((0,), 3, -1, True), ((), 5, -1, False), ((5,), 0, -1, False),
])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_embedding_dense_backward_matches_torch(index_shape, num_weights, padding_idx, scale, dtype):
    dim = 4
    indices = torch.randint(0, max(num_weights, 1), index_shape) if num_weights else torch.full(index_shape, -1)
    gy = torch.randn(index_shape + (dim,), dtype=dtype)
    expected = aten.embedding_dense_backward(gy, indices, num_weights, padding_idx, scale)
    for idx in (indices, indices.int()):
        (gw,) = kernels.call(EMBEDDING, gy, idx, num_weights, padding_idx, scale, out_for(expected))
        check(gw, expected, **tol_for(dtype))


def test_embedding_dense_backward_errors():
    gy, indices = torch.randn(3, 4), torch.tensor([0, 5, 1])
    expect_error(EMBEDDING, "indices holds 5", gy, indices, 5, -1, False, kernels.Out((5, 4)))
    expect_error(EMBEDDING, "indices holds -2", gy, torch.tensor([0, -2, 1]), 5, -1, False, kernels.Out((5, 4)))
    expect_error(EMBEDDING, "grad_output", torch.randn(2, 4), indices, 6, -1, False, kernels.Out((6, 4)))
    expect_error(EMBEDDING, "int64, int32", gy, indices.float(), 6, -1, False, kernels.Out((6, 4)))


# --- native_layer_norm_backward ---------------------------------------------------------------------

@pytest.mark.parametrize("shape,normalized", [
    ((4, 10), [10]), ((2, 3, 16), [3, 16]), ((5, 1), [1]), ((7,), [7]), ((0, 6), [6]), ((3, 0), [0]),
])
@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_layer_norm_backward_matches_torch(shape, normalized, affine, dtype):
    x, gy = torch.randn(shape, dtype=dtype), torch.randn(shape, dtype=dtype)
    w = torch.randn(normalized, dtype=dtype) if affine else None
    b = torch.randn(normalized, dtype=dtype) if affine else None
    _, mean, rstd = aten.native_layer_norm(x, normalized, w, b, 1e-5)
    mask = [True, affine, affine]
    expected = aten.native_layer_norm_backward(gy, x, normalized, mean, rstd, w, b, mask)
    plans = [out_for(e) if m else UNTOUCHED for e, m in zip(expected, mask)]
    outs = kernels.call(LAYER_NORM, gy, x, normalized, mean, rstd, w, b, mask, *plans)
    check_outs(outs, expected, mask, **tol_for(dtype, NORM_TOL))


@pytest.mark.parametrize("mask", [[False, True, False], [False, False, True], [True, False, False]])
def test_layer_norm_backward_writes_only_requested_outputs(mask):
    x, gy, w, b = torch.randn(6, 8), torch.randn(6, 8), torch.randn(8), torch.randn(8)
    _, mean, rstd = aten.native_layer_norm(x, [8], w, b, 1e-5)
    expected = aten.native_layer_norm_backward(gy, x, [8], mean, rstd, w, b, mask)
    plans = [out_for(e) if m else UNTOUCHED for e, m in zip(expected, mask)]
    outs = kernels.call(LAYER_NORM, gy, x, [8], mean, rstd, w, b, mask, *plans)
    check_outs(outs, expected, mask, **NORM_TOL)


def test_layer_norm_backward_errors():
    x, w = torch.randn(4, 8), torch.randn(8)
    _, mean, rstd = aten.native_layer_norm(x, [8], w, None, 1e-5)
    outs = [out_for(x), out_for(w), out_for(w)]
    expect_error(LAYER_NORM, "normalized_shape", x, x, [4], mean, rstd, w, None, [True, False, False], *outs)
    expect_error(LAYER_NORM, "bias is None", x, x, [8], mean, rstd, w, None, [True, True, True], *outs)
    expect_error(LAYER_NORM, "mean", x, x, [8], mean[:2], rstd, w, None, [True, False, False], *outs)
    expect_error(LAYER_NORM, "grad_out", x.double(), x, [8], mean, rstd, w, None, [True, False, False], *outs)


# --- native_group_norm_backward ---------------------------------------------------------------------

@pytest.mark.parametrize("shape,group", [
    ((2, 6, 5), 3), ((3, 4, 2, 3), 2), ((2, 8, 3), 4), ((2, 4, 7), 1), ((0, 4, 3), 2), ((2, 4, 0), 2),
])
@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_group_norm_backward_matches_torch(shape, group, affine, dtype):
    n, c = shape[0], shape[1]
    hxw = int(np.prod(shape[2:], dtype=np.int64))
    x, gy = torch.randn(shape, dtype=dtype), torch.randn(shape, dtype=dtype)
    w = torch.randn(c, dtype=dtype) if affine else None
    b = torch.randn(c, dtype=dtype) if affine else None
    _, mean, rstd = aten.native_group_norm(x, w, b, n, c, hxw, group, 1e-5)
    mask = [True, affine, affine]
    expected = aten.native_group_norm_backward(gy, x, mean, rstd, w, n, c, hxw, group, mask)
    plans = [out_for(e) if m else UNTOUCHED for e, m in zip(expected, mask)]
    outs = kernels.call(GROUP_NORM, gy, x, mean, rstd, w, n, c, hxw, group, mask, *plans)
    check_outs(outs, expected, mask, **tol_for(dtype, NORM_TOL))


@pytest.mark.parametrize("mask", [[False, True, False], [False, False, True], [True, False, True]])
def test_group_norm_backward_writes_only_requested_outputs(mask):
    x, gy, w, b = torch.randn(3, 6, 4), torch.randn(3, 6, 4), torch.randn(6), torch.randn(6)
    _, mean, rstd = aten.native_group_norm(x, w, b, 3, 6, 4, 2, 1e-5)
    expected = aten.native_group_norm_backward(gy, x, mean, rstd, w, 3, 6, 4, 2, mask)
    plans = [out_for(e) if m else UNTOUCHED for e, m in zip(expected, mask)]
    outs = kernels.call(GROUP_NORM, gy, x, mean, rstd, w, 3, 6, 4, 2, mask, *plans)
    check_outs(outs, expected, mask, **NORM_TOL)


def test_group_norm_backward_errors():
    x, w = torch.randn(2, 6, 4), torch.randn(6)
    _, mean, rstd = aten.native_group_norm(x, w, None, 2, 6, 4, 3, 1e-5)
    outs = [out_for(x), out_for(w), out_for(w)]
    expect_error(GROUP_NORM, "must divide C", x, x, mean, rstd, w, 2, 6, 4, 4, [True, False, False], *outs)
    expect_error(GROUP_NORM, "input", x, x, mean, rstd, w, 2, 6, 5, 3, [True, False, False], *outs)
    expect_error(GROUP_NORM, "weight is None", x, x, mean, rstd, None, 2, 6, 4, 3, [False, False, True], *outs)
    expect_error(GROUP_NORM, "rstd", x, x, mean, rstd[:1], w, 2, 6, 4, 3, [True, False, False], *outs)
