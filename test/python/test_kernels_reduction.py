"""Reduction-shaped portable kernels against PyTorch eager.

Covers reduction_ops.cpp (sum, mean, prod, amax, amin, any, var, cumsum),
normalization.cpp (batch norm with batch statistics, group norm, half types),
softmax.cpp (half types), matmul.cpp (half and small integer dtypes) and
distance.cpp (cdist, pdist): random shapes with non-adjacent and negative
dims, keepdim, 0-size and 0-d tensors, NaN/inf, and errors that name the op.

Tolerances: float32 reductions rtol=1e-5, atol=1e-5 (pairwise sums in an order
other than ATen's); float64 rtol=1e-10; float16 results within 2e-3 relative
(one or two half ulps: both sides round a float result once); integer and
max/min results exact; normalizations float32 rtol=1e-4, atol=1e-5 (rstd of
nearly constant rows); distances float32 rtol=1e-4, atol=1e-4 (the matrix
product form cancels).
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from etmlir.runtime import kernels

aten = torch.ops.aten
F32 = dict(rtol=1e-5, atol=1e-5)
F64 = dict(rtol=1e-10, atol=1e-12)
F16 = dict(rtol=2e-3, atol=1e-3)
NORM = dict(rtol=1e-4, atol=1e-5)
DIST = dict(rtol=1e-4, atol=1e-4)


def out_for(t: torch.Tensor, dynamic: bool = False) -> kernels.Out:
    return kernels.Out(tuple(t.shape), t.dtype, dynamic)


def tol_for(dtype: torch.dtype) -> dict:
    return {torch.float32: F32, torch.float64: F64, torch.float16: F16}.get(dtype, dict(rtol=0, atol=0))


def check(actual: np.ndarray, expected: torch.Tensor, **tol) -> None:
    assert actual.shape == tuple(expected.shape), (actual.shape, expected.shape)
    assert actual.dtype == expected.numpy().dtype, (actual.dtype, expected.dtype)
    tol = tol or tol_for(expected.dtype)
    np.testing.assert_allclose(actual.astype(np.float64), expected.double().numpy(), equal_nan=True, **tol)


def expect_error(op: str, text: str, *args) -> None:
    with pytest.raises(Exception, match=re.escape(op)) as info:
        kernels.call(op, *args)
    assert text in str(info.value), str(info.value)


def sample(shape, dtype):
    if dtype == torch.bool:
        return torch.rand(shape) > 0.5
    if dtype.is_floating_point:
        return torch.randn(shape).to(dtype)
    lo = 0 if dtype == torch.uint8 else -4
    return torch.randint(lo, 5, shape).to(dtype)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


SHAPES_AND_DIMS = [
    ((2, 3, 4), [1]), ((2, 3, 4), [0, 2]), ((2, 3, 4), [-1, 0]), ((2, 3, 4, 5), [1, 3]), ((3, 1, 4, 1), [1, 2]),
    ((5, 7), None), ((5, 7), []), ((37, 1000), [1]), ((1000, 37), [0]), ((4, 0, 3), [1]), ((4, 0, 3), [2]),
    ((), None), ((), [0]), ((6,), [-1]), ((2, 3, 4, 5, 6), [0, 2, 4]), ((2, 3, 4, 5, 6), [1, 3]),
]
SUM_DTYPES = [torch.float32, torch.float64, torch.float16, torch.int64, torch.int32, torch.int16, torch.int8,
              torch.uint8, torch.bool]


@pytest.mark.parametrize("shape,dims", SHAPES_AND_DIMS)
@pytest.mark.parametrize("keepdim", [False, True])
def test_sum_and_mean_match_torch(shape, dims, keepdim):
    x = torch.randn(shape)
    for op, fn in [("aten::sum.IntList_out", aten.sum.dim_IntList), ("aten::mean.out", aten.mean.dim)]:
        expected = fn(x, dims, keepdim)
        (y,) = kernels.call(op, x, dims, keepdim, None, out_for(expected))
        check(y, expected)


@pytest.mark.parametrize("dtype", SUM_DTYPES)
def test_sum_dtypes(dtype):
    x = sample((3, 40, 5), dtype)
    for dims in ([1], [0, 2], None):
        expected = aten.sum.dim_IntList(x, dims, False)
        (y,) = kernels.call("aten::sum.IntList_out", x, dims, False, None, out_for(expected))
        check(y, expected)


def test_sum_and_mean_with_dtype_argument():
    x = torch.randint(-100, 100, (4, 9), dtype=torch.int32)
    expected = aten.sum.dim_IntList(x, [1], False, dtype=torch.float64)
    (y,) = kernels.call("aten::sum.IntList_out", x, [1], False, 7, out_for(expected))  # 7 = float64
    check(y, expected)
    expected = aten.mean.dim(x, [0], True, dtype=torch.float32)
    (y,) = kernels.call("aten::mean.out", x, [0], True, 6, out_for(expected))
    check(y, expected)
    xh = torch.randn(64, 3).half()
    expected = aten.sum.dim_IntList(xh, [0], False, dtype=torch.float32)
    (y,) = kernels.call("aten::sum.IntList_out", xh, [0], False, 6, out_for(expected))
    check(y, expected)


def test_full_sum_is_accurate():
    # 2^20 values of very different magnitudes: pairwise float32 summation stays
    # within a few ulps of the exact (float64) sum, as torch's cascade sum does.
    x = (torch.randn(1 << 20) * torch.logspace(-3, 3, 1 << 20)).float()
    exact = x.double().sum().item()
    (y,) = kernels.call("aten::sum.IntList_out", x, None, False, None, kernels.Out((), torch.float32))
    torch_error = abs(x.sum().item() - exact)
    assert abs(float(y) - exact) <= max(4 * torch_error, 1e-6 * abs(exact)), (float(y), exact, torch_error)
    # Across rows (dim 0 of a tall matrix) the sums are just as good.
    x = torch.rand(100000, 3) + 1000
    (y,) = kernels.call("aten::mean.out", x, [0], False, None, kernels.Out((3,)))
    np.testing.assert_allclose(y, x.double().mean(0).numpy(), rtol=1e-7)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
def test_mean_dtype_out(dtype):
    for shape in [(3, 4, 5), (0, 3), (), (1000,)]:
        x = sample(shape, dtype)
        expected = aten.mean(x)
        (y,) = kernels.call("aten::mean.dtype_out", x, None, out_for(expected))
        check(y, expected)
    x = torch.randn(5, 6)
    expected = aten.mean(x, dtype=torch.float64)
    (y,) = kernels.call("aten::mean.dtype_out", x, 7, out_for(expected))
    check(y, expected)


@pytest.mark.parametrize("dtype", SUM_DTYPES)
def test_prod_matches_torch(dtype):
    x = sample((3, 5, 4), dtype)
    if dtype.is_floating_point:
        x = (x.float().abs() + 0.5).to(dtype)
    expected = aten.prod(x)
    (y,) = kernels.call("aten::prod.out", x, None, out_for(expected))
    check(y, expected, **({**tol_for(expected.dtype), "rtol": 1e-4} if dtype == torch.float32 else {}))
    for dim in (0, 1, -1):
        for keepdim in (False, True):
            expected = aten.prod.dim_int(x, dim, keepdim)
            (y,) = kernels.call("aten::prod.int_out", x, dim, keepdim, None, out_for(expected))
            check(y, expected)


def test_prod_edge_cases():
    for x in [torch.zeros(0), torch.zeros(0, 3, dtype=torch.int32), torch.tensor(2.5), torch.tensor([2.0, float("nan")]),
              torch.full((40,), 3, dtype=torch.int64)]:  # 3^40 wraps in int64, like torch
        expected = aten.prod(x)
        (y,) = kernels.call("aten::prod.out", x, None, out_for(expected))
        check(y, expected)
    x = torch.randint(1, 4, (3, 4), dtype=torch.int8)
    expected = aten.prod.dim_int(x, 1, False, dtype=torch.float64)
    (y,) = kernels.call("aten::prod.int_out", x, 1, False, 7, out_for(expected))
    check(y, expected)


@pytest.mark.parametrize("dtype", SUM_DTYPES)
@pytest.mark.parametrize("shape,dims", [((3, 5, 4), [1]), ((3, 5, 4), [0, 2]), ((3, 5, 4), []), ((70, 9), [0]),
                                        ((9, 70), [-1]), ((), [])])
def test_amax_amin_match_torch(dtype, shape, dims):
    x = sample(shape, dtype)
    for op, fn in [("aten::amax.out", aten.amax), ("aten::amin.out", aten.amin)]:
        for keepdim in (False, True):
            expected = fn(x, dims, keepdim)
            (y,) = kernels.call(op, x, dims, keepdim, out_for(expected))
            np.testing.assert_array_equal(y, expected.numpy())


def test_amax_amin_nan_and_inf():
    x = torch.tensor([[1.0, float("nan"), 3.0], [float("-inf"), float("-inf"), float("-inf")],
                      [float("inf"), 2.0, float("nan")]])
    for op, fn in [("aten::amax.out", aten.amax), ("aten::amin.out", aten.amin)]:
        for dims in ([1], [0], []):
            expected = fn(x, dims)
            (y,) = kernels.call(op, x, dims, False, out_for(expected))
            np.testing.assert_array_equal(y, expected.numpy())
        expected = fn(x.half(), [1])
        (y,) = kernels.call(op, x.half(), [1], False, out_for(expected))
        np.testing.assert_array_equal(y, expected.numpy())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int8, torch.bool])
def test_any_dtypes(dtype):
    x = (torch.rand(4, 50, 3) > 0.97).to(dtype)
    for dims in (None, [1], [0, 2]):
        expected = aten.any.dims(x, dims, False)
        (y,) = kernels.call("aten::any.dims_out", x, dims, False, out_for(expected))
        np.testing.assert_array_equal(y, expected.numpy())
    x = torch.tensor([0.0, -0.0, float("nan")]).to(dtype) if dtype.is_floating_point else x
    expected = aten.any(x)
    (y,) = kernels.call("aten::any.all_out", x, out_for(expected))
    np.testing.assert_array_equal(y, expected.numpy())


@pytest.mark.parametrize("shape,dims", SHAPES_AND_DIMS)
@pytest.mark.parametrize("correction", [None, 0, 1, 2.5])
def test_var_correction_matches_torch(shape, dims, correction):
    x = torch.randn(shape) * 3 + 100  # far from 0: a one-pass formula would lose digits
    for keepdim in (False, True):
        expected = aten.var.correction(x, dims, correction=correction, keepdim=keepdim)
        (y,) = kernels.call("aten::var.correction_out", x, dims, correction, keepdim, out_for(expected))
        check(y, expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
@pytest.mark.parametrize("unbiased", [True, False])
def test_var_dim_matches_torch(dtype, unbiased):
    x = sample((4, 33, 6), dtype)
    for dims in ([1], [0, 2], None):
        expected = aten.var.dim(x, dims, unbiased, False)
        (y,) = kernels.call("aten::var.out", x, dims, unbiased, False, out_for(expected))
        check(y, expected, **(dict(rtol=1e-5, atol=1e-6) if dtype == torch.float32 else {}))


def test_var_degenerate_counts_follow_torch():
    for x, correction in [(torch.tensor([1.0, 2.0]), 3), (torch.tensor([1.0]), None), (torch.zeros(0), None),
                          (torch.tensor(4.0), 0)]:
        expected = aten.var.correction(x, None, correction=correction)
        (y,) = kernels.call("aten::var.correction_out", x, None, correction, False, out_for(expected))
        check(y, expected)


@pytest.mark.parametrize("dtype", SUM_DTYPES)
@pytest.mark.parametrize("shape,dim", [((7,), 0), ((3, 5, 4), 1), ((3, 5, 4), -1), ((3, 5, 4), 0), ((2, 0, 3), 1),
                                       ((), 0), ((300, 2), 0)])
def test_cumsum_matches_torch(dtype, shape, dim):
    x = sample(shape, dtype)
    expected = aten.cumsum(x, dim)
    (y,) = kernels.call("aten::cumsum.out", x, dim, None, out_for(expected))
    check(y, expected)


def test_cumsum_dtype_argument():
    x = torch.randint(-3, 4, (4, 6), dtype=torch.int32)
    for dtype, code in [(torch.float32, 6), (torch.int32, 3), (torch.float64, 7)]:
        expected = aten.cumsum(x, 1, dtype=dtype)
        (y,) = kernels.call("aten::cumsum.out", x, 1, code, out_for(expected))
        check(y, expected)


def test_reduction_errors_name_the_op():
    x = torch.randn(2, 3)
    expect_error("aten::amin.out", "size 0", torch.randn(2, 0), [1], False, kernels.Out((2,)))
    expect_error("aten::amin.out", "out must be float32", x, [1], False, kernels.Out((2,), torch.float64))
    expect_error("aten::prod.int_out", "dim 2 is out of range", x, 2, False, None, kernels.Out((2,)))
    expect_error("aten::prod.out", "must be int64", x.int(), None, kernels.Out(()))
    expect_error("aten::var.correction_out", "int64", x.long(), None, 1, False, kernels.Out((), torch.int64))
    expect_error("aten::var.out", "appears more than once", x, [0, -2], True, False, kernels.Out(()))
    expect_error("aten::cumsum.out", "dim -3 is out of range", x, -3, None, kernels.Out((2, 3)))
    expect_error("aten::cumsum.out", "dtype is float64", x, 0, 7, kernels.Out((2, 3)))
    expect_error("aten::mean.dtype_out", "floating", x.long(), 4, kernels.Out((), torch.int64))
    expect_error("aten::sum.IntList_out", "cannot resize out", x, [0], False, None, kernels.Out((2,)))


# --- normalization ------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(4, 3, 5, 6), (8, 5), (2, 3, 7), (3, 4, 1), (1, 2, 300)])
@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_with_batch_statistics(shape, affine):
    c = shape[1]
    x = torch.randn(shape) * 2 + 5
    w, b = (torch.randn(c), torch.randn(c)) if affine else (None, None)
    expected = aten._native_batch_norm_legit.no_stats(x, w, b, True, 0.1, 1e-5)
    got = kernels.call("aten::_native_batch_norm_legit.no_stats_out", x, w, b, True, 0.1, 1e-5,
                       *[out_for(e) for e in expected])
    for g, e in zip(got, expected):
        check(g, e, **NORM)


def test_batch_norm_of_an_empty_batch_has_nan_statistics():
    # torch refuses an empty batch; the kernel gives 0 / 0 statistics and an empty output.
    y, mean, invstd = kernels.call("aten::_native_batch_norm_legit.no_stats_out", torch.randn(0, 3, 2), None, None,
                                   True, 0.1, 1e-5, kernels.Out((0, 3, 2)), kernels.Out((3,)), kernels.Out((3,)))
    assert y.shape == (0, 3, 2) and np.isnan(mean).all() and np.isnan(invstd).all()


def test_batch_norm_half_types():
    x, w, b = torch.randn(3, 4, 5).half(), torch.randn(4).half(), torch.randn(4).half()
    expected = aten._native_batch_norm_legit.no_stats(x, w, b, True, 0.1, 1e-5)
    got = kernels.call("aten::_native_batch_norm_legit.no_stats_out", x, w, b, True, 0.1, 1e-5,
                       *[out_for(e) for e in expected])
    for g, e in zip(got, expected):
        check(g, e, rtol=5e-3, atol=5e-3)
    mean, var = torch.randn(4).half(), (torch.rand(4) + 0.5).half()
    expected = aten._native_batch_norm_legit_no_training(x, w, b, mean, var, 0.1, 1e-5)
    y, _, _ = kernels.call("aten::_native_batch_norm_legit_no_training.out", x, w, b, mean, var, 0.1, 1e-5,
                           out_for(expected[0]), kernels.Out((0,), torch.float16), kernels.Out((0,), torch.float16))
    check(y, expected[0], rtol=5e-3, atol=5e-3)


@pytest.mark.parametrize("n,c,hw,group", [(2, 6, 5, 3), (1, 4, 1, 4), (3, 8, 16, 1), (2, 6, 0, 2), (0, 4, 3, 2),
                                          (2, 32, 49, 8)])
@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
def test_group_norm_matches_torch(n, c, hw, group, affine, dtype):
    x = (torch.randn(n, c, hw) * 3 + 2).to(dtype)
    w, b = (torch.randn(c).to(dtype), torch.randn(c).to(dtype)) if affine else (None, None)
    expected = aten.native_group_norm(x, w, b, n, c, hw, group, 1e-5)
    got = kernels.call("aten::native_group_norm.out", x, w, b, n, c, hw, group, 1e-5, *[out_for(e) for e in expected])
    tol = dict(rtol=5e-3, atol=5e-3) if dtype == torch.float16 else NORM
    for g, e in zip(got, expected):
        check(g, e, **tol)


def test_layer_norm_half():
    x, w, b = torch.randn(3, 5, 16).half(), torch.randn(16).half(), torch.randn(16).half()
    expected = aten.native_layer_norm(x, [16], w, b, 1e-5)
    got = kernels.call("aten::native_layer_norm.out", x, [16], w, b, 1e-5, *[out_for(e) for e in expected])
    for g, e in zip(got, expected):
        check(g, e, rtol=5e-3, atol=5e-3)


def test_normalization_errors_name_the_op():
    x = torch.randn(2, 6, 5)
    outs = [kernels.Out((2, 6, 5)), kernels.Out((2, 4)), kernels.Out((2, 4))]
    expect_error("aten::native_group_norm.out", "divisible by group", x, None, None, 2, 6, 5, 4, 1e-5, *outs)
    expect_error("aten::native_group_norm.out", "N * C * HxW", x, None, None, 2, 6, 4, 3, 1e-5, *outs)
    expect_error("aten::native_group_norm.out", "weight", x, torch.randn(5), None, 2, 6, 5, 3, 1e-5, *outs)
    stats = [kernels.Out((2, 6, 5)), kernels.Out((6,)), kernels.Out((6,))]
    expect_error("aten::_native_batch_norm_legit.no_stats_out", "at least 2 dims", torch.randn(3), None, None, True,
                 0.1, 1e-5, *stats)
    expect_error("aten::_native_batch_norm_legit.no_stats_out", "float32, float64", x.long(), None, None, True, 0.1,
                 1e-5, *stats)


# --- softmax ----------------------------------------------------------------------------------

@pytest.mark.parametrize("op,fn", [("aten::_softmax.out", aten._softmax), ("aten::_log_softmax.out", aten._log_softmax)])
@pytest.mark.parametrize("shape,dim", [((4, 37), -1), ((2, 3, 9), 1), ((5, 8), 0), ((0, 3), 1)])
def test_softmax_half(op, fn, shape, dim):
    x = (torch.randn(shape) * 4).half()
    expected = fn(x, dim, False)
    (y,) = kernels.call(op, x, dim, False, out_for(expected))
    check(y, expected, rtol=2e-3, atol=2e-3)


def test_softmax_float64_and_errors():
    x = torch.randn(3, 7, dtype=torch.float64)
    expected = aten._softmax(x, 0, False)
    (y,) = kernels.call("aten::_softmax.out", x, 0, False, out_for(expected))
    check(y, expected)
    expect_error("aten::_softmax.out", "half_to_float", x.half(), 1, True, kernels.Out((3, 7)))
    expect_error("aten::_log_softmax.out", "out must be float16", x.half(), 1, False, kernels.Out((3, 7)))


# --- matmul ----------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float16, torch.int8, torch.uint8, torch.int16])
def test_matmul_other_dtypes(dtype):
    a, b = sample((5, 33), dtype), sample((33, 7), dtype)
    tol = dict(rtol=2e-3, atol=2e-2) if dtype.is_floating_point else {}
    (y,) = kernels.call("aten::mm.out", a, b, out_for(a @ b))
    check(y, a @ b, **tol)
    ab, bb = sample((3, 4, 6), dtype), sample((3, 6, 2), dtype)
    (y,) = kernels.call("aten::bmm.out", ab, bb, out_for(torch.bmm(ab, bb)))
    check(y, torch.bmm(ab, bb), **tol)
    bias = sample((7,), dtype)
    beta, alpha = (0.5, 2.0) if dtype.is_floating_point else (2, 3)
    expected = torch.addmm(bias, a, b, beta=beta, alpha=alpha)
    (y,) = kernels.call("aten::addmm.out", bias, a, b, beta, alpha, out_for(expected))
    check(y, expected, **tol)


# --- distances -------------------------------------------------------------------------------

P_VALUES = [0.0, 1.0, 2.0, float("inf"), 0.5, 3.0]


@pytest.mark.parametrize("p", P_VALUES)
@pytest.mark.parametrize("shapes", [((5, 3), (4, 3)), ((2, 1, 7, 4), (3, 90, 4)), ((30, 8), (70, 8)), ((0, 3), (4, 3)),
                                    ((3, 0), (2, 0)), ((1, 130, 16), (1, 5, 16))])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_cdist_matches_torch(p, shapes, dtype):
    x1, x2 = torch.randn(shapes[0], dtype=dtype), torch.randn(shapes[1], dtype=dtype)
    if p == 0.0:  # exact ties make some differences zero
        x1, x2 = x1.round(), x2.round()
    for mode in (None, 0, 1, 2):
        expected = aten._cdist_forward(x1, x2, p, mode)
        (y,) = kernels.call("aten::_cdist_forward.out", x1, x2, p, mode, out_for(expected))
        check(y, expected, **(DIST if dtype == torch.float32 else dict(rtol=1e-9, atol=1e-9)))


@pytest.mark.parametrize("p", P_VALUES)
def test_cdist_and_pdist_special_values(p):
    nan, inf = float("nan"), float("inf")
    a = torch.tensor([[1.0, nan, 2.0, 0.5], [1.0, 2.0, 3.0, 4.0]])
    b = torch.tensor([[1.0, 0.0, 3.0, 0.5], [inf, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.0]])
    expected = aten._cdist_forward(a, b, p, 2)
    (y,) = kernels.call("aten::_cdist_forward.out", a, b, p, 2, out_for(expected))
    check(y, expected)
    both = torch.cat([a, b])
    expected = aten._pdist_forward(both, p)
    (y,) = kernels.call("aten::_pdist_forward.out", both, p, out_for(expected))
    check(y, expected)


@pytest.mark.parametrize("p", P_VALUES)
@pytest.mark.parametrize("shape", [(1, 3), (2, 5), (9, 4), (150, 7), (5, 0), (0, 3)])
def test_pdist_matches_torch(p, shape):
    x = torch.randn(shape)
    expected = aten._pdist_forward(x, p)
    (y,) = kernels.call("aten::_pdist_forward.out", x, p, out_for(expected))
    check(y, expected, **DIST)


def test_distance_errors_name_the_op():
    x = torch.randn(4, 3)
    expect_error("aten::_cdist_forward.out", "same number of columns", x, torch.randn(2, 4), 2.0, None,
                 kernels.Out((4, 2)))
    expect_error("aten::_cdist_forward.out", "non-negative", x, x, -1.0, None, kernels.Out((4, 4)))
    expect_error("aten::_cdist_forward.out", "compute_mode is 5", x, x, 2.0, 5, kernels.Out((4, 4)))
    expect_error("aten::_cdist_forward.out", "do not broadcast", torch.randn(2, 4, 3), torch.randn(3, 4, 3), 2.0,
                 None, kernels.Out((2, 4, 4)))
    expect_error("aten::_cdist_forward.out", "only float32 and float64", x.long(), x.long(), 2.0, None,
                 kernels.Out((4, 4), torch.int64))
    expect_error("aten::_pdist_forward.out", "must be 2-D", torch.randn(2, 3, 4), 2.0, kernels.Out((1,)))
