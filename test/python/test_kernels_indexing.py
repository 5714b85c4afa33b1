"""Indexing, sorting and embedding-bag kernels against torch eager.

indexing.cpp (gather, scatter, scatter_add, scatter_reduce, index.Tensor,
index_put, index_select, masked_scatter, nonzero), sort_ops.cpp (sort, topk,
argmax/argmin, max/min.dim) and embedding.cpp (_embedding_bag): random
shapes, negative dims and indices, int32 indices, bool masks, ties, NaN,
empty and 0-d tensors, float16, and the error paths (whose messages name the
op and the offending index).

Tolerances: data movement, selection and integer results are exact;
scatter_add/scatter_reduce/index_put(accumulate) on float32 accumulate in the
same order as ATen's CPU loops (rtol=1e-6); float16/bfloat16 scatter_add and
scatter_reduce accumulate in float and round once, as ATen does: bit for bit
(test_half_scatter_accumulates_in_float); float16 index_put(accumulate) rounds on
every store (rtol=atol=2e-3: 2 ulp, where ATen rounds at other steps); embedding_bag float32/float64
rtol=1e-5, float16 rtol=1e-2 (ATen accumulates half bags in fbgemm's order).
"""

from __future__ import annotations

import re
from unittest import mock

import numpy as np
import pytest
import torch

from etmlir.runtime import kernels

aten = torch.ops.aten
Out = kernels.Out
NAN = float("nan")
HALF_TOL = dict(rtol=2e-3, atol=2e-3)  # 2 ulp of float16: ATen may round its half sums/products elsewhere


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def out_for(t: torch.Tensor, dynamic: bool = False) -> Out:
    return Out(tuple(t.shape), t.dtype, dynamic)


def same(actual: np.ndarray, expected: torch.Tensor) -> None:
    assert actual.shape == tuple(expected.shape), (actual.shape, expected.shape)
    np.testing.assert_array_equal(actual, expected.numpy())


def close(actual: np.ndarray, expected: torch.Tensor, **tol) -> None:
    assert actual.shape == tuple(expected.shape), (actual.shape, expected.shape)
    np.testing.assert_allclose(actual, expected.numpy(), **(tol or dict(rtol=1e-6, atol=1e-6)))


def expect_error(op: str, text: str, *args) -> str:
    with pytest.raises(Exception, match=re.escape(op)) as info:
        kernels.call(op, *args)
    assert text in str(info.value), str(info.value)
    return str(info.value)


class _OptionalTensors(list):
    """A Tensor?[] argument: kernels.call encodes a list without None as a plain tensor list."""


def call_indexed(op: str, self, indices, *rest):
    """Calls an op whose second argument is a Tensor?[] (always passed as an optional-tensor list)."""
    encode = kernels._encode

    def encode_optional(arg):
        if isinstance(arg, _OptionalTensors):
            return ("optional_tensor_list", [None if i is None else encode(i)[1] for i in arg])
        return encode(arg)

    with mock.patch.object(kernels, "_encode", encode_optional):
        return kernels.call(op, self, _OptionalTensors(indices), *rest)


def expect_indexed_error(op: str, text: str, self, indices, *rest) -> None:
    with pytest.raises(Exception, match=re.escape(op)) as info:
        call_indexed(op, self, indices, *rest)
    assert text in str(info.value), str(info.value)


# --- gather / scatter -------------------------------------------------------------------------------

@pytest.mark.parametrize("shape,dim,index_shape", [
    ((5, 7), 1, (5, 9)), ((5, 7), 0, (3, 7)), ((4, 3, 6), -1, (2, 3, 4)), ((4, 3, 6), 1, (4, 5, 6)),
    ((6,), 0, (10,)), ((3, 4), 0, (0, 4)), ((2, 3, 4, 5), 2, (1, 2, 7, 3)),
])
@pytest.mark.parametrize("index_dtype", [torch.int64, torch.int32])
def test_gather_matches_torch(shape, dim, index_shape, index_dtype):
    x = torch.randn(shape)
    index = torch.randint(0, shape[dim], index_shape, dtype=index_dtype)
    expected = torch.gather(x, dim, index.long())
    (y,) = kernels.call("aten::gather.out", x, dim, index, False, out_for(expected))
    same(y, expected)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bool, torch.int8, torch.float64])
def test_gather_other_dtypes_and_0d(dtype):
    x = torch.randint(0, 3, (4, 5)).to(dtype)
    index = torch.randint(0, 4, (6, 5))
    expected = torch.gather(x, 0, index)
    same(kernels.call("aten::gather.out", x, 0, index, False, out_for(expected))[0], expected)
    s = torch.tensor(2.5).to(dtype)
    for idx in [torch.tensor([0, 0]), torch.tensor(0)]:
        expected = torch.gather(s, 0, idx)
        same(kernels.call("aten::gather.out", s, 0, idx, False, out_for(expected))[0], expected)


def test_gather_errors():
    x = torch.randn(2, 3)
    op = "aten::gather.out"
    message = expect_error(op, "index -1 is out of bounds for dim 1 of self with size 3", x, 1,
                           torch.tensor([[-1], [0]]), False, Out((2, 1)))
    assert "-1" in message
    expect_error(op, "index 3 is out of bounds", x, 1, torch.tensor([[3]]), False, Out((1, 1)))
    expect_error(op, "no larger than self", x, 1, torch.tensor([[1], [2], [0]]), False, Out((3, 1)))
    expect_error(op, "as many dims", x, 1, torch.tensor([1]), False, Out((1,)))
    expect_error(op, "int64 or int32", x, 1, torch.tensor([[1.0]]), False, Out((1, 1)))
    expect_error(op, "dim 2 is out of range", x, 2, torch.tensor([[1]]), False, Out((1, 1)))


@pytest.mark.parametrize("shape,dim,index_shape,src_shape", [
    ((5, 7), 1, (5, 3), (5, 4)), ((5, 7), 0, (3, 7), (6, 8)), ((4, 3, 6), -1, (2, 3, 4), (2, 3, 5)),
    ((6,), 0, (4,), (4,)), ((3, 4), 0, (0, 4), (1, 4)),
])
def test_scatter_src_and_value_match_torch(shape, dim, index_shape, src_shape):
    x = torch.randn(shape)
    src = torch.randn(src_shape)
    index = torch.randint(0, shape[dim], index_shape)
    expected = torch.scatter(x, dim, index, src)
    same(kernels.call("aten::scatter.src_out", x, dim, index, src, out_for(expected))[0], expected)
    expected = torch.scatter(x, dim, index, 2.5)
    same(kernels.call("aten::scatter.value_out", x, dim, index, 2.5, out_for(expected))[0], expected)
    xi = torch.randint(-9, 9, shape, dtype=torch.int32)
    expected = torch.scatter(xi, dim, index.int(), 7.9)
    same(kernels.call("aten::scatter.value_out", xi, dim, index.int(), 7.9, out_for(expected))[0], expected)


def test_scatter_half_and_bool():
    x = torch.randn(4, 5).half()
    index = torch.tensor([[0, 1, 2, 3, 0]])
    src = torch.randn(1, 5).half()
    expected = torch.scatter(x, 0, index, src)
    same(kernels.call("aten::scatter.src_out", x, 0, index, src, out_for(expected))[0], expected)
    b = torch.zeros(3, dtype=torch.bool)
    expected = torch.scatter(b, 0, torch.tensor([2]), True)
    same(kernels.call("aten::scatter.value_out", b, 0, torch.tensor([2]), True, out_for(expected))[0], expected)


def test_scatter_errors():
    x = torch.randn(2, 3)
    op = "aten::scatter.src_out"
    expect_error(op, "index -1 is out of bounds for dim 1 of self with size 3", x, 1, torch.tensor([[-1]]),
                 torch.ones(1, 1), Out((2, 3)))
    expect_error(op, "no larger than src", x, 1, torch.tensor([[0, 1, 1]]), torch.zeros(1, 2), Out((2, 3)))
    expect_error(op, "self's dtype", x, 1, torch.tensor([[0]]), torch.ones(1, 1, dtype=torch.float64), Out((2, 3)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.int8, torch.float16, torch.bool])
def test_scatter_add_matches_torch(dtype):
    x = torch.randint(-5, 5, (6, 8)).to(dtype)
    src = torch.randint(-5, 5, (9, 8)).to(dtype)
    if dtype.is_floating_point:
        x, src = torch.randn(6, 8).to(dtype), torch.randn(9, 8).to(dtype)
    index = torch.randint(0, 6, (9, 8))
    expected = torch.scatter_add(x, 0, index, src)
    (y,) = kernels.call("aten::scatter_add.out", x, 0, index, src, out_for(expected))
    if dtype.is_floating_point:
        close(y, expected, **HALF_TOL if dtype == torch.float16 else {})
    else:
        same(y, expected)


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.int16, torch.float16])
def test_scatter_reduce_matches_torch(reduce, include_self, dtype):
    if dtype.is_floating_point:
        x, src = torch.randn(5, 4).to(dtype), torch.randn(7, 4).to(dtype)
    else:
        x, src = torch.randint(-9, 9, (5, 4)).to(dtype), torch.randint(-9, 9, (7, 4)).to(dtype)
    index = torch.randint(0, 5, (7, 4))
    expected = torch.scatter_reduce(x, 0, index, src, reduce, include_self=include_self)
    (y,) = kernels.call("aten::scatter_reduce.two_out", x, 0, index, src, reduce, include_self, out_for(expected))
    if dtype.is_floating_point:
        close(y, expected, **HALF_TOL if dtype == torch.float16 else {})
    else:
        same(y, expected)


def test_scatter_reduce_nan_bool_and_errors():
    x = torch.tensor([1.0, NAN, 3.0, 4.0])
    src = torch.tensor([NAN, 5.0, 2.0, 0.5])
    index = torch.tensor([0, 1, 2, 2])
    for reduce in ["amax", "amin", "sum", "mean"]:
        for include_self in [True, False]:
            expected = torch.scatter_reduce(x, 0, index, src, reduce, include_self=include_self)
            (y,) = kernels.call("aten::scatter_reduce.two_out", x, 0, index, src, reduce, include_self,
                                out_for(expected))
            same(y, expected)
    b = torch.tensor([False, True, False])
    bs = torch.tensor([True, False, True, False])
    bi = torch.tensor([0, 0, 1, 2])
    for reduce in ["sum", "prod", "amax", "amin"]:
        expected = torch.scatter_reduce(b, 0, bi, bs, reduce)
        same(kernels.call("aten::scatter_reduce.two_out", b, 0, bi, bs, reduce, True, out_for(expected))[0], expected)
    op = "aten::scatter_reduce.two_out"
    expect_error(op, "got 'foo'", x, 0, index, src, "foo", True, Out((4,)))
    expect_error(op, "'mean' is not supported for bool", b, 0, bi, bs, "mean", True, Out((3,)))
    expect_error(op, "index 4 is out of bounds", x, 0, torch.tensor([4]), src, "sum", True, Out((4,)))


# --- index.Tensor / index_put ---------------------------------------------------------------------------

def _index_cases():
    x = torch.arange(2 * 3 * 4 * 5, dtype=torch.float32).reshape(2, 3, 4, 5)
    t = torch.tensor
    return x, [
        [t([1, 0, 1])],
        [t([-1, 0])],
        [None, t([2, -3, 0])],
        [None, t([[0, 1], [2, 2]]), t([3, 0])],                # adjacent, broadcast
        [t([[0], [1]]), None, t([3, 0, 1])],                  # non-adjacent: B goes first
        [t([1]), None, None, t([4, 0])],                      # non-adjacent, trailing
        [None, None, t([1, 2]).int()],                        # int32
        [t([True, False])],                                   # mask
        [None, t([[True, False, True, False], [False, False, True, True], [True, True, True, False]])],
        [t([True, True]), t([0, 2])],                         # mask + index broadcast (count 2 vs 2)
        [t([True, False]), None, t([1])],                     # non-adjacent with a mask
        [None, t([1, 0, 1], dtype=torch.uint8)],              # uint8 mask
        [t([0, 1]), t([2, 0]), t([3, 3]), t([4, 0])],         # every dim
        [None, t([], dtype=torch.int64)],                     # empty index
        [None, t([False, False, False])],                     # all-false mask
    ]


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_index_tensor_matches_torch():
    x, cases = _index_cases()
    for indices in cases:
        expected = aten.index(x, indices)
        (y,) = call_indexed("aten::index.Tensor_out", x, indices, out_for(expected))
        same(y, expected)


def test_index_tensor_dtypes_and_dynamic_out():
    for dtype in [torch.float16, torch.bool, torch.int8, torch.float64, torch.int64]:
        x = torch.randint(0, 3, (4, 6)).to(dtype)
        indices = [None, torch.tensor([5, -6, 2])]
        expected = aten.index(x, indices)
        same(call_indexed("aten::index.Tensor_out", x, indices, out_for(expected))[0], expected)
    x = torch.randn(6, 3)
    mask = x[:, 0] > 0
    expected = aten.index(x, [mask])
    (y,) = call_indexed("aten::index.Tensor_out", x, [mask], Out((6, 3), torch.float32, dynamic=True))
    same(y, expected)


def test_index_tensor_errors():
    x = torch.randn(2, 3)
    op = "aten::index.Tensor_out"
    expect_indexed_error(op, "index 3 is out of bounds for dim 1 of self with size 3", x, [None, torch.tensor([3])],
                         Out((2, 1)))
    expect_indexed_error(op, "index -3 is out of bounds for dim 0 of self with size 2", x, [torch.tensor([-3])],
                         Out((1, 3)))
    expect_indexed_error(op, "too many indices", x, [None, None, torch.tensor([0])], Out((1,)))
    expect_indexed_error(op, "not broadcastable", x, [torch.tensor([0, 1]), torch.tensor([0, 1, 2])], Out((2,)))
    expect_indexed_error(op, "does not match self", x, [torch.tensor([True, False, True])], Out((2, 3)))
    expect_indexed_error(op, "int64, int32, bool or uint8", x, [torch.tensor([1.0])], Out((1, 3)))
    expect_indexed_error(op, "all are None", x, [None], Out((2, 3)))
    expect_indexed_error(op, "cannot resize", x, [torch.tensor([0, 1, 1])], Out((2, 3)))


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("accumulate", [False, True])
def test_index_put_matches_torch(accumulate):
    """Duplicate indices without accumulate: the last write wins, as in ATen's serial CPU loop."""
    x, cases = _index_cases()
    for indices in cases:
        shape = aten.index(x, indices).shape
        for values in [torch.randn(shape), torch.randn(shape[-1:]) if len(shape) else torch.randn(()),
                       torch.tensor(3.5)]:
            # ATen's index_put takes uint8 masks only on some paths; they mean the same as bool ones.
            as_bool = [i.bool() if i is not None and i.dtype == torch.uint8 else i for i in indices]
            expected = aten.index_put(x, as_bool, values, accumulate)
            (y,) = call_indexed("aten::index_put.out", x, indices, values, accumulate, out_for(expected))
            close(y, expected)


def test_index_put_duplicates_half_bool_and_errors():
    x = torch.zeros(5)
    idx = [torch.tensor([0, 0, 3, 0])]
    v = torch.tensor([1.0, 2.0, 3.0, 4.0])
    expected = aten.index_put(x, idx, v, True)
    same(call_indexed("aten::index_put.out", x, idx, v, True, out_for(expected))[0], expected)
    xh = torch.randn(4, 3).half()
    idx = [torch.tensor([1, -1, 1])]
    vh = torch.randn(3, 3).half()
    expected = aten.index_put(xh, idx, vh, True)
    same(call_indexed("aten::index_put.out", xh, idx, vh, True, out_for(expected))[0], expected)
    b = torch.tensor([False, True, False])
    expected = aten.index_put(b, [torch.tensor([0, 0])], torch.tensor([True, False]), True)
    same(call_indexed("aten::index_put.out", b, [torch.tensor([0, 0])], torch.tensor([True, False]), True,
                      out_for(expected))[0], expected)
    op = "aten::index_put.out"
    y = torch.zeros(3, 4)
    expect_indexed_error(op, "cannot be broadcast to the indexing result shape [2, 4]", y, [torch.tensor([0, 1])],
                         torch.ones(3, 4), False, Out((3, 4)))
    expect_indexed_error(op, "cannot be broadcast", y, [torch.tensor([0, 1])], torch.ones(1, 2, 4), False,
                         Out((3, 4)))
    expect_indexed_error(op, "self's dtype", y, [torch.tensor([0])], torch.ones(4, dtype=torch.float64), False,
                         Out((3, 4)))
    expect_indexed_error(op, "index 3 is out of bounds for dim 0", y, [torch.tensor([3])], torch.ones(4), False,
                         Out((3, 4)))


# --- index_select / masked_scatter / nonzero ----------------------------------------------------------

@pytest.mark.parametrize("shape,dim", [((5, 7), 0), ((5, 7), 1), ((5, 7), -1), ((3, 4, 5), 1), ((6,), 0),
                                       ((0, 4), 1), ((3, 0, 2), 2)])
@pytest.mark.parametrize("index_dtype", [torch.int64, torch.int32])
def test_index_select_matches_torch(shape, dim, index_dtype):
    x = torch.randn(shape)
    size = shape[dim]
    index = torch.randint(0, max(size, 1), (9,), dtype=index_dtype) if size else torch.tensor([], dtype=index_dtype)
    expected = torch.index_select(x, dim, index)
    same(kernels.call("aten::index_select.out", x, dim, index, out_for(expected))[0], expected)


def test_index_select_0d_half_and_errors():
    for x, index in [(torch.tensor(5.0), torch.tensor([0])), (torch.tensor(5.0), torch.tensor(0)),
                     (torch.randn(3, 2).half(), torch.tensor(2)), (torch.tensor([True, False]), torch.tensor([1, 1]))]:
        expected = torch.index_select(x, 0, index)
        same(kernels.call("aten::index_select.out", x, 0, index, out_for(expected))[0], expected)
    op = "aten::index_select.out"
    x = torch.randn(2, 3)
    expect_error(op, "index -1 is out of bounds for dim 1 of self with size 3", x, 1, torch.tensor([-1]), Out((2, 1)))
    expect_error(op, "index 2 is out of bounds for dim 0", x, 0, torch.tensor([0, 2]), Out((2, 3)))
    expect_error(op, "0-D or 1-D", x, 0, torch.tensor([[0]]), Out((1, 3)))


@pytest.mark.parametrize("self_shape,mask_shape", [((2, 3), (3,)), ((3,), (2, 3)), ((4, 5), (4, 5)), ((0, 3), (3,))])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int32])
def test_masked_scatter_matches_torch(self_shape, mask_shape, dtype):
    x = torch.randn(self_shape).to(dtype)
    mask = torch.rand(mask_shape) > 0.5
    source = torch.randn(30).to(dtype)
    expected = x.masked_scatter(mask, source)
    same(kernels.call("aten::masked_scatter.out", x, mask, source, out_for(expected))[0], expected)


def test_masked_scatter_errors():
    op = "aten::masked_scatter.out"
    x = torch.zeros(2, 3)
    expect_error(op, "fewer elements than mask has true entries (4)", x, torch.tensor([True, False, True]),
                 torch.ones(3), Out((2, 3)))
    expect_error(op, "mask must be bool", x, torch.tensor([1, 0, 1]), torch.ones(6), Out((2, 3)))
    expect_error(op, "self's dtype", x, torch.tensor([True, False, True]), torch.ones(6, dtype=torch.int64),
                 Out((2, 3)))


@pytest.mark.parametrize("x", [
    torch.tensor([[0.0, -0.0, NAN], [1.0, 0.0, -2.0]]), torch.tensor(5.0), torch.tensor(0.0), torch.zeros(0, 3),
    torch.randint(0, 2, (3, 4, 5)).bool(), torch.randint(-1, 2, (7,)).to(torch.int8),
    torch.tensor([0.0, -0.0, 1.5, NAN]).half(), torch.zeros(4, 4),
])
def test_nonzero_resizes_a_dynamic_out(x):
    expected = torch.nonzero(x)
    (y,) = kernels.call("aten::nonzero.out", x, Out((x.numel(), x.dim()), torch.int64, dynamic=True))
    same(y, expected)


def test_nonzero_beyond_the_planned_bound_is_an_error():
    x = torch.ones(3, 4)
    expect_error("aten::nonzero.out", "has 12 nonzero elements but out was planned for at most 5", x,
                 Out((5, 2), torch.int64, dynamic=True))
    expect_error("aten::nonzero.out", "out must be int64", x, Out((12, 2), torch.int32, dynamic=True))


# --- sort / topk -----------------------------------------------------------------------------------------

def _with_ties_and_nans(shape, dtype=torch.float32):
    x = torch.randint(-3, 4, shape).to(torch.float32)
    if x.numel():
        flat = x.view(-1)
        flat[torch.randint(0, flat.numel(), (max(1, flat.numel() // 8),))] = NAN
        flat[torch.randint(0, flat.numel(), (max(1, flat.numel() // 8),))] = -0.0
    return x.to(dtype)


@pytest.mark.parametrize("shape,dim", [((50,), 0), ((7, 33), 1), ((7, 33), 0), ((3, 4, 5), -2), ((2, 0, 3), 1),
                                       ((), 0), ((1000,), -1)])
@pytest.mark.parametrize("descending", [False, True])
def test_sort_is_stable_like_torch(shape, dim, descending):
    x = _with_ties_and_nans(shape)
    values, indices = torch.sort(x, dim=dim, descending=descending, stable=True)
    outs = [out_for(values), out_for(indices)]
    v, i = kernels.call("aten::sort.values", x, dim, descending, *outs)
    same(v, values)
    same(i, indices)
    for stable in [None, True, False]:
        v, i = kernels.call("aten::sort.values_stable", x, stable, dim, descending, *outs)
        same(v, values)
        same(i, indices)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16, torch.int64, torch.int32, torch.int16, torch.int8,
                                   torch.uint8, torch.bool])
def test_sort_dtypes(dtype):
    if dtype.is_floating_point:
        x = _with_ties_and_nans((6, 40), dtype)
    elif dtype == torch.bool:
        x = torch.rand(6, 40) > 0.5
    else:
        info = torch.iinfo(dtype)
        x = torch.randint(info.min, info.max, (6, 40), dtype=dtype)
    for descending in [False, True]:
        values, indices = torch.sort(x, dim=1, descending=descending, stable=True)
        v, i = kernels.call("aten::sort.values", x, 1, descending, out_for(values), out_for(indices))
        same(v, values)
        same(i, indices)


def test_sort_extremes_of_int64_and_float64():
    x = torch.tensor([2**63 - 1, -2**63, 0, -1, 1, -2**63])
    values, indices = torch.sort(x, stable=True)
    v, i = kernels.call("aten::sort.values", x, 0, False, out_for(values), out_for(indices))
    same(v, values)
    same(i, indices)
    y = torch.tensor([float("inf"), -float("inf"), NAN, 1e-300, -1e-300, -0.0, 0.0], dtype=torch.float64)
    values, indices = torch.sort(y, descending=True, stable=True)
    v, i = kernels.call("aten::sort.values", y, 0, True, out_for(values), out_for(indices))
    same(v, values)
    same(i, indices)


@pytest.mark.parametrize("shape,k,dim", [((100,), 5, 0), ((100,), 100, 0), ((100,), 0, 0), ((6, 50), 3, 1),
                                         ((6, 50), 4, 0), ((3, 4, 5), 2, -2), ((0, 5), 2, 1), ((), 1, 0)])
@pytest.mark.parametrize("largest", [True, False])
def test_topk_matches_torch(shape, k, dim, largest):
    x = torch.randn(shape)
    if x.numel() > 3:
        x.view(-1)[1] = NAN
    values, indices = torch.topk(x, k, dim, largest, True)
    v, i = kernels.call("aten::topk.values", x, k, dim, largest, True, out_for(values), out_for(indices))
    same(v, values)
    same(i, indices)  # distinct values: the indices are determined
    v, i = kernels.call("aten::topk.values", x, k, dim, largest, False, out_for(values), out_for(indices))
    # Unsorted: the same set along dim, and values read from self at the indices.
    same(np.sort(v, axis=dim) if x.dim() else v, torch.sort(values, dim)[0])
    same(v, torch.gather(x, dim, torch.from_numpy(i)))


def test_topk_ties_dtypes_and_errors():
    x = torch.tensor([1.0, 3.0, 3.0, 0.0, 0.0, 3.0])
    v, i = kernels.call("aten::topk.values", x, 2, 0, True, True, Out((2,)), Out((2,), torch.int64))
    same(v, torch.tensor([3.0, 3.0]))
    assert set(i.tolist()) <= {1, 2, 5}
    for dtype in [torch.float16, torch.int32, torch.uint8, torch.float64, torch.int64]:
        for k, n in [(5, 16), (5, 200)]:  # selection, and a heap of k when k <= n / 16
            x = torch.randperm(n).remainder(250).to(dtype).reshape(1, n).repeat(4, 1)
            values, indices = torch.topk(x, k)
            v, i = kernels.call("aten::topk.values", x, k, -1, True, True, out_for(values), out_for(indices))
            same(v, values)
            same(i, indices)
    # Ties through the heap: values match, indices point at them.
    x = torch.randint(0, 4, (3, 400)).float()
    for largest in [True, False]:
        values, _ = torch.topk(x, 6, largest=largest)
        v, i = kernels.call("aten::topk.values", x, 6, 1, largest, True, out_for(values), Out((3, 6), torch.int64))
        same(v, values)
        same(v, torch.gather(x, 1, torch.from_numpy(i)))
        assert all(len(set(row)) == 6 for row in i.tolist())
    op = "aten::topk.values"
    expect_error(op, "k 4 is out of range", torch.ones(3), 4, 0, True, True, Out((4,)), Out((4,), torch.int64))
    expect_error(op, "k -1 is out of range", torch.ones(3), -1, 0, True, True, Out((0,)), Out((0,), torch.int64))
    expect_error(op, "bool", torch.ones(3, dtype=torch.bool), 1, 0, True, True, Out((1,), torch.bool),
                 Out((1,), torch.int64))


# --- argmax / argmin / max.dim / min.dim -----------------------------------------------------------------

@pytest.mark.parametrize("shape,dim", [((50,), None), ((7, 33), 1), ((7, 33), 0), ((3, 4, 5), -2), ((3, 4, 300), 1),
                                       ((), None), ((), 0), ((2, 0, 3), 2), ((5, 1000), None)])
@pytest.mark.parametrize("keepdim", [False, True])
def test_argmax_argmin_match_torch(shape, dim, keepdim):
    x = _with_ties_and_nans(shape) if len(shape) and shape[-1] < 100 else torch.randint(-50, 50, shape).float()
    for name, fn in [("argmax", torch.argmax), ("argmin", torch.argmin)]:
        expected = fn(x, dim=dim, keepdim=keepdim)
        (y,) = kernels.call(f"aten::{name}.out", x, dim, keepdim, out_for(expected))
        same(y, expected)


@pytest.mark.parametrize("dtype", [torch.float16, torch.float64, torch.int64, torch.int32, torch.int8, torch.uint8])
def test_argmax_dtypes(dtype):
    x = _with_ties_and_nans((5, 9), dtype) if dtype.is_floating_point else torch.randint(0, 4, (5, 9)).to(dtype)
    for dim in [None, 0, 1]:
        for name, fn in [("argmax", torch.argmax), ("argmin", torch.argmin)]:
            expected = fn(x, dim=dim)
            same(kernels.call(f"aten::{name}.out", x, dim, False, out_for(expected))[0], expected)


@pytest.mark.parametrize("shape,dim", [((50,), 0), ((7, 33), 1), ((7, 33), 0), ((3, 4, 300), 1), ((), 0),
                                       ((2, 0, 3), 2)])
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int16, torch.bool])
def test_max_min_dim_match_torch(shape, dim, keepdim, dtype):
    x = _with_ties_and_nans(shape, dtype) if dtype.is_floating_point else torch.randint(0, 3, shape).to(dtype)
    for name, fn in [("max.dim_max", torch.max), ("min.dim_min", torch.min)]:
        values, indices = fn(x, dim, keepdim)
        v, i = kernels.call(f"aten::{name}", x, dim, keepdim, out_for(values), out_for(indices))
        same(v, values)
        same(i, indices)


def test_reduction_errors():
    expect_error("aten::argmax.out", "needs a dim", torch.zeros(0), None, False, Out((), torch.int64))
    expect_error("aten::argmin.out", "which has size 0", torch.zeros(0, 3), 0, False, Out((3,), torch.int64))
    expect_error("aten::max.dim_max", "which has size 0", torch.zeros(0, 3), 0, False, Out((3,)),
                 Out((3,), torch.int64))
    expect_error("aten::min.dim_min", "dim 2 is out of range", torch.zeros(2, 3), 2, False, Out((2,)),
                 Out((2,), torch.int64))
    expect_error("aten::argmax.out", "must be int64", torch.zeros(3), 0, False, Out((), torch.int32))


# --- _embedding_bag ----------------------------------------------------------------------------------------

def _bag_inputs(index_dtype=torch.int64, offset_dtype=torch.int64):
    indices = torch.randint(0, 20, (23,), dtype=index_dtype)
    offsets = torch.tensor([0, 4, 4, 9, 15, 23], dtype=offset_dtype)  # an empty bag and an empty last bag
    return indices, offsets


def _check_bag(weight, indices, offsets, mode, psw, ilo, padding_idx, tol):
    expected = aten._embedding_bag(weight, indices, offsets, False, mode, False, psw, ilo, padding_idx)
    outs = [out_for(t) for t in expected]
    got = kernels.call("aten::_embedding_bag.out", weight, indices, offsets, False, mode, False, psw, ilo,
                       padding_idx, *outs)
    close(got[0], expected[0], **tol)
    for g, e in zip(got[1:], expected[1:]):
        same(g, e)


@pytest.mark.parametrize("mode", [0, 1, 2])
@pytest.mark.parametrize("include_last_offset", [False, True])
@pytest.mark.parametrize("padding_idx", [-1, 3])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
def test_embedding_bag_matches_torch(mode, include_last_offset, padding_idx, dtype):
    weight = torch.randn(20, 300).to(dtype)
    indices, offsets = _bag_inputs()
    indices[5] = 3  # the padding row at least once
    tol = dict(rtol=1e-2, atol=1e-2) if dtype == torch.float16 else dict(rtol=1e-5, atol=1e-5)
    _check_bag(weight, indices, offsets, mode, None, include_last_offset, padding_idx, tol)


@pytest.mark.parametrize("index_dtype,offset_dtype", [(torch.int32, torch.int32), (torch.int64, torch.int32),
                                                      (torch.int32, torch.int64)])
def test_embedding_bag_index_dtypes_and_per_sample_weights(index_dtype, offset_dtype):
    weight = torch.randn(20, 8)
    indices, offsets = _bag_inputs(index_dtype, offset_dtype)
    tol = dict(rtol=1e-5, atol=1e-5)
    _check_bag(weight, indices, offsets, 1, None, False, -1, tol)
    _check_bag(weight, indices, offsets, 0, torch.randn(23), False, -1, tol)
    _check_bag(weight.double(), indices, offsets, 0, torch.randn(23).double(), True, 2, tol)


def test_embedding_bag_max_nan_and_empty():
    weight = torch.tensor([[1.0, NAN], [NAN, 2.0], [3.0, 3.0]])
    _check_bag(weight, torch.tensor([0, 1, 2, 1, 0]), torch.tensor([0, 2]), 2, None, False, -1, {})
    _check_bag(weight, torch.tensor([], dtype=torch.int64), torch.tensor([0, 0]), 2, None, False, -1, {})
    _check_bag(weight, torch.tensor([0, 1]), torch.tensor([], dtype=torch.int64), 1, None, False, -1, {})


def test_embedding_bag_errors():
    op = "aten::_embedding_bag.out"
    weight = torch.randn(10, 3)
    outs = [Out((1, 3)), Out((2,), torch.int64), Out((1,), torch.int64), Out((1,), torch.int64)]
    message = expect_error(op, "index 10", weight, torch.tensor([1, 10]), torch.tensor([0]), False, 1, False, None,
                           False, -1, *outs)
    assert "position 1" in message and "10 rows" in message
    expect_error(op, "index -1", weight, torch.tensor([1, -1]), torch.tensor([0]), False, 1, False, None, False, -1,
                 *outs)
    expect_error(op, "offsets[0] must be 0", weight, torch.tensor([1, 2]), torch.tensor([1]), False, 1, False, None,
                 False, -1, *outs)
    expect_error(op, "past the end", weight, torch.tensor([1, 2]), torch.tensor([0, 3]), False, 1, False, None,
                 False, -1, *outs)
    expect_error(op, "must not decrease", weight, torch.tensor([1, 2]), torch.tensor([0, 2, 1]), False, 1, False,
                 None, False, -1, *outs)
    expect_error(op, "only supported with mode 0", weight, torch.tensor([1, 2]), torch.tensor([0]), False, 1, False,
                 torch.ones(2), False, -1, *outs)
    expect_error(op, "mode must be", weight, torch.tensor([1, 2]), torch.tensor([0]), False, 3, False, None, False,
                 -1, *outs)
    expect_error(op, "1-D", weight, torch.tensor([[1, 2]]), torch.tensor([0]), False, 1, False, None, False, -1,
                 *outs)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_half_scatter_accumulates_in_float(dtype):
    """Bit for bit with eager: sum/prod accumulate in float and round once; mean rounds the float
    sum, then the quotient (50 values land on 4 elements, so rounding every store would differ)."""
    for dim, shape, zshape in [(1, (3, 50), (3, 4)), (0, (50, 3), (4, 3)), (0, (40,), (5,))]:
        x = (torch.randn(*shape) + 0.5).to(dtype)
        index = torch.randint(0, zshape[dim], shape)
        z = torch.randn(*zshape).to(dtype)
        want = z.scatter_add(dim, index, x)
        (got,) = kernels.call("aten::scatter_add.out", z, dim, index, x, out_for(want))
        assert torch.equal(torch.as_tensor(got), want), f"scatter_add dim {dim}"
        for reduce in ["sum", "prod", "mean", "amax"]:
            for include_self in [True, False]:
                want = z.scatter_reduce(dim, index, x, reduce, include_self=include_self)
                (got,) = kernels.call("aten::scatter_reduce.two_out", z, dim, index, x, reduce, include_self,
                                      out_for(want))
                assert torch.equal(torch.as_tensor(got), want), f"{reduce} include_self={include_self} dim {dim}"
