"""Spatial portable kernels, each called alone and compared with PyTorch eager.

Covers convolution.cpp (aten::convolution.out in 1-3 spatial dims, plain and
transposed, groups/stride/padding/dilation/output_padding; col2im),
pooling.cpp (avg_pool1d/2d/3d, adaptive_avg_pool1d/2d/3d,
max_pool2d/3d_with_indices) and upsample.cpp (upsample_bilinear2d,
upsample_nearest2d, grid_sampler_2d), and the error paths (whose messages
name the op).

Tolerances: float32 convolutions rtol=atol=1e-4 (sums in another order than
ATen's); float64 rtol=1e-10; int64 exact. Pooling sums in ATen's order:
float32 avg pools rtol=atol=1e-6, max pools (values and indices) exact.
Interpolation (bilinear, grid sampling) float32 rtol=atol=1e-5, float64
1e-10; nearest and col2im exact. float16 results (computed in float32, like
PyTorch's CPU kernels) rtol=atol=1e-2 against PyTorch's float16 result,
bfloat16 rtol=atol=4e-2 (bfloat16 inputs go in and come back as torch
tensors); grid_sampler's half types against float32 math on the same
inputs (PyTorch's rounds every intermediate to the half type).
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from etmlir.runtime import kernels

aten = torch.ops.aten
F32 = dict(rtol=1e-4, atol=1e-4)
F64 = dict(rtol=1e-10, atol=1e-10)
F16 = dict(rtol=1e-2, atol=1e-2)
BF16 = dict(rtol=4e-2, atol=4e-2)
EXACT = dict(rtol=0, atol=0)


def out_for(t: torch.Tensor, dynamic: bool = False) -> kernels.Out:
    return kernels.Out(tuple(t.shape), t.dtype, dynamic)


def check(actual, expected: torch.Tensor, **tol) -> None:
    """`actual` (numpy, or torch for bfloat16) against `expected` within `tol` (default by dtype)."""
    assert tuple(actual.shape) == tuple(expected.shape)
    if expected.dtype == torch.bfloat16:
        assert actual.dtype == torch.bfloat16
        np.testing.assert_allclose(actual.float().numpy(), expected.float().numpy(), **(tol or BF16))
    elif expected.dtype == torch.float16:
        np.testing.assert_allclose(actual.astype(np.float32), expected.float().numpy(), **(tol or F16))
    elif expected.is_floating_point():
        np.testing.assert_allclose(actual, expected.numpy(), **(tol or F32))
    else:
        np.testing.assert_array_equal(actual, expected.numpy())


def expect_error(op: str, text: str, *args) -> None:
    with pytest.raises(Exception, match=re.escape(op)) as info:
        kernels.call(op, *args)
    assert text in str(info.value), str(info.value)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def test_every_kernel_is_registered():
    names = set(kernels.registered())
    for op in ["aten::convolution.out", "aten::col2im.out", "aten::avg_pool1d.out", "aten::avg_pool2d.out",
               "aten::avg_pool3d.out", "aten::adaptive_avg_pool1d.out", "aten::_adaptive_avg_pool2d.out",
               "aten::_adaptive_avg_pool3d.out", "aten::max_pool2d_with_indices.out",
               "aten::max_pool3d_with_indices.out", "aten::upsample_bilinear2d.vec_out",
               "aten::upsample_nearest2d.vec_out", "aten::grid_sampler_2d.out"]:
        assert op in names


# --- convolution ---------------------------------------------------------------------------------

def run_conv(x, w, b, stride, padding, dilation, transposed, output_padding, groups):
    expected = aten.convolution(x, w, b, stride, padding, dilation, transposed, output_padding, groups)
    (y,) = kernels.call("aten::convolution.out", x, w, b, stride, padding, dilation, transposed, output_padding,
                        groups, out_for(expected))
    return y, expected


CONV_CASES = [
    # input shape, (cout, *kernel), stride, padding, dilation, groups
    pytest.param((2, 4, 9, 8, 7), (6, 3, 3, 3), [1, 1, 1], [1, 1, 1], [1, 1, 1], 1, id="3d-3x3x3"),
    pytest.param((1, 6, 7, 9, 8), (4, 2, 3, 1), [2, 1, 2], [0, 1, 0], [2, 1, 1], 2, id="3d-grouped-strided"),
    pytest.param((1, 4, 5, 6, 7), (8, 3, 3, 3), [1, 2, 1], [1, 0, 2], [1, 1, 2], 4, id="3d-depthwise"),
    pytest.param((2, 8, 4, 5, 6), (3, 1, 1, 1), [1, 1, 1], [0, 0, 0], [1, 1, 1], 1, id="3d-pointwise"),
    pytest.param((1, 3, 17, 13), (5, 4, 2), [3, 2], [2, 1], [1, 3], 1, id="2d-odd"),
    pytest.param((2, 3, 23), (4, 6), [3], [4], [2], 1, id="1d"),
]


@pytest.mark.parametrize("in_shape,w_shape,stride,padding,dilation,groups", CONV_CASES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_conv_matches_torch(in_shape, w_shape, stride, padding, dilation, groups, dtype):
    x = torch.randn(in_shape, dtype=dtype)
    w = torch.randn(w_shape[0], in_shape[1] // groups, *w_shape[1:], dtype=dtype)
    b = torch.randn(w_shape[0], dtype=dtype)
    y, expected = run_conv(x, w, b, stride, padding, dilation, False, [0] * len(stride), groups)
    check(y, expected, **(F32 if dtype == torch.float32 else F64))


TRANSPOSED_CASES = [
    # input shape, (cout per group, *kernel), stride, padding, dilation, output_padding, groups
    pytest.param((2, 4, 6, 5), (3, 3, 3), [2, 2], [1, 1], [1, 1], [1, 0], 1, id="2d-s2-outpad"),
    pytest.param((1, 6, 5, 7), (2, 4, 3), [3, 1], [2, 0], [1, 2], [2, 1], 3, id="2d-grouped-dilated"),
    pytest.param((1, 8, 9, 9), (1, 3, 3), [1, 1], [1, 1], [1, 1], [0, 0], 8, id="2d-depthwise"),
    pytest.param((2, 5, 4, 4), (7, 1, 1), [1, 1], [0, 0], [1, 1], [0, 0], 1, id="2d-1x1"),
    pytest.param((1, 16, 6, 6), (24, 2, 2), [2, 2], [0, 0], [1, 1], [0, 0], 1, id="2d-unet-up"),
    pytest.param((2, 3, 11), (4, 5), [2], [3], [2], [1], 1, id="1d"),
    pytest.param((1, 4, 3, 4, 5), (3, 3, 2, 3), [2, 1, 2], [1, 0, 1], [1, 2, 1], [1, 0, 0], 2, id="3d"),
    pytest.param((0, 4, 3, 3), (3, 3, 3), [1, 1], [0, 0], [1, 1], [0, 0], 1, id="batch0"),
]


@pytest.mark.parametrize("in_shape,w_shape,stride,padding,dilation,output_padding,groups", TRANSPOSED_CASES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("with_bias", [True, False])
def test_conv_transposed_matches_torch(in_shape, w_shape, stride, padding, dilation, output_padding, groups, dtype,
                                       with_bias):
    x = torch.randn(in_shape, dtype=dtype)
    w = torch.randn(in_shape[1], *w_shape, dtype=dtype)
    b = torch.randn(w_shape[0] * groups, dtype=dtype) if with_bias else None
    y, expected = run_conv(x, w, b, stride, padding, dilation, True, output_padding, groups)
    check(y, expected, **(F32 if dtype == torch.float32 else F64))


def test_conv_transposed_empty_output():
    x, w = torch.randn(1, 3, 1), torch.randn(3, 3, 2)  # (1 - 1) * 1 - 2 + 1 + 1 = 0 output columns
    y, expected = run_conv(x, w, None, [1], [1], [1], True, [0], 3)
    assert y.shape == tuple(expected.shape) == (1, 9, 0)


def test_conv_transposed_large_uses_blocks():
    # More input rows than one block of cols holds: the gemm path runs block by block.
    x, w = torch.randn(1, 8, 70, 40), torch.randn(8, 16, 3, 3)
    y, expected = run_conv(x, w, None, [2, 2], [1, 1], [1, 1], True, [1, 1], 1)
    check(y, expected)


def test_conv_transposed_without_temp_memory_falls_back_to_direct():
    x, w, b = torch.randn(1, 4, 5, 6), torch.randn(4, 3, 3, 3), torch.randn(3)
    expected = aten.convolution(x, w, b, [2, 2], [1, 1], [1, 1], True, [1, 1], 1)
    (y,) = kernels.call("aten::convolution.out", x, w, b, [2, 2], [1, 1], [1, 1], True, [1, 1], 1, out_for(expected),
                        temp_bytes=0)
    check(y, expected)


def test_conv_direct_path_with_many_tap_rows():
    # float64 runs the direct loops; more than 1024 (channel, kd, kh) tap rows per output row take the row path.
    x, w = torch.randn(1, 128, 3, 4, 5, dtype=torch.float64), torch.randn(2, 128, 3, 3, 3, dtype=torch.float64)
    y, expected = run_conv(x, w, None, [1, 1, 2], [1, 1, 1], [1, 1, 1], False, [0, 0, 0], 1)
    check(y, expected, **F64)


@pytest.mark.parametrize("transposed", [False, True])
def test_conv_int64_is_exact(transposed):
    x = torch.randint(-9, 9, (2, 4, 6, 5))
    w = torch.randint(-9, 9, (4, 3, 3, 3)) if transposed else torch.randint(-9, 9, (6, 2, 3, 3))
    b = torch.randint(-9, 9, (6,))
    y, expected = run_conv(x, w, b, [2, 1], [1, 1], [1, 2], transposed, [1, 0], 2)
    check(y, expected)


@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_conv_half_types(transposed, dtype):
    x = torch.randn(1, 4, 7, 6).to(dtype)
    w = (torch.randn(4, 3, 3, 3) if transposed else torch.randn(6, 4, 3, 3)).to(dtype)
    b = torch.randn(3 if transposed else 6).to(dtype)
    y, expected = run_conv(x, w, b, [2, 2], [1, 1], [1, 1], transposed, [1, 1], 1)
    check(y, expected)


def test_conv_errors():
    op = "aten::convolution.out"
    x, w = torch.randn(1, 4, 8, 8), torch.randn(6, 4, 3, 3)
    out = kernels.Out((1, 6, 6, 6))
    expect_error(op, "output_padding[0] is 2", x, torch.randn(4, 2, 3, 3), None, [2, 2], [0, 0], [1, 1], True,
                 [2, 0], 1, out)
    expect_error(op, "transposed", x, w, None, [1, 1], [0, 0], [1, 1], True, [0, 0], 1, out)
    expect_error(op, "output size of", torch.randn(1, 4, 1, 1), torch.randn(4, 2, 1, 1), None, [1, 1], [1, 1],
                 [1, 1], True, [0, 0], 1, out)
    expect_error(op, "5-D", torch.randn(1, 1, 2, 2, 2, 2), torch.randn(1, 1, 1, 1, 1, 1), None, [1], [0], [1],
                 False, [0], 1, out)
    expect_error(op, "empty spatial dim 2", torch.randn(1, 4, 0, 8), w, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1,
                 out)
    expect_error(op, "input dtype int32", x.int(), w.int(), None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1, out)
    expect_error(op, "must have the input dtype float64", x.double(), w, None, [1, 1], [0, 0], [1, 1], False,
                 [0, 0], 1, kernels.Out((1, 6, 6, 6), np.float64))


# --- col2im --------------------------------------------------------------------------------------

@pytest.mark.parametrize("batched", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.bool])
def test_col2im_matches_torch(batched, dtype):
    out_size, k, d, p, s = [7, 9], [3, 2], [1, 2], [1, 0], [2, 1]
    nbh = (7 + 2 - 1 * 2 - 1) // 2 + 1
    nbw = (9 + 0 - 2 * 1 - 1) // 1 + 1
    cols = torch.randn(2, 3 * 6, nbh * nbw)
    cols = (cols > 0.5) if dtype == torch.bool else cols.to(dtype)
    if not batched:
        cols = cols[0]
    expected = aten.col2im(cols, out_size, k, d, p, s)
    (y,) = kernels.call("aten::col2im.out", cols, out_size, k, d, p, s, out_for(expected))
    check(y, expected, **(EXACT if dtype in (torch.float32, torch.float64) else {}))


def test_col2im_errors():
    op = "aten::col2im.out"
    cols = torch.randn(1, 12, 6)
    out = kernels.Out((1, 3, 3, 4))
    expect_error(op, "divisible by the product of kernel_size", torch.randn(1, 10, 6), [3, 4], [2, 2], [1, 1],
                 [0, 0], [1, 1], out)
    expect_error(op, "sliding blocks", cols, [4, 4], [2, 2], [1, 1], [0, 0], [1, 1], out)
    expect_error(op, "kernel_size must have 2 values", cols, [3, 4], [2], [1, 1], [0, 0], [1, 1], out)
    expect_error(op, "self has dtype int64", cols.long(), [3, 4], [2, 2], [1, 1], [0, 0], [1, 1],
                 kernels.Out((1, 3, 3, 4), np.int64))


# --- avg_pool ------------------------------------------------------------------------------------

AVG_CASES = [
    # input shape, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override
    ((2, 3, 9, 11), [3, 3], [2, 2], [1, 1], False, True, None),
    ((2, 3, 9, 11), [3, 2], [2, 3], [1, 1], True, False, None),
    ((1, 2, 10, 7), [4, 3], [3, 2], [2, 1], True, True, None),
    ((3, 8, 8), [2, 2], [], [0, 0], False, True, None),
    ((1, 2, 6, 7), [3, 3], [1, 1], [1, 1], False, True, 5),
    ((1, 1, 5, 5), [5, 5], [1, 1], [2, 2], True, False, None),
    ((0, 3, 5, 5), [2, 2], [2, 2], [0, 0], False, True, None),
]


@pytest.mark.parametrize("shape,kernel,stride,padding,ceil_mode,include_pad,divisor", AVG_CASES)
def test_avg_pool2d_matches_torch(shape, kernel, stride, padding, ceil_mode, include_pad, divisor):
    x = torch.randn(shape)
    expected = aten.avg_pool2d(x, kernel, stride, padding, ceil_mode, include_pad, divisor)
    (y,) = kernels.call("aten::avg_pool2d.out", x, kernel, stride, padding, ceil_mode, include_pad, divisor,
                        out_for(expected))
    check(y, expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("ceil_mode,include_pad", [(False, True), (True, False), (True, True)])
def test_avg_pool1d_and_3d_match_torch(ceil_mode, include_pad):
    x = torch.randn(2, 3, 13)
    expected = aten.avg_pool1d(x, [4], [3], [2], ceil_mode, include_pad)
    (y,) = kernels.call("aten::avg_pool1d.out", x, [4], [3], [2], ceil_mode, include_pad, out_for(expected))
    check(y, expected, rtol=1e-6, atol=1e-6)
    x = torch.randn(2, 2, 7, 6, 9)
    for divisor in [None, 7]:
        expected = aten.avg_pool3d(x, [3, 2, 3], [2, 2, 2], [1, 1, 1], ceil_mode, include_pad, divisor)
        (y,) = kernels.call("aten::avg_pool3d.out", x, [3, 2, 3], [2, 2, 2], [1, 1, 1], ceil_mode, include_pad,
                            divisor, out_for(expected))
        check(y, expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.int64, torch.float64, torch.float16, torch.bfloat16])
def test_avg_pool_other_dtypes(dtype):
    x = torch.randint(-50, 50, (2, 3, 7, 8)).to(dtype) if dtype == torch.int64 else torch.randn(2, 3, 7, 8).to(dtype)
    expected = aten.avg_pool2d(x, [3, 3], [2, 2], [1, 1], True, False)
    (y,) = kernels.call("aten::avg_pool2d.out", x, [3, 3], [2, 2], [1, 1], True, False, None, out_for(expected))
    check(y, expected, **(F64 if dtype == torch.float64 else {}))
    if dtype in (torch.int64, torch.float64):
        x3 = x[:, :, None].expand(2, 3, 3, 7, 8).contiguous()
        expected = aten.avg_pool3d(x3, [2, 3, 3], [1, 2, 2], [1, 1, 1], False, True)
        (y,) = kernels.call("aten::avg_pool3d.out", x3, [2, 3, 3], [1, 2, 2], [1, 1, 1], False, True, None,
                            out_for(expected))
        check(y, expected, **(F64 if dtype == torch.float64 else {}))


def test_avg_pool_errors():
    x = torch.randn(1, 1, 4, 4)
    out = kernels.Out((1, 1, 2, 2))
    op = "aten::avg_pool2d.out"
    expect_error(op, "padding[0] is 2; it must be at most half", x, [3, 3], [1, 1], [2, 1], False, True, None, out)
    expect_error(op, "divisor_override must not be zero", x, [2, 2], [2, 2], [0, 0], False, True, 0, out)
    expect_error(op, "too small", x, [5, 5], [1, 1], [0, 0], False, True, None, out)
    expect_error(op, "stride[1] is 0", x, [2, 2], [1, 0], [0, 0], False, True, None, out)
    expect_error(op, "must be 3-D (C, H, W) or 4-D", torch.randn(4, 4), [2, 2], [2, 2], [0, 0], False, True, None,
                 kernels.Out((2, 2)))
    expect_error(op, "self has dtype int32", x.int(), [2, 2], [2, 2], [0, 0], False, True, None,
                 kernels.Out((1, 1, 2, 2), np.int32))
    expect_error("aten::avg_pool3d.out", "smaller than kernel_size", torch.randn(1, 2, 4, 4, 1), [1, 3, 2], [1],
                 [0, 1, 1], True, True, None, kernels.Out((1, 2, 4, 2, 1)))
    expect_error("aten::avg_pool3d.out", "self has dtype float16", torch.randn(1, 2, 2, 2).half(), [2, 2, 2], [],
                 [0], False, True, None, kernels.Out((1, 1, 1, 1), np.float16))


# --- adaptive_avg_pool ---------------------------------------------------------------------------

@pytest.mark.parametrize("shape,size", [((2, 3, 7, 9), [3, 4]), ((1, 2, 5, 5), [1, 1]), ((4, 6, 6), [6, 6]),
                                        ((1, 2, 3, 4), [5, 7]), ((1, 2, 8, 8), [0, 3])])
def test_adaptive_avg_pool2d_matches_torch(shape, size):
    x = torch.randn(shape)
    expected = aten._adaptive_avg_pool2d(x, size)
    (y,) = kernels.call("aten::_adaptive_avg_pool2d.out", x, size, out_for(expected))
    check(y, expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_adaptive_avg_pool1d_and_3d_match_torch(dtype):
    x = torch.randn(2, 3, 17).to(dtype)
    expected = aten.adaptive_avg_pool1d(x, [5])
    (y,) = kernels.call("aten::adaptive_avg_pool1d.out", x, [5], out_for(expected))
    check(y, expected, **({torch.float32: dict(rtol=1e-6, atol=1e-6), torch.float64: F64}.get(dtype, {})))
    x = torch.randn(2, 2, 5, 7, 6).to(dtype)
    expected = aten._adaptive_avg_pool3d(x, [2, 3, 4])
    (y,) = kernels.call("aten::_adaptive_avg_pool3d.out", x, [2, 3, 4], out_for(expected))
    check(y, expected, **({torch.float32: dict(rtol=1e-6, atol=1e-6), torch.float64: F64}.get(dtype, {})))


def test_adaptive_avg_pool_errors():
    op = "aten::_adaptive_avg_pool2d.out"
    expect_error(op, "output_size must have 2 values", torch.randn(1, 2, 4, 4), [2], kernels.Out((1, 2, 2, 2)))
    expect_error(op, "output_size[1] is -1", torch.randn(1, 2, 4, 4), [2, -1], kernels.Out((1, 2, 2, 2)))
    expect_error(op, "empty spatial dim", torch.randn(1, 2, 0, 4), [2, 2], kernels.Out((1, 2, 2, 2)))
    expect_error(op, "self has dtype int64", torch.ones(1, 2, 4, 4, dtype=torch.long), [2, 2],
                 kernels.Out((1, 2, 2, 2), np.int64))


# --- max_pool_with_indices -----------------------------------------------------------------------

MAX_CASES = [
    # input shape, kernel, stride, padding, dilation, ceil_mode
    ((2, 3, 9, 11), [3, 3], [2, 2], [1, 1], [1, 1], False),
    ((1, 2, 10, 9), [3, 2], [2, 1], [1, 1], [2, 3], True),
    ((3, 8, 7), [2, 2], [], [0, 0], [1, 1], True),
    ((1, 1, 5, 6), [4, 4], [3, 3], [2, 1], [1, 1], True),
    ((0, 3, 5, 5), [2, 2], [2, 2], [0, 0], [1, 1], False),
]


@pytest.mark.parametrize("shape,kernel,stride,padding,dilation,ceil_mode", MAX_CASES)
def test_max_pool2d_matches_torch(shape, kernel, stride, padding, dilation, ceil_mode):
    x = torch.randn(shape)
    values, indices = aten.max_pool2d_with_indices(x, kernel, stride, padding, dilation, ceil_mode)
    y, i = kernels.call("aten::max_pool2d_with_indices.out", x, kernel, stride, padding, dilation, ceil_mode,
                        out_for(values), out_for(indices))
    check(y, values, **EXACT)
    check(i, indices)


def test_max_pool_ties_nan_and_inf_pick_torchs_index():
    x = torch.randint(0, 3, (2, 3, 8, 9)).float()  # many ties: the first maximum wins
    x[0, 0, 1, 1] = x[0, 0, 2, 2] = float("nan")  # a NaN wins; of two NaNs, the last
    x[1, 1] = float("-inf")  # all -inf: the first tap's index
    x[1, 2, :4] = float("inf")
    for kernel, stride, padding, dilation in [([3, 3], [1, 1], [1, 1], [1, 1]), ([2, 3], [2, 1], [1, 0], [2, 2])]:
        values, indices = aten.max_pool2d_with_indices(x, kernel, stride, padding, dilation, True)
        y, i = kernels.call("aten::max_pool2d_with_indices.out", x, kernel, stride, padding, dilation, True,
                            out_for(values), out_for(indices))
        np.testing.assert_array_equal(y, values.numpy())
        check(i, indices)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32,
                                   torch.int16, torch.int8, torch.uint8])
def test_max_pool_other_dtypes(dtype):
    if dtype.is_floating_point:
        x = torch.randn(2, 3, 7, 8).to(dtype)
    else:
        x = torch.randint(0 if dtype == torch.uint8 else -100, 100, (2, 3, 7, 8)).to(dtype)
    x[0, 0, :3] = torch.iinfo(dtype).min if not dtype.is_floating_point else float("-inf")  # the init value ties
    values, indices = aten.max_pool2d_with_indices(x, [3, 2], [2, 2], [1, 1], [1, 1], True)
    y, i = kernels.call("aten::max_pool2d_with_indices.out", x, [3, 2], [2, 2], [1, 1], [1, 1], True,
                        out_for(values), out_for(indices))
    check(y, values, **EXACT)
    check(i, indices)


def test_max_pool_large_row_runs_in_chunks():
    x = torch.randn(1, 2, 5, 1100)  # more output columns than one chunk
    for stride in [[1, 1], [2, 3]]:
        values, indices = aten.max_pool2d_with_indices(x, [3, 3], stride, [1, 1], [1, 1], False)
        y, i = kernels.call("aten::max_pool2d_with_indices.out", x, [3, 3], stride, [1, 1], [1, 1], False,
                            out_for(values), out_for(indices))
        check(y, values, **EXACT)
        check(i, indices)


@pytest.mark.parametrize("ceil_mode", [False, True])
def test_max_pool3d_matches_torch(ceil_mode):
    x = torch.randint(0, 5, (2, 2, 7, 6, 9)).float()
    x[0, 1, 2, 2, 2] = float("nan")
    for kernel, stride, padding, dilation in [([3, 2, 3], [2, 2, 2], [1, 1, 1], [1, 1, 1]),
                                              ([2, 2, 2], [1, 2, 3], [1, 0, 1], [2, 2, 1])]:
        values, indices = aten.max_pool3d_with_indices(x, kernel, stride, padding, dilation, ceil_mode)
        y, i = kernels.call("aten::max_pool3d_with_indices.out", x, kernel, stride, padding, dilation, ceil_mode,
                            out_for(values), out_for(indices))
        np.testing.assert_array_equal(y, values.numpy())
        check(i, indices)
    x = torch.randn(3, 5, 5, 5)  # unbatched
    values, indices = aten.max_pool3d_with_indices(x, [2, 2, 2], [], [0, 0, 0], [1, 1, 1], ceil_mode)
    y, i = kernels.call("aten::max_pool3d_with_indices.out", x, [2, 2, 2], [], [0, 0, 0], [1, 1, 1], ceil_mode,
                        out_for(values), out_for(indices))
    np.testing.assert_array_equal(y, values.numpy())
    check(i, indices)


def test_max_pool_errors():
    op = "aten::max_pool2d_with_indices.out"
    x = torch.randn(1, 1, 4, 4)
    out, idx = kernels.Out((1, 1, 2, 2)), kernels.Out((1, 1, 2, 2), np.int64)
    expect_error(op, "dilation[0] is 0", x, [2, 2], [2, 2], [0, 0], [0, 1], False, out, idx)
    expect_error(op, "padding[1] is 2", x, [3, 3], [2, 2], [1, 2], [1, 1], False, out, idx)
    expect_error(op, "indices must be int64", x, [2, 2], [2, 2], [0, 0], [1, 1], False, out,
                 kernels.Out((1, 1, 2, 2), np.int32))
    expect_error(op, "self has dtype bool", x > 0, [2, 2], [2, 2], [0, 0], [1, 1], False,
                 kernels.Out((1, 1, 2, 2), np.bool_), idx)
    expect_error(op, "kernel_size must have 2 values", x, [2, 2, 2], [2, 2], [0, 0], [1, 1], False, out, idx)


# --- upsample ------------------------------------------------------------------------------------

@pytest.mark.parametrize("in_shape,output_size,scales", [
    ((1, 3, 5, 7), None, [2.0, 2.0]), ((2, 2, 5, 7), [9, 4], None), ((1, 1, 6, 6), None, [1.7, 0.5]),
    ((1, 2, 8, 8), [8, 8], None), ((1, 1, 3, 300), None, [1.5, 1.3]), ((0, 2, 4, 4), None, [2.0, 2.0]),
    ((1, 2, 7, 5), [3, 11], None),
])
@pytest.mark.parametrize("dtype", [torch.float32, torch.uint8, torch.int64, torch.float16, torch.bool])
def test_upsample_nearest2d_matches_torch(in_shape, output_size, scales, dtype):
    x = torch.randn(in_shape) * 50
    x = (x > 0) if dtype == torch.bool else x.to(dtype)
    if dtype in (torch.int64, torch.bool):  # PyTorch has no such kernel: a gather of exact float32 values
        expected = aten.upsample_nearest2d.vec(x.float(), output_size, scales).to(dtype)
    else:
        expected = aten.upsample_nearest2d.vec(x, output_size, scales)
    (y,) = kernels.call("aten::upsample_nearest2d.vec_out", x, output_size, scales, out_for(expected))
    np.testing.assert_array_equal(y, expected.numpy())


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float16, torch.bfloat16])
def test_upsample_bilinear2d_other_dtypes(align_corners, dtype):
    x = torch.randn(2, 3, 5, 300).to(dtype)
    expected = aten.upsample_bilinear2d.vec(x, None, align_corners, [1.5, 1.3])
    (y,) = kernels.call("aten::upsample_bilinear2d.vec_out", x, None, align_corners, [1.5, 1.3], out_for(expected))
    check(y, expected, **(F64 if dtype == torch.float64 else {}))


def test_upsample_errors():
    x = torch.randn(1, 1, 4, 4)
    op = "aten::upsample_nearest2d.vec_out"
    expect_error(op, "exactly one", x, [8, 8], [2.0, 2.0], kernels.Out((1, 1, 8, 8)))
    expect_error(op, "4-D", torch.randn(4, 4), None, [2.0, 2.0], kernels.Out((8, 8)))
    expect_error(op, "output_size must have 2 values", x, [8], None, kernels.Out((1, 1, 8, 8)))
    expect_error(op, "out must have the input's dtype float32", x, [8, 8], None,
                 kernels.Out((1, 1, 8, 8), np.float64))
    expect_error("aten::upsample_bilinear2d.vec_out", "input has dtype uint8", x.to(torch.uint8), [8, 8], False,
                 None, kernels.Out((1, 1, 8, 8), np.uint8))


# --- grid_sampler_2d -----------------------------------------------------------------------------

@pytest.mark.parametrize("mode", [0, 1, 2])
@pytest.mark.parametrize("padding_mode", [0, 1, 2])
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sampler_2d_matches_torch(mode, padding_mode, align_corners):
    x = torch.randn(2, 3, 6, 7)
    grid = torch.rand(2, 5, 4, 2) * 3 - 1.5  # reaches outside [-1, 1]
    expected = aten.grid_sampler_2d(x, grid, mode, padding_mode, align_corners)
    (y,) = kernels.call("aten::grid_sampler_2d.out", x, grid, mode, padding_mode, align_corners, out_for(expected))
    check(y, expected, rtol=1e-5, atol=1e-5)
    xd, gd = x.double(), grid.double()
    expected = aten.grid_sampler_2d(xd, gd, mode, padding_mode, align_corners)
    (y,) = kernels.call("aten::grid_sampler_2d.out", xd, gd, mode, padding_mode, align_corners, out_for(expected))
    check(y, expected, **F64)


@pytest.mark.parametrize("mode", [0, 1, 2])
def test_grid_sampler_2d_float16_and_large_grid(mode):
    x = torch.randn(1, 2, 9, 11)
    grid = torch.rand(1, 20, 30, 2) * 2 - 1  # more grid points than one chunk
    expected = aten.grid_sampler_2d(x, grid, mode, 0, False)
    (y,) = kernels.call("aten::grid_sampler_2d.out", x, grid, mode, 0, False, out_for(expected))
    check(y, expected, rtol=1e-5, atol=1e-5)
    for dtype in [torch.float16, torch.bfloat16]:
        # PyTorch's half-type grid sampler rounds every intermediate: compare with float32 math on the same inputs.
        xh, gh = x.to(dtype), grid.to(dtype)
        expected = aten.grid_sampler_2d(xh.float(), gh.float(), mode, 1, True).to(dtype)
        (y,) = kernels.call("aten::grid_sampler_2d.out", xh, gh, mode, 1, True, out_for(expected))
        check(y, expected)


def test_grid_sampler_2d_non_finite_grid_as_torch():
    # NaN and inf coordinates: NaN out for zeros padding (NaN weights), the clipped edge for border/reflection.
    x = torch.randn(1, 2, 4, 5)
    inf, nan = float("inf"), float("nan")
    grid = torch.tensor([[[[nan, 0.2], [0.1, inf], [-inf, 0.0], [1e30, -1e30], [0.3, -0.4]]]])
    for mode in range(3):
        for padding_mode in range(3):
            for align_corners in (False, True):
                expected = aten.grid_sampler_2d(x, grid, mode, padding_mode, align_corners)
                (y,) = kernels.call("aten::grid_sampler_2d.out", x, grid, mode, padding_mode, align_corners,
                                    out_for(expected))
                np.testing.assert_allclose(y, expected.numpy(), rtol=1e-5, atol=1e-5, equal_nan=True)


def test_grid_sampler_errors():
    op = "aten::grid_sampler_2d.out"
    x, grid = torch.randn(1, 2, 4, 4), torch.zeros(1, 3, 3, 2)
    out = kernels.Out((1, 2, 3, 3))
    expect_error(op, "interpolation_mode is 3", x, grid, 3, 0, False, out)
    expect_error(op, "padding_mode is -1", x, grid, 0, -1, False, out)
    expect_error(op, "grid 4-D (N, H_out, W_out, 2)", x, torch.zeros(1, 3, 3, 3), 0, 0, False, out)
    expect_error(op, "grid must have the input's dtype float32", x, grid.double(), 0, 0, False, out)
