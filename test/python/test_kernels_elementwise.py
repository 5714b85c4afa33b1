"""Portable elementwise, factory and copy kernels against PyTorch eager.

Each test calls one kernel through etmlir.runtime.kernels.call and compares
with the same ATen op run by PyTorch. Tolerances: exact for integer and bool
results; float32 rtol 1e-5 (plus atol 1e-5 for gelu, tanh, exp, sigmoid,
silu and hardswish, whose libm paths differ from PyTorch's vectorized ones
near zero); NaN positions must match.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from etmlir.runtime import kernels
from etmlir.runtime.kernels import Out

# c10::ScalarType values, as the .pte encodes `ScalarType? dtype`.
SCALAR_TYPE = {torch.uint8: 0, torch.int32: 3, torch.int64: 4, torch.float32: 6, torch.float64: 7, torch.bool: 11}

_gen = torch.Generator().manual_seed(0)


def rand(shape, dtype=torch.float32):
    """Random tensor: normal floats, small ints (incl. 0 and negatives), bools."""
    shape = tuple(shape)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=_gen, dtype=dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=_gen).bool()
    return torch.randint(-9, 10, shape, generator=_gen, dtype=dtype)


def out_like(t: torch.Tensor, dynamic: bool = False) -> Out:
    return Out(tuple(t.shape), t.dtype, dynamic)


def check(got: np.ndarray, want: torch.Tensor, rtol: float = 1e-5, atol: float = 0.0) -> None:
    want_np = want.numpy()
    assert got.shape == want_np.shape, f"shape {got.shape} != {want_np.shape}"
    assert got.dtype == want_np.dtype, f"dtype {got.dtype} != {want_np.dtype}"
    if want.dtype.is_floating_point:
        np.testing.assert_allclose(got, want_np, rtol=rtol, atol=atol, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, want_np)


def call1(name: str, *args) -> np.ndarray:
    (result,) = kernels.call(name, *args)
    return result


def raises_naming(op: str):
    return pytest.raises(Exception, match=re.escape(op))


# ---------------------------------------------------------------------------
# Binary arithmetic
# ---------------------------------------------------------------------------

BROADCAST_SHAPES = [
    ((2, 3), (2, 3)),
    ((2, 3), (3,)),  # last-dim broadcast
    ((3,), (2, 3)),  # broadcast on the left operand
    ((4, 1, 3), (2, 1)),  # both directions
    ((2, 1, 5), (1, 4, 1)),
    ((2, 3), ()),  # scalar tensor
    ((), (2, 3)),
    ((), ()),
    ((0, 3), (3,)),  # zero-size
    ((2, 0), (1, 1)),
    ((3, 1, 1, 7), (1, 5, 2, 7)),
]

BINARY = {
    "aten::add.out": lambda a, b: torch.add(a, b, alpha=2),
    "aten::sub.out": lambda a, b: torch.sub(a, b, alpha=3),
    "aten::mul.out": torch.mul,
    "aten::div.out": torch.div,
    "aten::maximum.out": torch.maximum,
    "aten::minimum.out": torch.minimum,
}


def binary_args(op, a, b, out):
    if op in ("aten::add.out", "aten::sub.out"):
        return (a, b, 2 if op == "aten::add.out" else 3, out)
    return (a, b, out)


@pytest.mark.parametrize("op", list(BINARY))
@pytest.mark.parametrize("shapes", BROADCAST_SHAPES, ids=str)
def test_binary_float_broadcast_matches_torch(op, shapes):
    a, b = rand(shapes[0]), rand(shapes[1])
    want = BINARY[op](a, b)
    check(call1(op, *binary_args(op, a, b, out_like(want))), want)


@pytest.mark.parametrize("op", list(BINARY))
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
@pytest.mark.parametrize("shapes", [((2, 3), (2, 3)), ((4, 1, 3), (2, 1)), ((5,), ())], ids=str)
def test_binary_int_matches_torch(op, dtype, shapes):
    a, b = rand(shapes[0], dtype), rand(shapes[1], dtype)
    want = BINARY[op](a, b)  # div: true division → float32
    check(call1(op, *binary_args(op, a, b, out_like(want))), want)


@pytest.mark.parametrize(
    "a_dtype,b_dtype,b_shape",
    [
        (torch.float32, torch.int64, (3,)),
        (torch.int64, torch.float32, (2, 3)),
        (torch.int32, torch.int64, (2, 3)),
        (torch.float32, torch.float64, ()),  # zero-dim double does not upgrade float32
        (torch.int32, torch.int64, ()),
        (torch.bool, torch.bool, (2, 3)),
        (torch.bool, torch.int32, (3,)),
        (torch.float64, torch.float64, (1, 3)),
    ],
)
@pytest.mark.parametrize("op", ["aten::add.out", "aten::mul.out", "aten::maximum.out"])
def test_binary_mixed_dtypes_promote_like_torch(op, a_dtype, b_dtype, b_shape):
    a, b = rand((2, 3), a_dtype), rand(b_shape, b_dtype)
    if op == "aten::add.out":
        want = torch.add(a, b)
        got = call1(op, a, b, 1, out_like(want))
    else:
        want = getattr(torch, op.split("::")[1].split(".")[0])(a, b)
        got = call1(op, a, b, out_like(want))
    check(got, want)


def test_binary_large_contiguous_and_row_broadcast():
    a, b, c = rand((64, 257)), rand((257,)), rand((64, 1))
    check(call1("aten::add.out", a, b, 1, Out((64, 257))), a + b)
    check(call1("aten::mul.out", a, c, Out((64, 257))), a * c)
    check(call1("aten::sub.out", c, a, 1, Out((64, 257))), c - a)


@pytest.mark.parametrize(
    "op,torch_fn,has_alpha",
    [
        ("aten::add.Scalar_out", lambda a, s: torch.add(a, s, alpha=2), True),
        ("aten::sub.Scalar_out", lambda a, s: torch.sub(a, s, alpha=2), True),
        ("aten::mul.Scalar_out", torch.mul, False),
        ("aten::div.Scalar_out", torch.div, False),
    ],
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.int32])
@pytest.mark.parametrize("scalar", [3, 2.5, -1])
def test_binary_scalar_variants(op, torch_fn, has_alpha, dtype, scalar):
    a = rand((3, 4), dtype)
    if has_alpha and not dtype.is_floating_point and isinstance(scalar, float):
        want = torch.add(a, scalar) if "add" in op else torch.sub(a, scalar)
        args = (a, scalar, 1)
    else:
        want = torch_fn(a, scalar)
        args = (a, scalar, 2) if has_alpha else (a, scalar)
    check(call1(op, *args, out_like(want)), want)


def test_mul_int_tensor_by_float_scalar_writes_float():
    a = rand((2, 5), torch.int64)
    check(call1("aten::mul.Scalar_out", a, 0.5, Out((2, 5), torch.float32)), a * 0.5)


def test_bool_add_is_logical_or_and_mul_is_and():
    a, b = rand((4, 4), torch.bool), rand((4,), torch.bool)
    check(call1("aten::add.out", a, b, 1, Out((4, 4), torch.bool)), a + b)
    check(call1("aten::mul.out", a, b, Out((4, 4), torch.bool)), a * b)


def test_maximum_minimum_propagate_nan():
    a = torch.tensor([1.0, float("nan"), 3.0, float("nan")])
    b = torch.tensor([float("nan"), 2.0, 1.0, float("nan")])
    check(call1("aten::maximum.out", a, b, Out((4,))), torch.maximum(a, b))
    check(call1("aten::minimum.out", a, b, Out((4,))), torch.minimum(a, b))


def test_binary_dynamic_out_runs_below_bound():
    a, b = rand((2, 3)), rand((3,))
    got = call1("aten::add.out", a, b, 1, Out((8, 8), dynamic=True))
    check(got, a + b)


@pytest.mark.parametrize("op", list(BINARY))
def test_binary_not_broadcastable_names_op_and_shapes(op):
    a, b = rand((2, 3)), rand((4,))
    with pytest.raises(Exception, match=re.escape(op) + r".*\[2, 3\].*\[4\]"):
        kernels.call(op, *binary_args(op, a, b, Out((2, 3))))


def test_binary_resize_beyond_bound_names_op():
    with raises_naming("aten::add.out"):
        kernels.call("aten::add.out", rand((4, 3)), rand((3,)), 1, Out((2, 3), dynamic=True))
    with raises_naming("aten::mul.out"):  # static out of the wrong shape
        kernels.call("aten::mul.out", rand((4, 3)), rand((3,)), Out((4, 2)))
    with raises_naming("aten::add.out"):  # wrong rank
        kernels.call("aten::add.out", rand((4, 3)), rand((3,)), 1, Out((12,), dynamic=True))


def test_binary_dtype_errors_name_op():
    with raises_naming("aten::add.out"):  # float result into an int out
        kernels.call("aten::add.out", rand((3,)), rand((3,)), 1, Out((3,), torch.int64))
    with raises_naming("aten::div.out"):  # true division into an int out
        kernels.call("aten::div.out", rand((3,), torch.int64), rand((3,), torch.int64), Out((3,), torch.int64))
    with raises_naming("aten::sub.out"):  # bool subtraction
        kernels.call("aten::sub.out", rand((3,), torch.bool), rand((3,), torch.bool), 1, Out((3,), torch.bool))
    with raises_naming("aten::add.out"):  # float alpha on int inputs
        kernels.call("aten::add.out", rand((3,), torch.int64), rand((3,), torch.int64), 1.5, Out((3,), torch.int64))
    with raises_naming("aten::mul.out"):  # int out for a float result
        kernels.call("aten::mul.out", rand((3,)), rand((3,)), Out((3,), np.int32))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_binary_half_types_compute_in_float(dtype):
    """float16/bfloat16 load to float, compute, and round back once, as PyTorch's CPU kernels do: exact match."""
    a, b = rand((5, 7)).to(dtype), rand((7,)).to(dtype)
    for name, args, want in [("aten::add.out", (a, b, 2), torch.add(a, b, alpha=2)),
                             ("aten::mul.out", (a, b), a * b), ("aten::div.out", (a, b), a / b)]:
        got = call1(name, *args, Out((5, 7), dtype))  # bfloat16 comes back as a torch tensor
        assert torch.equal(got if isinstance(got, torch.Tensor) else torch.from_numpy(got), want)


# ---------------------------------------------------------------------------
# Logical ops and where
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("op", ["logical_and", "logical_or"])
@pytest.mark.parametrize("dtypes", [(torch.bool, torch.bool), (torch.float32, torch.int64), (torch.int32, torch.bool)])
@pytest.mark.parametrize("shapes", [((3, 4), (3, 4)), ((3, 1), (1, 4)), ((0, 4), (4,)), ((), (2,))], ids=str)
def test_logical_binary(op, dtypes, shapes):
    a, b = rand(shapes[0], dtypes[0]), rand(shapes[1], dtypes[1])
    want = getattr(torch, op)(a, b)
    check(call1(f"aten::{op}.out", a, b, out_like(want)), want)


def test_logical_and_writes_float_out():
    a, b = rand((5,), torch.bool), rand((5,), torch.bool)
    check(call1("aten::logical_and.out", a, b, Out((5,), torch.float32)), torch.logical_and(a, b).float())


@pytest.mark.parametrize(
    "shapes",
    [((2, 3), (2, 3), (2, 3)), ((2, 1, 3), (4, 3), ()), ((3,), (2, 1), (1, 3)), ((), (2, 2), (2, 2)), ((0, 2), (2,), (2,))],
    ids=str,
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_where_broadcasts_three_ways(shapes, dtype):
    cond, a, b = rand(shapes[0], torch.bool), rand(shapes[1], dtype), rand(shapes[2], dtype)
    want = torch.where(cond, a, b)
    check(call1("aten::where.self_out", cond, a, b, out_like(want)), want)


def test_where_promotes_mixed_inputs():
    cond, a, b = rand((3, 4), torch.bool), rand((3, 4), torch.int64), rand((4,), torch.float32)
    want = torch.where(cond, a, b)
    check(call1("aten::where.self_out", cond, a, b, out_like(want)), want)


def test_where_rejects_float_condition():
    with raises_naming("aten::where.self_out"):
        kernels.call("aten::where.self_out", rand((3,)), rand((3,)), rand((3,)), Out((3,)))


# ---------------------------------------------------------------------------
# Comparisons
# ---------------------------------------------------------------------------

COMPARISONS = ["eq", "ne", "lt", "le", "gt", "ge"]


@pytest.mark.parametrize("op", COMPARISONS)
@pytest.mark.parametrize(
    "dtypes", [(torch.float32, torch.float32), (torch.int64, torch.int64), (torch.int32, torch.float32), (torch.bool, torch.bool)]
)
@pytest.mark.parametrize("shapes", [((3, 4), (3, 4)), ((3, 1), (4,)), ((), (2, 3)), ((0,), (1,))], ids=str)
def test_comparison_tensor(op, dtypes, shapes):
    a, b = rand(shapes[0], dtypes[0]), rand(shapes[1], dtypes[1])
    if dtypes[0] == torch.int32:
        b = b.round()  # make some elements equal
    want = getattr(torch, op)(a, b)
    check(call1(f"aten::{op}.Tensor_out", a, b, out_like(want)), want)


@pytest.mark.parametrize("op", COMPARISONS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.int32, torch.bool])
@pytest.mark.parametrize("scalar", [0, 1, 0.5, -2, True])
def test_comparison_scalar(op, dtype, scalar):
    a = rand((4, 5), dtype)
    want = getattr(torch, op)(a, scalar)
    check(call1(f"aten::{op}.Scalar_out", a, scalar, out_like(want)), want)


def test_comparison_nan_and_float32_scalar_rounding():
    a = torch.tensor([float("nan"), 0.1, 1.0, -0.0])
    for op in COMPARISONS:
        want = getattr(torch, op)(a, 0.1)  # 0.1 compared in float32, like PyTorch
        check(call1(f"aten::{op}.Scalar_out", a, 0.1, out_like(want)), want)
        want = getattr(torch, op)(a, a)
        check(call1(f"aten::{op}.Tensor_out", a, a, out_like(want)), want)


def test_comparison_errors_name_op():
    with raises_naming("aten::lt.Tensor_out"):
        kernels.call("aten::lt.Tensor_out", rand((2, 3)), rand((2,)), Out((2, 3), torch.bool))
    with raises_naming("aten::eq.Scalar_out"):
        kernels.call("aten::eq.Scalar_out", rand((2, 3)), 1, Out((3, 2), torch.bool))


# ---------------------------------------------------------------------------
# Unary ops
# ---------------------------------------------------------------------------

# name → (torch fn, extra args, atol)
UNARY_FLOAT = {
    "relu": (torch.relu, (), 0.0),
    "neg": (torch.neg, (), 0.0),
    "sigmoid": (torch.sigmoid, (), 1e-5),
    "tanh": (torch.tanh, (), 1e-5),
    "exp": (torch.exp, (), 1e-5),
    "sqrt": (torch.sqrt, (), 0.0),
    "rsqrt": (torch.rsqrt, (), 0.0),
    "hardswish": (torch.nn.functional.hardswish, (), 1e-5),
    "silu": (torch.nn.functional.silu, (), 1e-5),
    "gelu": (torch.nn.functional.gelu, ("none",), 1e-5),
    "hardtanh": (torch.nn.functional.hardtanh, (-0.5, 0.75), 0.0),
}


@pytest.mark.parametrize("name", list(UNARY_FLOAT))
@pytest.mark.parametrize("shape", [(3, 7), (), (0, 5), (2, 3, 40)], ids=str)
def test_unary_float_matches_torch(name, shape):
    fn, extra, atol = UNARY_FLOAT[name]
    x = rand(shape) * 3
    if name == "gelu":
        want = fn(x, approximate=extra[0])
    else:
        want = fn(x, *extra)
    check(call1(f"aten::{name}.out", x, *extra, out_like(want)), want, atol=atol)


@pytest.mark.parametrize("name", list(UNARY_FLOAT))
def test_unary_special_values(name):
    fn, extra, atol = UNARY_FLOAT[name]
    x = torch.tensor([float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 1e-30, 88.0, -88.0, 4.0])
    if name == "gelu":
        x = x[3:]  # PyTorch's gelu(+inf) is NaN (its inf * 0); ours is inf
    want = fn(x, approximate=extra[0]) if name == "gelu" else fn(x, *extra)
    check(call1(f"aten::{name}.out", x, *extra, out_like(want)), want, atol=atol)


# Float exp/tanh/sigmoid/silu/gelu use vectorizable polynomial math: checked
# over a dense range (incl. overflow, denormal and saturation regions)
# against the float64 result rounded to float32 (PyTorch's own vectorized
# float32 gelu is up to 1e-6 off there).
DENSE = {
    "exp": (torch.exp, (), torch.linspace(-105, 89, 20001), 1e-5, 1e-38),
    "tanh": (torch.tanh, (), torch.linspace(-12, 12, 20001), 1e-5, 1e-6),
    "sigmoid": (torch.sigmoid, (), torch.linspace(-105, 89, 20001), 1e-5, 1e-6),
    "silu": (torch.nn.functional.silu, (), torch.linspace(-105, 89, 20001), 1e-5, 1e-6),
    "gelu": (lambda x: torch.nn.functional.gelu(x), ("none",), torch.linspace(-12, 12, 20001), 1e-5, 1e-6),
    "gelu_tanh": (lambda x: torch.nn.functional.gelu(x, approximate="tanh"), ("tanh",), torch.linspace(-12, 12, 20001), 1e-5, 1e-6),
}


@pytest.mark.parametrize("name", list(DENSE))
def test_fast_float_math_dense_range(name):
    fn, extra, x, rtol, atol = DENSE[name]
    op = "aten::gelu.out" if name.startswith("gelu") else f"aten::{name}.out"
    want = fn(x.double()).float()
    check(call1(op, x, *extra, out_like(want)), want, rtol=rtol, atol=atol)
    # float64 goes through libm: tight.
    xd = x.double()
    check(call1(op, xd, *extra, out_like(fn(xd))), fn(xd), rtol=1e-12, atol=1e-12)


def test_gelu_tanh_approximation():
    x = rand((4, 33)) * 4
    want = torch.nn.functional.gelu(x, approximate="tanh")
    check(call1("aten::gelu.out", x, "tanh", out_like(want)), want, atol=1e-5)


def test_gelu_rejects_unknown_approximation():
    with pytest.raises(Exception, match=r"aten::gelu\.out.*approximate.*erf"):
        kernels.call("aten::gelu.out", rand((3,)), "erf", Out((3,)))


@pytest.mark.parametrize("name", ["relu", "neg", "hardtanh", "clamp"])
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
def test_unary_int_stays_int(name, dtype):
    x = rand((5, 6), dtype)
    if name == "hardtanh":
        args, want = (-3, 4), torch.nn.functional.hardtanh(x, -3, 4)
    elif name == "clamp":
        args, want = (-2, 5), torch.clamp(x, -2, 5)
    else:
        args, want = (), getattr(torch, name)(x)
    check(call1(f"aten::{name}.out", x, *args, out_like(want)), want)


@pytest.mark.parametrize("name", ["sigmoid", "exp", "sqrt", "tanh"])
def test_unary_int_input_writes_float(name):
    x = rand((4, 4), torch.int64).abs()
    want = getattr(torch, name)(x)
    check(call1(f"aten::{name}.out", x, out_like(want)), want, atol=1e-5)


@pytest.mark.parametrize("lo,hi", [(-0.5, 0.5), (None, 0.25), (-0.25, None), (1.0, -1.0), (0, 1)])
def test_clamp_bounds(lo, hi):
    x = torch.cat([rand((20,)), torch.tensor([float("nan"), float("inf"), -float("inf")])])
    want = torch.clamp(x, lo, hi)
    check(call1("aten::clamp.out", x, lo, hi, out_like(want)), want)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
def test_clamp_int_extremes_with_one_bound(dtype):
    info = torch.iinfo(dtype)
    x = torch.tensor([info.min, -1, 0, info.max], dtype=dtype)
    check(call1("aten::clamp.out", x, None, 0, out_like(x)), torch.clamp(x, None, 0))
    check(call1("aten::clamp.out", x, 0, None, out_like(x)), torch.clamp(x, 0, None))


@pytest.mark.parametrize("lo,hi", [(float("nan"), 1.0), (0.0, float("nan")), (None, float("nan"))])
def test_clamp_and_hardtanh_nan_bound_gives_nan(lo, hi):
    x = rand((7,))
    check(call1("aten::clamp.out", x, lo, hi, Out((7,))), torch.clamp(x, lo, hi))
    if lo is not None:
        want = torch.nn.functional.hardtanh(x, lo, hi)
        check(call1("aten::hardtanh.out", x, lo, hi, Out((7,))), want)


def test_clamp_int_tensor_float_bound_writes_float():
    x = rand((6,), torch.int64)
    want = torch.clamp(x, 0.5, 3.5)
    check(call1("aten::clamp.out", x, 0.5, 3.5, out_like(want)), want)


def test_clamp_without_bounds_fails():
    with raises_naming("aten::clamp.out"):
        kernels.call("aten::clamp.out", rand((3,)), None, None, Out((3,)))


@pytest.mark.parametrize("dtype", [torch.bool, torch.float32, torch.int64])
def test_logical_not(dtype):
    x = rand((3, 5), dtype)
    x.view(-1)[0] = 0
    want = torch.logical_not(x)
    check(call1("aten::logical_not.out", x, out_like(want)), want)


def test_unary_errors_name_op():
    with raises_naming("aten::neg.out"):
        kernels.call("aten::neg.out", rand((3,), torch.bool), Out((3,), torch.bool))
    with raises_naming("aten::sigmoid.out"):
        kernels.call("aten::sigmoid.out", rand((3,)), Out((3,), torch.int64))
    with raises_naming("aten::relu.out"):
        kernels.call("aten::relu.out", rand((3, 4)), Out((3, 3), dynamic=True))


def test_unary_dynamic_out_resized_smaller():
    x = rand((2, 3))
    check(call1("aten::tanh.out", x, Out((5, 5), dynamic=True)), torch.tanh(x), atol=1e-5)


# ---------------------------------------------------------------------------
# Factories
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.int32, torch.bool, torch.float64])
@pytest.mark.parametrize("value", [2, -1.5, True])
@pytest.mark.parametrize("size", [[2, 3], [], [0, 4]], ids=str)
def test_full(dtype, value, size):
    want = torch.full(size, value, dtype=dtype)
    check(call1("aten::full.out", size, value, Out(tuple(size), dtype)), want)


def test_full_dynamic_out_and_bounds():
    check(call1("aten::full.out", [2, 2], 7, Out((4, 4), torch.int64, dynamic=True)), torch.full((2, 2), 7))
    with raises_naming("aten::full.out"):
        kernels.call("aten::full.out", [5, 2], 7, Out((4, 4), torch.int64, dynamic=True))
    with raises_naming("aten::full.out"):
        kernels.call("aten::full.out", [-1, 2], 7, Out((4, 4), torch.int64, dynamic=True))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.bool])
def test_full_like_zeros_ones(dtype):
    x = rand((3, 2), dtype)
    check(call1("aten::full_like.out", x, 3, None, Out((3, 2), dtype)), torch.full_like(x, 3))
    check(call1("aten::full_like.out", x, 3, 1, Out((3, 2), dtype)), torch.full_like(x, 3))  # preserve_format
    check(call1("aten::zeros.out", [3, 2], Out((3, 2), dtype)), torch.zeros((3, 2), dtype=dtype))
    check(call1("aten::ones.out", [3, 2], Out((3, 2), dtype)), torch.ones((3, 2), dtype=dtype))
    with raises_naming("aten::full_like.out"):
        kernels.call("aten::full_like.out", x, 3, 2, Out((3, 2), dtype))  # channels_last


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
@pytest.mark.parametrize("value", [4, 2.5, False])
def test_scalar_tensor(dtype, value):
    want = torch.scalar_tensor(value, dtype=dtype)
    check(call1("aten::scalar_tensor.out", value, Out((), dtype)), want)


@pytest.mark.parametrize(
    "start,end,step", [(0, 10, 3), (10, 0, -3), (1.0, 2.0, 0.3), (-2.5, 3, 0.5), (5, 5, 1), (0, 7, 1), (0.5, 3, 1)]
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.int32, torch.float64])
def test_arange_resizes_dynamic_out(start, end, step, dtype):
    out = Out((64,), dtype, dynamic=True)
    try:
        want = torch.arange(start, end, step, dtype=dtype)
    except (RuntimeError, ValueError):  # e.g. int64 with step 0.3 (truncated to 0): we must fail too
        with raises_naming("aten::arange.start_out"):
            kernels.call("aten::arange.start_out", start, end, step, out)
        return
    check(call1("aten::arange.start_out", start, end, step, out), want)


def test_arange_end_only():
    check(call1("aten::arange.out", 5, Out((5,), torch.int64)), torch.arange(5))


def test_arange_errors_name_op():
    with raises_naming("aten::arange.start_out"):  # zero step
        kernels.call("aten::arange.start_out", 0, 5, 0, Out((8,), torch.int64, dynamic=True))
    with raises_naming("aten::arange.start_out"):  # step sign against the range
        kernels.call("aten::arange.start_out", 0, 5, -1, Out((8,), torch.float32, dynamic=True))
    with raises_naming("aten::arange.start_out"):  # longer than the bound
        kernels.call("aten::arange.start_out", 0, 100, 1, Out((8,), torch.int64, dynamic=True))
    with raises_naming("aten::arange.start_out"):  # huge length
        kernels.call("aten::arange.start_out", -(2**62), 2**62, 1, Out((8,), torch.int64, dynamic=True))
    with raises_naming("aten::arange.start_out"):
        kernels.call("aten::arange.start_out", 0.0, float("inf"), 1.0, Out((8,), torch.float32, dynamic=True))


# ---------------------------------------------------------------------------
# Copies
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "shape,size", [((2, 3, 4), [6, 4]), ((2, 3, 4), [-1, 2]), ((2, 3, 4), [4, -1, 3]), ((), [1, 1]), ((0, 3), [3, -1]), ((5,), [])]
)
def test_view_copy(shape, size):
    x = rand(shape) if shape != (5,) else rand((1,))
    want = x.reshape(size)
    check(call1("aten::view_copy.out", x, size, out_like(want)), want)


@pytest.mark.parametrize("size", [[-1, -1], [5, 5], [-1, 0], [-3, 8]], ids=str)
def test_view_copy_invalid_size(size):
    with raises_naming("aten::view_copy.out"):
        kernels.call("aten::view_copy.out", rand((2, 4)), size, Out((8, 1), dynamic=True))


@pytest.mark.parametrize(
    "shape,dims", [((2, 3, 4), [2, 0, 1]), ((2, 3, 4), [-1, -2, -3]), ((5, 7), [1, 0]), ((), []), ((2, 1, 3, 4), [0, 2, 1, 3]), ((0, 3), [1, 0])]
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_permute_copy(shape, dims, dtype):
    x = rand(shape, dtype)
    want = x.permute(dims)
    check(call1("aten::permute_copy.out", x, dims, out_like(want)), want)


@pytest.mark.parametrize(
    "shape,dims", [((37, 45), [1, 0]), ((3, 20, 17), [2, 1, 0]), ((2, 33, 9, 5), [0, 3, 1, 2]), ((9, 1, 70), [2, 1, 0])]
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.int8, torch.float16, torch.int64])
def test_permute_copy_transposes_in_tiles(shape, dims, dtype):
    # Sizes that are not multiples of the tile, and 1/2/4/8-byte elements.
    x = (rand(shape) * 50).to(dtype)
    want = x.permute(dims)
    check(call1("aten::permute_copy.out", x, dims, out_like(want)), want)


@pytest.mark.parametrize("dims", [[0, 0, 1], [0, 1], [0, 1, 3]], ids=str)
def test_permute_copy_invalid_dims(dims):
    with raises_naming("aten::permute_copy.out"):
        kernels.call("aten::permute_copy.out", rand((2, 3, 4)), dims, Out((2, 3, 4)))


@pytest.mark.parametrize(
    "shape,size",
    [((3, 1), [3, 4]), ((3, 1), [-1, 4]), ((1,), [2, 3, 5]), ((), [2, 2]), ((2, 1, 3), [4, 2, 5, -1]), ((3, 1), [3, 0])],
)
def test_expand_copy(shape, size):
    x = rand(shape)
    want = x.expand(size)
    check(call1("aten::expand_copy.out", x, size, False, out_like(want)), want)


@pytest.mark.parametrize("size", [[4, 4], [-1, 3, 1]], ids=str)
def test_expand_copy_invalid(size):
    with raises_naming("aten::expand_copy.out"):
        kernels.call("aten::expand_copy.out", rand((3, 1)), size, False, Out((4, 4), dynamic=True))


@pytest.mark.parametrize("dim", [0, 1, 2, -1, -3])
def test_unsqueeze_copy(dim):
    x = rand((2, 3), torch.int32)
    want = x.unsqueeze(dim)
    check(call1("aten::unsqueeze_copy.out", x, dim, out_like(want)), want)


def test_unsqueeze_copy_dim_out_of_range():
    with raises_naming("aten::unsqueeze_copy.out"):
        kernels.call("aten::unsqueeze_copy.out", rand((2, 3)), 3, Out((2, 3, 1)))


@pytest.mark.parametrize("shape,dims", [((2, 1, 3, 1), [1, 3]), ((2, 1, 3, 1), [-1]), ((2, 1, 3), [0]), ((1,), [0]), ((), [0])])
def test_squeeze_copy_dims(shape, dims):
    x = rand(shape)
    want = torch.squeeze(x, dims)
    check(call1("aten::squeeze_copy.dims_out", x, dims, out_like(want)), want)


@pytest.mark.parametrize("shape,splits,dim", [((5, 4), [2, 3], 0), ((2, 6, 3), [1, 0, 5], -2), ((3, 4), [4], 1), ((0, 4), [0, 0], 0)])
def test_split_with_sizes_copy(shape, splits, dim):
    x = rand(shape)
    want = torch.split(x, splits, dim)
    got = kernels.call("aten::split_with_sizes_copy.out", x, splits, dim, [out_like(w) for w in want])
    assert len(got) == len(want)
    for g, w in zip(got, want):
        check(g, w)


def test_split_with_sizes_copy_errors():
    x = rand((5, 4))
    with raises_naming("aten::split_with_sizes_copy.out"):  # sizes do not sum to the dim
        kernels.call("aten::split_with_sizes_copy.out", x, [2, 2], 0, [Out((2, 4)), Out((2, 4))])
    with raises_naming("aten::split_with_sizes_copy.out"):  # one out per split
        kernels.call("aten::split_with_sizes_copy.out", x, [2, 3], 0, [Out((2, 4))])
    with raises_naming("aten::split_with_sizes_copy.out"):  # out shape
        kernels.call("aten::split_with_sizes_copy.out", x, [2, 3], 0, [Out((2, 4)), Out((2, 4))])


@pytest.mark.parametrize(
    "dim,start,end,step",
    [(0, 1, 4, 1), (1, None, None, 2), (-1, -3, None, 1), (0, 2, 100, 3), (1, 5, 2, 1), (0, -100, 2, 1), (1, 0, -1, 4)],
)
def test_slice_copy(dim, start, end, step):
    x = rand((6, 7, 2), torch.int64)
    want = torch.ops.aten.slice_copy.Tensor(x, dim, start, end, step)
    got = call1("aten::slice_copy.Tensor_out", x, dim, start, end, step, Out(tuple(x.shape), torch.int64, dynamic=True))
    check(got, want)


def test_slice_copy_rejects_nonpositive_step():
    with raises_naming("aten::slice_copy.Tensor_out"):
        kernels.call("aten::slice_copy.Tensor_out", rand((4,)), 0, 0, 4, 0, Out((4,), dynamic=True))


@pytest.mark.parametrize("dim,index", [(0, 1), (1, -1), (-1, 0), (2, 3)])
def test_select_copy(dim, index):
    x = rand((3, 4, 5))
    want = x.select(dim, index)
    check(call1("aten::select_copy.int_out", x, dim, index, out_like(want)), want)


def test_select_copy_index_out_of_range():
    with raises_naming("aten::select_copy.int_out"):
        kernels.call("aten::select_copy.int_out", rand((3, 4)), 1, 4, Out((3,)))


@pytest.mark.parametrize(
    "shapes,dim", [([(2, 3), (4, 3)], 0), ([(2, 3), (2, 1), (2, 0)], -1), ([(1, 2, 3)] * 3, 1), ([(0,), (2, 3)], 1), ([(3,)], 0)]
)
def test_cat(shapes, dim):
    xs = [rand(s) for s in shapes]
    want = torch.cat(xs, dim)
    check(call1("aten::cat.out", xs, dim, out_like(want)), want)


def test_cat_promotes_mixed_dtypes():
    xs = [rand((2, 2), torch.int64), rand((1, 2), torch.float32), rand((1, 2), torch.bool)]
    want = torch.cat(xs)
    check(call1("aten::cat.out", xs, 0, out_like(want)), want)


def test_cat_shape_mismatch_names_op():
    with raises_naming("aten::cat.out"):
        kernels.call("aten::cat.out", [rand((2, 3)), rand((2, 4))], 0, Out((4, 3), dynamic=True))


def test_clone():
    x = rand((3, 0, 2))
    check(call1("aten::clone.out", x, None, out_like(x)), x)
    x = rand((4, 5), torch.int32)
    check(call1("aten::clone.out", x, 0, out_like(x)), x)


@pytest.mark.parametrize(
    "src,dst",
    [
        (torch.float32, torch.int64),
        (torch.int64, torch.float32),
        (torch.bool, torch.float32),
        (torch.float32, torch.bool),
        (torch.int32, torch.int64),
        (torch.float32, torch.float64),
        (torch.uint8, torch.float32),
        (torch.float32, torch.float32),
    ],
)
def test_to_copy_converts_dtype(src, dst):
    if src == torch.uint8:
        x = torch.randint(0, 256, (3, 4), generator=_gen, dtype=torch.uint8)
    else:
        x = rand((3, 4), src) * 5 if src.is_floating_point else rand((3, 4), src)
    want = x.to(dst)
    check(call1("aten::_to_copy.out", x, False, None, Out((3, 4), dst)), want)


def test_to_dim_order_copy():
    x = rand((2, 3, 4))
    want = x.to(torch.int32)
    got = call1("etmlir::_to_dim_order_copy.out", x, SCALAR_TYPE[torch.int32], False, [0, 1, 2], Out((2, 3, 4), torch.int32))
    check(got, want)
    check(call1("etmlir::_to_dim_order_copy.out", x, None, False, None, Out((2, 3, 4))), x)
    # A layout request (any permutation) changes no value: the runtime's tensors are contiguous.
    check(call1("etmlir::_to_dim_order_copy.out", x, None, False, [0, 2, 1], Out((2, 3, 4))), x)
    for bad in ([0, 0, 1], [0, 1], [0, 1, 3]):
        with pytest.raises(Exception, match=r"etmlir::_to_dim_order_copy\.out.*dim_order"):
            kernels.call("etmlir::_to_dim_order_copy.out", x, None, False, bad, Out((2, 3, 4)))
    with pytest.raises(Exception, match=r"etmlir::_to_dim_order_copy\.out.*dtype"):
        kernels.call("etmlir::_to_dim_order_copy.out", x, SCALAR_TYPE[torch.int64], False, None, Out((2, 3, 4)))


def test_copy_ops_reject_dtype_mismatch():
    with raises_naming("aten::view_copy.out"):
        kernels.call("aten::view_copy.out", rand((2, 3)), [6], Out((6,), torch.int64))
    with raises_naming("aten::permute_copy.out"):
        kernels.call("aten::permute_copy.out", rand((2, 3)), [1, 0], Out((3, 2), torch.int32))
