"""Portable kernels for the linear-algebra families, each called alone and compared with PyTorch eager.

Covers matmul.cpp (mm, bmm, addmm on the blocked sgemm), convolution.cpp,
normalization.cpp, softmax.cpp, reduction_ops.cpp, embedding.cpp and
upsample.cpp: random shapes including zero-size dims, broadcasting, negative
dims, keepdim, strides/padding/dilation/groups, and the error paths (whose
messages name the op).

Tolerances: float32 products and convolutions rtol=1e-4, atol=1e-4 (sums of
up to a few thousand terms in a different order than ATen's); elementwise
float32 kernels (norms, softmax, upsample) rtol=1e-5, atol=1e-5; reductions
accumulate in double, rtol=1e-5; integer results exact.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from etmlir.runtime import kernels

aten = torch.ops.aten
GEMM_TOL = dict(rtol=1e-4, atol=1e-4)
ELEMENTWISE_TOL = dict(rtol=1e-5, atol=1e-5)


def out_for(t: torch.Tensor, dynamic: bool = False) -> kernels.Out:
    return kernels.Out(tuple(t.shape), t.dtype, dynamic)


def check(actual: np.ndarray, expected: torch.Tensor, **tol) -> None:
    assert actual.shape == tuple(expected.shape)
    np.testing.assert_allclose(actual, expected.numpy(), **(tol or GEMM_TOL))


def expect_error(op: str, text: str, *args) -> str:
    with pytest.raises(Exception) as info:
        kernels.call(op, *args)
    message = str(info.value)
    assert op in message and text in message, message
    return message


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


# --- mm / bmm / addmm -----------------------------------------------------------------------------

@pytest.mark.parametrize("m,k,n", [
    (1, 1, 1), (5, 7, 3), (37, 53, 29), (1, 384, 1152), (3, 300, 100), (9, 384, 77), (16, 64, 40),
    (130, 260, 70), (64, 513, 1030), (0, 4, 5), (4, 0, 5), (4, 5, 0),
])
def test_mm_matches_torch(m, k, n):
    a, b = torch.randn(m, k), torch.randn(k, n)
    expected = a @ b
    (y,) = kernels.call("aten::mm.out", a, b, out_for(expected))
    check(y, expected)


@pytest.mark.parametrize("dtype", [torch.float64, torch.int64, torch.int32])
def test_mm_other_dtypes(dtype):
    a = torch.randint(-5, 5, (6, 7)).to(dtype)
    b = torch.randint(-5, 5, (7, 4)).to(dtype)
    (y,) = kernels.call("aten::mm.out", a, b, out_for(a @ b))
    np.testing.assert_array_equal(y, (a @ b).numpy())


def test_mm_resizes_a_dynamic_out():
    a, b = torch.randn(3, 8), torch.randn(8, 5)
    (y,) = kernels.call("aten::mm.out", a, b, kernels.Out((10, 5), np.float32, dynamic=True))
    check(y, a @ b)


@pytest.mark.parametrize("batch,m,k,n", [(3, 17, 9, 13), (2, 1, 64, 300), (6, 32, 64, 32), (0, 2, 3, 4), (2, 5, 0, 3)])
def test_bmm_matches_torch(batch, m, k, n):
    a, b = torch.randn(batch, m, k), torch.randn(batch, k, n)
    expected = torch.bmm(a, b)
    (y,) = kernels.call("aten::bmm.out", a, b, out_for(expected))
    check(y, expected)


@pytest.mark.parametrize("bias_shape", [(7,), (1, 7), (5, 1), (5, 7), (), (1,), (1, 1)])
@pytest.mark.parametrize("beta,alpha", [(1, 1), (0.5, 2.0), (2, 1)])
def test_addmm_broadcasts_bias(bias_shape, beta, alpha):
    bias, a, b = torch.randn(bias_shape), torch.randn(5, 11), torch.randn(11, 7)
    expected = torch.addmm(bias, a, b, beta=beta, alpha=alpha)
    (y,) = kernels.call("aten::addmm.out", bias, a, b, beta, alpha, out_for(expected))
    check(y, expected)


def test_addmm_beta_zero_ignores_nan_bias():
    bias, a, b = torch.full((4, 6), float("nan")), torch.randn(4, 3), torch.randn(3, 6)
    expected = torch.addmm(bias, a, b, beta=0)
    (y,) = kernels.call("aten::addmm.out", bias, a, b, 0, 1, out_for(expected))
    assert not np.isnan(y).any()
    check(y, expected)


def test_addmm_linear_layer_shapes():
    # nanoGPT's c_attn at T=37: x [37, 384] @ W^T [384, 1152] + b [1152].
    x, w, bias = torch.randn(37, 384), torch.randn(1152, 384), torch.randn(1152)
    expected = torch.addmm(bias, x, w.t())
    (y,) = kernels.call("aten::addmm.out", bias, x, w.t().contiguous(), 1, 1, out_for(expected))
    check(y, expected)


def test_addmm_int64():
    bias, a, b = torch.randint(-3, 3, (3,)), torch.randint(-3, 3, (2, 4)), torch.randint(-3, 3, (4, 3))
    expected = torch.addmm(bias, a, b, beta=2, alpha=3)
    (y,) = kernels.call("aten::addmm.out", bias, a, b, 2, 3, out_for(expected))
    np.testing.assert_array_equal(y, expected.numpy())


def test_matmul_errors_name_the_op_and_shapes():
    expect_error("aten::mm.out", "cannot be multiplied", torch.randn(3, 4), torch.randn(5, 6),
                 kernels.Out((3, 6)))
    expect_error("aten::mm.out", "must be 2-D", torch.randn(3, 4, 1), torch.randn(4, 6), kernels.Out((3, 6)))
    expect_error("aten::mm.out", "mat2 must be float32", torch.randn(3, 4), torch.randn(4, 6).double(),
                 kernels.Out((3, 6)))
    expect_error("aten::bmm.out", "same batch size", torch.randn(2, 3, 4), torch.randn(3, 4, 5),
                 kernels.Out((2, 3, 5)))
    expect_error("aten::addmm.out", "does not broadcast", torch.randn(4), torch.randn(3, 2), torch.randn(2, 5), 1, 1,
                 kernels.Out((3, 5)))
    expect_error("aten::mm.out", "cannot resize out", torch.randn(3, 4), torch.randn(4, 6), kernels.Out((3, 5)))


# --- convolution ----------------------------------------------------------------------------------

CONV2D_CASES = [
    # (N, Cin, H, W), (Cout, kh, kw), stride, padding, dilation, groups, bias
    pytest.param((1, 3, 16, 16), (8, 3, 3), [1, 1], [1, 1], [1, 1], 1, True, id="3x3-pad1"),
    pytest.param((1, 3, 33, 31), (32, 3, 3), [2, 2], [1, 1], [1, 1], 1, False, id="mobilenet-stem-s2"),
    pytest.param((2, 8, 11, 13), (8, 3, 3), [1, 1], [1, 1], [1, 1], 8, False, id="depthwise-s1"),
    pytest.param((1, 16, 14, 15), (16, 3, 3), [2, 2], [1, 1], [1, 1], 16, True, id="depthwise-s2"),
    pytest.param((1, 6, 9, 10), (12, 3, 3), [1, 1], [0, 0], [1, 1], 6, True, id="depthwise-multiplier2"),
    pytest.param((2, 5, 12, 9), (5, 5, 3), [3, 1], [2, 0], [2, 1], 5, False, id="depthwise-dilated-s3"),
    pytest.param((1, 4, 5, 2), (4, 3, 3), [1, 1], [1, 1], [1, 1], 4, True, id="depthwise-narrower-than-kernel"),
    pytest.param((1, 4, 7, 8), (4, 3, 3), [2, 2], [2, 2], [1, 1], 4, False, id="depthwise-pad2-s2"),
    pytest.param((1, 4, 6, 9), (8, 3, 3), [2, 2], [0, 0], [1, 1], 4, False, id="depthwise-pad0-s2"),
    pytest.param((2, 3, 1, 1), (3, 3, 3), [1, 1], [1, 1], [1, 1], 3, True, id="depthwise-1x1-input"),
    pytest.param((1, 4, 9, 9), (4, 3, 3), [1, 1], [1, 1], [1, 2], 4, False, id="depthwise-dilated-w"),
    pytest.param((2, 24, 7, 9), (40, 1, 1), [1, 1], [0, 0], [1, 1], 1, True, id="pointwise"),
    pytest.param((1, 320, 7, 7), (1280, 1, 1), [1, 1], [0, 0], [1, 1], 1, False, id="pointwise-wide"),
    pytest.param((1, 16, 8, 8), (24, 1, 1), [2, 2], [0, 0], [1, 1], 1, False, id="pointwise-s2"),
    pytest.param((1, 4, 6, 6), (4, 1, 1), [1, 1], [1, 1], [1, 1], 1, True, id="pointwise-padded"),
    pytest.param((2, 8, 15, 17), (16, 3, 5), [2, 1], [1, 2], [1, 2], 2, True, id="grouped-dilated-nonsquare"),
    pytest.param((1, 12, 10, 10), (6, 3, 3), [1, 1], [3, 3], [1, 1], 3, True, id="padding-beyond-kernel"),
    pytest.param((3, 4, 9, 9), (7, 3, 3), [1, 1], [0, 0], [3, 3], 1, False, id="dilation3"),
    pytest.param((1, 32, 28, 28), (32, 3, 3), [1, 1], [1, 1], [1, 1], 1, True, id="dense-32x32"),
    pytest.param((0, 3, 8, 8), (4, 3, 3), [1, 1], [1, 1], [1, 1], 1, True, id="batch0"),
    pytest.param((1, 3, 5, 5), (2, 5, 5), [1, 1], [0, 0], [1, 1], 1, True, id="kernel-equals-input"),
]


@pytest.mark.parametrize("in_shape,w_shape,stride,padding,dilation,groups,with_bias", CONV2D_CASES)
def test_conv2d_matches_torch(in_shape, w_shape, stride, padding, dilation, groups, with_bias):
    cout, kh, kw = w_shape
    x = torch.randn(in_shape)
    w = torch.randn(cout, in_shape[1] // groups, kh, kw)
    bias = torch.randn(cout) if with_bias else None
    expected = aten.convolution(x, w, bias, stride, padding, dilation, False, [0, 0], groups)
    (y,) = kernels.call("aten::convolution.out", x, w, bias, stride, padding, dilation, False, [0, 0], groups,
                        out_for(expected))
    check(y, expected)


@pytest.mark.parametrize("in_shape,cout,k,stride,padding,dilation,groups", [
    ((2, 4, 20), 6, 5, [2], [1], [2], 1),
    ((1, 6, 17), 6, 3, [1], [1], [1], 6),
    ((3, 8, 9), 4, 1, [1], [0], [1], 2),
])
def test_conv1d_matches_torch(in_shape, cout, k, stride, padding, dilation, groups):
    x, w, bias = torch.randn(in_shape), torch.randn(cout, in_shape[1] // groups, k), torch.randn(cout)
    expected = aten.convolution(x, w, bias, stride, padding, dilation, False, [0], groups)
    (y,) = kernels.call("aten::convolution.out", x, w, bias, stride, padding, dilation, False, [0], groups,
                        out_for(expected))
    check(y, expected)


def test_conv_single_value_lists_apply_to_every_dim():
    x, w = torch.randn(1, 2, 9, 7), torch.randn(3, 2, 3, 3)
    expected = aten.convolution(x, w, None, [2, 2], [1, 1], [1, 1], False, [0, 0], 1)
    (y,) = kernels.call("aten::convolution.out", x, w, None, [2], [1], [1], False, [0], 1, out_for(expected))
    check(y, expected)


def test_conv_errors():
    x, w = torch.randn(1, 4, 8, 8), torch.randn(6, 4, 3, 3)
    out = kernels.Out((1, 6, 6, 6))
    op = "aten::convolution.out"
    expect_error(op, "transposed", x, w, None, [1, 1], [0, 0], [1, 1], True, [0, 0], 1, out)
    expect_error(op, "input channels per group", x, torch.randn(6, 3, 3, 3), None, [1, 1], [0, 0], [1, 1], False,
                 [0, 0], 1, out)
    expect_error(op, "groups is 3", x, w, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 3, out)
    expect_error(op, "stride[0] is 0", x, w, None, [0, 1], [0, 0], [1, 1], False, [0, 0], 1, out)
    expect_error(op, "padding must have 2 values", x, w, None, [1, 1], [0, 0, 0], [1, 1], False, [0, 0], 1, out)
    expect_error(op, "larger than input", torch.randn(1, 4, 2, 2), w, None, [1, 1], [0, 0], [1, 1], False, [0, 0],
                 1, out)
    expect_error(op, "bias", x, w, torch.randn(5), [1, 1], [0, 0], [1, 1], False, [0, 0], 1, out)
    expect_error(op, "input dtype int64", x.long(), w, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1, out)


# --- batch norm / layer norm ----------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (4, 6), (1, 5, 7), (0, 3, 2, 2)])
@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_no_training(shape, affine):
    c = shape[1]
    x = torch.randn(shape)
    w, b = (torch.randn(c), torch.randn(c)) if affine else (None, None)
    mean, var = torch.randn(c), torch.rand(c) + 0.5
    expected = aten._native_batch_norm_legit_no_training(x, w, b, mean, var, 0.1, 1e-5)
    y, m, v = kernels.call("aten::_native_batch_norm_legit_no_training.out", x, w, b, mean, var, 0.1, 1e-5,
                           out_for(expected[0]), kernels.Out((0,)), kernels.Out((0,)))
    check(y, expected[0], **ELEMENTWISE_TOL)
    assert m.shape == (0,) and v.shape == (0,)


def test_batch_norm_resizes_dynamic_statistics_to_empty():
    x, mean, var = torch.randn(1, 2, 3), torch.zeros(2), torch.ones(2)
    _, m, v = kernels.call("aten::_native_batch_norm_legit_no_training.out", x, None, None, mean, var, 0.1, 1e-5,
                           out_for(x), kernels.Out((2,), dynamic=True), kernels.Out((2,), dynamic=True))
    assert m.shape == (0,) and v.shape == (0,)


def test_batch_norm_errors():
    x = torch.randn(2, 3, 4)
    expect_error("aten::_native_batch_norm_legit_no_training.out", "running_mean", x, None, None, torch.zeros(4),
                 torch.ones(3), 0.1, 1e-5, out_for(x), kernels.Out((0,)), kernels.Out((0,)))
    expect_error("aten::_native_batch_norm_legit_no_training.out", "at least 2 dims", torch.randn(3), None, None,
                 torch.zeros(3), torch.ones(3), 0.1, 1e-5, kernels.Out((3,)), kernels.Out((0,)), kernels.Out((0,)))


@pytest.mark.parametrize("shape,normalized", [((2, 5, 6), [6]), ((2, 5, 6), [5, 6]), ((4, 384), [384]),
                                              ((3, 7), [7]), ((0, 8), [8]), ((2, 3, 13), [3, 13])])
@pytest.mark.parametrize("affine", ["both", "weight", "bias", "none"])
def test_layer_norm(shape, normalized, affine):
    x = torch.randn(shape) * 3 + 1
    w = torch.randn(normalized) if affine in ("both", "weight") else None
    b = torch.randn(normalized) if affine in ("both", "bias") else None
    expected = aten.native_layer_norm(x, normalized, w, b, 1e-5)
    y, mean, rstd = kernels.call("aten::native_layer_norm.out", x, normalized, w, b, 1e-5,
                                 *[out_for(e) for e in expected])
    check(y, expected[0], **ELEMENTWISE_TOL)
    check(mean, expected[1], **ELEMENTWISE_TOL)
    check(rstd, expected[2], rtol=1e-4, atol=1e-5)


def test_layer_norm_errors():
    x = torch.randn(2, 5, 6)
    outs = [kernels.Out((2, 5, 6)), kernels.Out((2, 1, 1)), kernels.Out((2, 1, 1))]
    expect_error("aten::native_layer_norm.out", "normalized_shape[0] is 4", x, [4, 6], None, None, 1e-5, *outs)
    expect_error("aten::native_layer_norm.out", "weight", x, [5, 6], torch.randn(30), None, 1e-5, *outs)


# --- softmax / log_softmax ------------------------------------------------------------------------

@pytest.mark.parametrize("op,fn", [("aten::_softmax.out", aten._softmax), ("aten::_log_softmax.out", aten._log_softmax)])
@pytest.mark.parametrize("shape,dim", [((4, 10), -1), ((2, 3, 4), 1), ((2, 3, 4), 0), ((5,), 0),
                                       ((3, 0, 2), 1), ((1, 6, 9, 9), -1), ((2, 8, 5, 5), 1)])
def test_softmax_matches_torch(op, fn, shape, dim):
    x = torch.randn(shape) * 5
    expected = fn(x, dim, False)
    (y,) = kernels.call(op, x, dim, False, out_for(expected))
    check(y, expected, **ELEMENTWISE_TOL)


@pytest.mark.parametrize("op,fn", [("aten::_softmax.out", aten._softmax), ("aten::_log_softmax.out", aten._log_softmax)])
@pytest.mark.parametrize("n", [1, 3, 4, 7, 64, 257])
def test_softmax_last_dim_with_causal_mask(op, fn, n):
    # nanoGPT's attention: rows over the last dim, upper triangle -inf.
    x = torch.randn(2, n, n) * 4
    x = x.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    expected = fn(x, -1, False)
    (y,) = kernels.call(op, x, -1, False, out_for(expected))
    check(y, expected, **ELEMENTWISE_TOL)


def test_softmax_rows_with_nan_or_inf_follow_torch():
    x = torch.tensor([[1.0, float("nan"), 2.0, 0.0, 1.0], [float("inf"), 1.0, 2.0, 3.0, 4.0],
                      [float("-inf")] * 5, [-100.0, -200.0, -50.0, 0.0, -90.0]])
    for op, fn in [("aten::_softmax.out", aten._softmax), ("aten::_log_softmax.out", aten._log_softmax)]:
        expected = fn(x, -1, False)
        (y,) = kernels.call(op, x, -1, False, out_for(expected))
        np.testing.assert_allclose(y, expected.numpy(), rtol=1e-5, atol=1e-6, equal_nan=True)


def test_softmax_over_a_leading_dim_with_nan_or_inf_follows_torch():
    # The column path (inner dims > 1, e.g. softmax over channels) falls back per block on NaN/inf.
    x = torch.tensor([[1.0, float("nan"), 2.0, 0.0, 1.0], [float("inf"), 1.0, 2.0, 3.0, 4.0],
                      [float("-inf")] * 5, [-100.0, -200.0, -50.0, 0.0, -90.0]]).t().contiguous()
    for op, fn in [("aten::_softmax.out", aten._softmax), ("aten::_log_softmax.out", aten._log_softmax)]:
        for sample in (x, x[:, 2:].contiguous(), torch.randn(1, 8, 32, 32) * 9):
            expected = fn(sample, 0 if sample.dim() == 2 else 1, False)
            (y,) = kernels.call(op, sample, 0 if sample.dim() == 2 else 1, False, out_for(expected))
            np.testing.assert_allclose(y, expected.numpy(), rtol=1e-5, atol=1e-6, equal_nan=True)


def test_softmax_is_stable_and_masks_minus_inf():
    x = torch.tensor([[1000.0, 999.0, float("-inf")], [float("-inf"), 0.0, -1000.0]])
    for op, fn in [("aten::_softmax.out", aten._softmax), ("aten::_log_softmax.out", aten._log_softmax)]:
        expected = fn(x, -1, False)
        (y,) = kernels.call(op, x, -1, False, out_for(expected))
        np.testing.assert_allclose(y, expected.numpy(), rtol=1e-6, atol=1e-6)


def test_softmax_errors():
    x = torch.randn(2, 3)
    expect_error("aten::_softmax.out", "dim 2 is out of range", x, 2, False, out_for(x))
    expect_error("aten::_softmax.out", "half_to_float", x, 1, True, out_for(x))
    expect_error("aten::_log_softmax.out", "self dtype int64", x.long(), 1, False, kernels.Out((2, 3), np.int64))


# --- reductions -----------------------------------------------------------------------------------

@pytest.mark.parametrize("shape,dims,keepdim", [
    ((1, 1280, 7, 7), [-1, -2], True), ((2, 3, 4), [1], False), ((2, 3, 4), None, False), ((2, 3, 4), [], True),
    ((2, 3, 4, 5), [0, 2], False), ((2, 3, 4, 5), [3, 1], True), ((5,), [0], False),
    ((4, 0, 3), [2], False), ((4, 0, 3), [1], True),
])
def test_mean_and_sum_match_torch(shape, dims, keepdim):
    x = torch.randn(shape)
    mean = aten.mean.dim(x, dims, keepdim)
    (y,) = kernels.call("aten::mean.out", x, dims, keepdim, None, out_for(mean))
    np.testing.assert_allclose(y, mean.numpy(), rtol=1e-5, atol=1e-6)
    assert y.shape == tuple(mean.shape)
    total = aten.sum.dim_IntList(x, dims, keepdim)
    (y,) = kernels.call("aten::sum.IntList_out", x, dims, keepdim, None, out_for(total))
    np.testing.assert_allclose(y, total.numpy(), rtol=1e-5, atol=1e-5)


def test_mean_with_dtype_argument():
    x = torch.randn(3, 4)
    expected = aten.mean.dim(x, [1], False, dtype=torch.float64)
    (y,) = kernels.call("aten::mean.out", x, [1], False, 7, out_for(expected))  # 7 = torch.float64
    np.testing.assert_allclose(y, expected.numpy(), rtol=1e-12)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.bool])
def test_sum_of_integers_is_int64(dtype):
    x = torch.randint(0, 3, (3, 4, 5)).to(dtype)
    expected = aten.sum.dim_IntList(x, [0, 2], True)
    assert expected.dtype == torch.int64
    (y,) = kernels.call("aten::sum.IntList_out", x, [0, 2], True, None, out_for(expected))
    np.testing.assert_array_equal(y, expected.numpy())


def test_reduction_errors():
    x = torch.randn(2, 3)
    expect_error("aten::mean.out", "appears more than once", x, [1, -1], False, None, kernels.Out((2,)))
    expect_error("aten::mean.out", "dim 2 is out of range", x, [2], False, None, kernels.Out((2,)))
    expect_error("aten::mean.out", "self's dtype", x.long(), [1], False, None, kernels.Out((2,)))
    expect_error("aten::sum.IntList_out", "must be int64", x.int(), [1], False, None, kernels.Out((2,)))
    expect_error("aten::amax.out", "size 0", torch.randn(0, 3), [0], False, kernels.Out((3,)))


@pytest.mark.parametrize("shape,dims,keepdim", [((3, 5), [1], False), ((2, 3, 4), [], False), ((2, 3, 4), [0, 2], True),
                                                ((2, 3, 4), [-1], True), ((0, 4), [1], False)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.int32])
def test_amax_matches_torch(shape, dims, keepdim, dtype):
    x = (torch.randn(shape) * 10).to(dtype)
    expected = aten.amax(x, dims, keepdim)
    (y,) = kernels.call("aten::amax.out", x, dims, keepdim, out_for(expected))
    np.testing.assert_array_equal(y, expected.numpy())


def test_amax_propagates_nan():
    x = torch.tensor([[1.0, float("nan"), 3.0], [1.0, 2.0, 3.0]])
    (y,) = kernels.call("aten::amax.out", x, [1], False, kernels.Out((2,)))
    assert np.isnan(y[0]) and y[1] == 3.0


@pytest.mark.parametrize("dtype", [torch.bool, torch.float32, torch.int64])
@pytest.mark.parametrize("shape,dim,keepdim", [((1, 6, 9, 9), -1, True), ((3, 4), 0, False), ((2, 0), 1, False),
                                               ((5,), 0, True)])
def test_any_dim_matches_torch(dtype, shape, dim, keepdim):
    x = (torch.rand(shape) > 0.8).to(dtype)
    expected = aten.any.dim(x, dim, keepdim)
    (y,) = kernels.call("aten::any.out", x, dim, keepdim, out_for(expected))
    np.testing.assert_array_equal(y, expected.numpy())


def test_any_all_and_dims():
    x = torch.zeros(3, 4, dtype=torch.bool)
    (y,) = kernels.call("aten::any.all_out", x, kernels.Out((), np.bool_))
    assert y.shape == () and not y
    x[2, 1] = True
    (y,) = kernels.call("aten::any.all_out", x, kernels.Out((), np.bool_))
    assert y
    expected = aten.any.dims(x, [0], True)
    (y,) = kernels.call("aten::any.dims_out", x, [0], True, out_for(expected))
    np.testing.assert_array_equal(y, expected.numpy())
    # any.dims: None reduces every dim, [] none (unlike sum/mean/amax, where [] means every dim).
    for dims in (None, []):
        expected = aten.any.dims(x, dims, False)
        (y,) = kernels.call("aten::any.dims_out", x, dims, False, out_for(expected))
        np.testing.assert_array_equal(y, expected.numpy())
    expect_error("aten::any.out", "must be bool", x, 0, False, kernels.Out((4,)))


# --- embedding ------------------------------------------------------------------------------------

@pytest.mark.parametrize("index_dtype", [torch.int64, torch.int32])
@pytest.mark.parametrize("index_shape", [(1, 37), (5,), (2, 0)])
def test_embedding_matches_torch(index_dtype, index_shape):
    weight = torch.randn(65, 24)
    indices = torch.randint(0, 65, index_shape, dtype=index_dtype)
    expected = aten.embedding(weight, indices)
    (y,) = kernels.call("aten::embedding.out", weight, indices, -1, False, False, out_for(expected))
    np.testing.assert_array_equal(y, expected.numpy())


def test_embedding_rejects_out_of_range_indices():
    weight = torch.randn(10, 4)
    message = expect_error("aten::embedding.out", "index 10", weight, torch.tensor([[1, 2], [10, 3]]), -1, False,
                           False, kernels.Out((2, 2, 4)))
    assert "10 rows" in message and "position 2" in message
    expect_error("aten::embedding.out", "index -1", weight, torch.tensor([-1]), -1, False, False,
                 kernels.Out((1, 4)))
    expect_error("aten::embedding.out", "int64 or int32", weight, torch.tensor([1.0]), -1, False, False,
                 kernels.Out((1, 4)))


# --- upsample_bilinear2d --------------------------------------------------------------------------

@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("in_shape,output_size,scales", [
    ((1, 3, 16, 16), None, [2.0, 2.0]), ((2, 2, 5, 7), [9, 4], None), ((1, 1, 6, 6), None, [1.7, 0.5]),
    ((1, 2, 8, 8), [8, 8], None), ((1, 1, 1, 1), None, [3.0, 2.0]), ((1, 2, 4, 3), [1, 1], None),
    ((0, 2, 4, 4), None, [2.0, 2.0]),
])
def test_upsample_bilinear2d_matches_torch(align_corners, in_shape, output_size, scales):
    x = torch.randn(in_shape)
    expected = aten.upsample_bilinear2d.vec(x, output_size, align_corners, scales)
    (y,) = kernels.call("aten::upsample_bilinear2d.vec_out", x, output_size, align_corners, scales, out_for(expected))
    check(y, expected, **ELEMENTWISE_TOL)


def test_upsample_errors():
    x = torch.randn(1, 1, 4, 4)
    op = "aten::upsample_bilinear2d.vec_out"
    expect_error(op, "exactly one", x, [8, 8], False, [2.0, 2.0], kernels.Out((1, 1, 8, 8)))
    expect_error(op, "exactly one", x, None, False, None, kernels.Out((1, 1, 8, 8)))
    expect_error(op, "4-D", torch.randn(4, 4), None, False, [2.0, 2.0], kernels.Out((8, 8)))
    expect_error(op, "greater than 0", x, None, False, [0.1, 2.0], kernels.Out((1, 1, 8, 8)))
