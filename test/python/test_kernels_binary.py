"""Portable binary and comparison kernels against PyTorch eager.

Covers the kernels of binary_ops.cpp added for the Core ATen op set (atan2,
bitwise_and/or/xor, clamp.Tensor, div with rounding_mode, fmod, remainder,
pow, logical_xor), the dtypes the edge table allows for the older ones, and
comparison_ops.cpp (eq/ne/lt/le/gt/ge) in every dtype. Each test calls one
kernel through etmlir.runtime.kernels.call and compares with the same ATen op
run by PyTorch.

Tolerances: exact for integer and bool results and for the float ops that are
exact in IEEE arithmetic (fmod, remainder, rounding division, clamp,
comparisons); atan2 and pow rtol 1e-6 for float32 and 1e-12 for float64
(libm against PyTorch's vectorized Sleef paths, 1-2 ulp; sqrt for pow(x, 0.5)
is correctly rounded here, PyTorch's is not always); float16 results within
one float16 ulp (rtol 1e-3). NaN positions must match everywhere.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from etmlir.runtime import kernels
from etmlir.runtime.kernels import Out

_gen = torch.Generator().manual_seed(0)

INTS = [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8]
FLOATS = [torch.float32, torch.float64, torch.float16]


def rand(shape, dtype=torch.float32, low=-9, high=10):
    """Random tensor: normal floats (scaled), small ints (incl. 0 and negatives), bools."""
    shape = tuple(shape)
    if dtype.is_floating_point:
        return (torch.randn(shape, generator=_gen, dtype=torch.float64) * 4).to(dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=_gen).bool()
    if dtype == torch.uint8:
        low = max(low, 0)
    return torch.randint(low, high, shape, generator=_gen, dtype=dtype)


def nonzero(shape, dtype):
    """Random ints without zeros (divisors)."""
    t = rand(shape, dtype)
    return torch.where(t == 0, torch.ones_like(t), t)


def run(name: str, *args, want: torch.Tensor, dynamic: bool = False) -> np.ndarray:
    (result,) = kernels.call(name, *args, Out(tuple(want.shape), want.dtype, dynamic))
    return result


def check(got: np.ndarray, want: torch.Tensor, rtol: float = 0.0) -> None:
    want_np = want.numpy()
    assert got.shape == want_np.shape, f"shape {got.shape} != {want_np.shape}"
    assert got.dtype == want_np.dtype, f"dtype {got.dtype} != {want_np.dtype}"
    if want.dtype.is_floating_point:
        np.testing.assert_allclose(got.astype(np.float64), want_np.astype(np.float64), rtol=rtol, atol=0,
                                   equal_nan=True)
        zero = want_np == 0  # signed zeros are part of the semantics
        assert np.array_equal(np.signbit(got[zero]), np.signbit(want_np[zero])), f"signed zeros: {got} vs {want_np}"
    else:
        np.testing.assert_array_equal(got, want_np)


def float_rtol(dtype, exact: bool) -> float:
    if dtype == torch.float16:
        return 1e-3
    if exact:
        return 0.0
    return 1e-6 if dtype == torch.float32 else 1e-12


def raises_naming(op: str, message: str = ""):
    return pytest.raises(Exception, match=re.escape(op) + ".*" + message)


BROADCAST_SHAPES = [
    ((2, 3), (2, 3)),
    ((2, 3), (3,)),
    ((3,), (2, 3)),
    ((4, 1, 3), (2, 1)),
    ((2, 3), ()),
    ((), (2, 3)),
    ((), ()),
    ((0, 3), (3,)),
    ((3, 1, 1, 7), (1, 5, 2, 7)),
]

# name → (torch function, exact in IEEE arithmetic)
TENSOR_OPS = {
    "aten::atan2.out": (torch.atan2, False),
    "aten::fmod.Tensor_out": (torch.fmod, True),
    "aten::remainder.Tensor_out": (torch.remainder, True),
    "aten::pow.Tensor_Tensor_out": (torch.pow, False),
    "aten::logical_xor.out": (torch.logical_xor, True),
}


# ---------------------------------------------------------------------------
# Tensor-Tensor ops: broadcasting and dtypes
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("op", list(TENSOR_OPS) + ["floor", "trunc"])
@pytest.mark.parametrize("shapes", BROADCAST_SHAPES, ids=str)
def test_float_broadcast_matches_torch(op, shapes):
    a, b = rand(shapes[0]), rand(shapes[1])
    if op in ("floor", "trunc"):
        want = torch.div(a, b, rounding_mode=op)
        check(run("aten::div.out_mode", a, b, op, want=want), want)
        return
    fn, exact = TENSOR_OPS[op]
    if op.startswith("aten::pow"):
        a = a.abs()  # no NaN from fractional powers of negatives everywhere
    want = fn(a, b)
    check(run(op, a, b, want=want), want, float_rtol(torch.float32, exact))


@pytest.mark.parametrize("op", list(TENSOR_OPS))
@pytest.mark.parametrize("dtype", FLOATS + INTS)
def test_tensor_ops_every_dtype(op, dtype):
    fn, exact = TENSOR_OPS[op]
    a, b = rand((3, 5), dtype), rand((5,), dtype)
    if op in ("aten::fmod.Tensor_out", "aten::remainder.Tensor_out") and not dtype.is_floating_point:
        b = nonzero((5,), dtype)
    if op == "aten::pow.Tensor_Tensor_out":
        a = a.abs() if dtype.is_floating_point else a
        b = rand((5,), dtype, -3, 6) if not dtype.is_floating_point else b
    want = fn(a, b)
    check(run(op, a, b, want=want), want, float_rtol(dtype, exact))


@pytest.mark.parametrize(
    "a_dtype, b_dtype",
    [(torch.int32, torch.float32), (torch.uint8, torch.int8), (torch.float16, torch.float32),
     (torch.int64, torch.float64), (torch.bool, torch.int16)],
)
@pytest.mark.parametrize("op", ["aten::atan2.out", "aten::remainder.Tensor_out", "aten::fmod.Tensor_out",
                                "aten::pow.Tensor_Tensor_out"])
def test_mixed_dtypes_promote_like_torch(op, a_dtype, b_dtype):
    fn, exact = TENSOR_OPS[op]
    a = rand((4, 3), a_dtype)
    b = nonzero((3,), b_dtype) if not b_dtype.is_floating_point else rand((3,), b_dtype)
    if op.startswith("aten::pow"):
        a = a.abs() if a_dtype.is_floating_point else a
        b = b.abs() if b_dtype != torch.uint8 else b
    want = fn(a, b)
    check(run(op, a, b, want=want), want, float_rtol(want.dtype, exact))


def test_zero_dim_tensor_converts_to_result_type_first():
    u = torch.tensor([100, 200, 45], dtype=torch.uint8)
    big = torch.tensor(300)  # a 0-d int64 tensor wraps to uint8's 44, as in PyTorch
    for op, fn in [("aten::remainder.Tensor_out", torch.remainder), ("aten::fmod.Tensor_out", torch.fmod),
                   ("aten::bitwise_or.Tensor_out", torch.bitwise_or)]:
        want = fn(u, big)
        check(run(op, u, big, want=want), want)
    want = torch.remainder(big, u)  # the 0-d tensor as self
    check(run("aten::remainder.Tensor_out", big, u, want=want), want)


# ---------------------------------------------------------------------------
# Division with rounding_mode, fmod, remainder
# ---------------------------------------------------------------------------

SIGNS_A = [-7, 7, -7, 7, -6, 6, 0, 1, -1]
SIGNS_B = [2, 2, -2, -2, 3, -3, 5, -5, 5]


@pytest.mark.parametrize("mode", ["floor", "trunc", None])
@pytest.mark.parametrize("dtype", INTS + FLOATS)
def test_div_rounding_signs(mode, dtype):
    a, b = torch.tensor(SIGNS_A), torch.tensor(SIGNS_B)
    if dtype == torch.uint8:
        a, b = a.abs(), b.abs()
    a, b = a.to(dtype), b.to(dtype)
    want = torch.div(a, b, rounding_mode=mode)
    check(run("aten::div.out_mode", a, b, mode, want=want), want, float_rtol(want.dtype, True))
    want = torch.div(a, 4, rounding_mode=mode)
    check(run("aten::div.Scalar_mode_out", a, 4, mode, want=want), want, float_rtol(want.dtype, True))


def test_div_rounding_float_specials():
    a = torch.tensor([1.0, -1.0, 0.0, -0.0, 5.0, float("inf"), float("nan"), 1e30, -7.5, 0.3])
    b = torch.tensor([0.0, 0.0, 0.0, 3.0, float("inf"), 2.0, 1.0, 1e-10, -0.5, 0.1])
    for mode in ["floor", "trunc"]:
        for dtype in [torch.float32, torch.float64]:
            want = torch.div(a.to(dtype), b.to(dtype), rounding_mode=mode)
            check(run("aten::div.out_mode", a.to(dtype), b.to(dtype), mode, want=want), want)
    want = torch.div(torch.tensor([-7, 7]), 2.5, rounding_mode="floor")  # int / float Scalar → float
    check(run("aten::div.Scalar_mode_out", torch.tensor([-7, 7]), 2.5, "floor", want=want), want)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16, torch.int8])
def test_integer_minimum_divided_by_minus_one_wraps(dtype):
    lo = torch.iinfo(dtype).min
    a, b = torch.tensor([lo, lo, 5], dtype=dtype), torch.tensor([-1, 1, -1], dtype=dtype)
    want = torch.tensor([lo, lo, -5], dtype=dtype)  # PyTorch itself traps on int64 trunc division here
    for mode in ["floor", "trunc"]:
        check(run("aten::div.out_mode", a, b, mode, want=want), want)
    zeros = torch.zeros(3, dtype=dtype)
    check(run("aten::remainder.Tensor_out", a, b, want=zeros), zeros)
    check(run("aten::fmod.Tensor_out", a, b, want=zeros), zeros)


@pytest.mark.parametrize(
    "call",
    [
        ("aten::div.out_mode", torch.tensor([5, 6]), torch.tensor([1, 0]), "floor"),
        ("aten::div.out_mode", torch.tensor([5, 6], dtype=torch.int32), torch.tensor([0, 1], dtype=torch.int32), "trunc"),
        ("aten::div.Scalar_mode_out", torch.tensor([5, 6]), 0, "trunc"),
        ("aten::fmod.Tensor_out", torch.tensor([5, 6], dtype=torch.int8), torch.tensor([0, 1], dtype=torch.int8)),
        ("aten::fmod.Scalar_out", torch.tensor([5, 6]), 0),
        ("aten::remainder.Tensor_out", torch.tensor([5, 6]), torch.tensor([3, 0])),
        ("aten::remainder.Scalar_out", torch.tensor([5, 6], dtype=torch.uint8), 256),  # wraps to 0
    ],
    ids=lambda c: c[0] if isinstance(c, tuple) else str(c),
)
def test_integer_division_by_zero_is_an_error(call):
    name, *args = call
    dtype = args[0].dtype
    with raises_naming(name, "division by zero"):
        kernels.call(name, *args, Out((2,), dtype))


@pytest.mark.parametrize("op, fn", [("fmod", torch.fmod), ("remainder", torch.remainder)])
def test_fmod_remainder_signs_and_specials(op, fn):
    a = torch.tensor([-7.0, 7.0, -7.0, 7.0, -0.0, 0.0, 5.0, -5.0, 5.0, -5.0, float("inf"), float("nan"), 3.0, 5.5])
    b = torch.tensor([2.0, 2.0, -2.0, -2.0, 3.0, -3.0, 0.0, float("inf"), float("-inf"), float("-inf"), 2.0, 1.0,
                      float("nan"), 1.5])
    for dtype in [torch.float32, torch.float64]:
        want = fn(a.to(dtype), b.to(dtype))
        check(run(f"aten::{op}.Tensor_out", a.to(dtype), b.to(dtype), want=want), want)
    ai, bi = torch.tensor(SIGNS_A), torch.tensor(SIGNS_B)
    want = fn(ai, bi)
    check(run(f"aten::{op}.Tensor_out", ai, bi, want=want), want)
    for scalar in [3, -3, 2.5, -0.75]:
        want = fn(ai, scalar)
        check(run(f"aten::{op}.Scalar_out", ai, scalar, want=want), want)
        want = fn(a, scalar)
        check(run(f"aten::{op}.Scalar_out", a, scalar, want=want), want)


def test_scalar_wraps_into_small_int_result():
    u = torch.tensor([100, 200, 45], dtype=torch.uint8)
    for name, fn in [("remainder", torch.remainder), ("fmod", torch.fmod)]:
        want = fn(u, 300)  # 300 is uint8's 44
        check(run(f"aten::{name}.Scalar_out", u, 300, want=want), want)


# ---------------------------------------------------------------------------
# pow
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", INTS)
def test_pow_integer_negative_exponents_and_wrapping(dtype):
    base = torch.tensor([0, 0, 1, 1, -1, -1, 2, 3, -3, 7, 2], dtype=torch.int64)
    exp = torch.tensor([-1, 0, -5, 3, -3, -4, -2, 5, 3, 30, 63], dtype=torch.int64)
    if dtype == torch.uint8:
        base, exp = base.abs(), exp.abs()
    base, exp = base.to(dtype), exp.to(dtype)
    want = torch.pow(base, exp)
    check(run("aten::pow.Tensor_Tensor_out", base, exp, want=want), want)


@pytest.mark.parametrize("exponent", [2, 3, -2, 0.5, -0.5, -1, 0, 1, 1.7, -3.25, True, 2.0])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
def test_pow_scalar_exponent_fast_paths(exponent, dtype):
    x = torch.tensor([-0.0, 0.0, float("-inf"), float("inf"), float("nan"), -2.0, 2.0, 0.5, 3.7, -1.5, 1e-3],
                     dtype=dtype)
    want = torch.pow(x, exponent)
    check(run("aten::pow.Tensor_Scalar_out", x, exponent, want=want), want, float_rtol(dtype, False))


@pytest.mark.parametrize("dtype", INTS + [torch.bool])
@pytest.mark.parametrize("exponent", [0, 1, 2, 3, 5, 2.5])
def test_pow_int_tensor_scalar(dtype, exponent):
    x = rand((4, 3), dtype)
    want = torch.pow(x, exponent)
    check(run("aten::pow.Tensor_Scalar_out", x, exponent, want=want), want, float_rtol(want.dtype, False))


def test_pow_int_negative_scalar_exponent_is_an_error():
    with raises_naming("aten::pow.Tensor_Scalar_out", "negative integer powers"):
        kernels.call("aten::pow.Tensor_Scalar_out", torch.tensor([2, 3]), -1, Out((2,), torch.int64))
    want = torch.pow(torch.tensor([2, 4]), -1.0)  # a float exponent is fine
    check(run("aten::pow.Tensor_Scalar_out", torch.tensor([2, 4]), -1.0, want=want), want)


@pytest.mark.parametrize("base", [2, -1, 1, 0, 2.5, -0.5, True])
@pytest.mark.parametrize("dtype", [torch.int64, torch.int8, torch.float32, torch.float16])
def test_pow_scalar_base(base, dtype):
    exp = rand((5,), dtype, -3, 6)
    want = torch.pow(base, exp)
    check(run("aten::pow.Scalar_out", base, exp, want=want), want, float_rtol(want.dtype, False))


def test_pow_bool_result_is_an_error():
    b = torch.tensor([True, False])
    with raises_naming("aten::pow.Tensor_Tensor_out", "bool"):
        kernels.call("aten::pow.Tensor_Tensor_out", b, b, Out((2,), torch.bool))


# ---------------------------------------------------------------------------
# Bitwise and logical_xor
# ---------------------------------------------------------------------------

BITWISE = {"and": torch.bitwise_and, "or": torch.bitwise_or, "xor": torch.bitwise_xor}


@pytest.mark.parametrize("op", list(BITWISE))
@pytest.mark.parametrize(
    "dtypes",
    [(t, t) for t in INTS + [torch.bool]] + [(torch.uint8, torch.int8), (torch.bool, torch.int32),
                                            (torch.int16, torch.int64)],
    ids=str,
)
def test_bitwise_tensor(op, dtypes):
    a, b = rand((3, 4), dtypes[0], -128, 128), rand((4,), dtypes[1], -128, 128)
    want = BITWISE[op](a, b)
    check(run(f"aten::bitwise_{op}.Tensor_out", a, b, want=want), want)


@pytest.mark.parametrize("op", list(BITWISE))
@pytest.mark.parametrize("dtype", INTS + [torch.bool])
@pytest.mark.parametrize("scalar", [5, -1, 300, True, False])
def test_bitwise_scalar(op, dtype, scalar):
    a = rand((2, 5), dtype, -128, 128)
    want = BITWISE[op](a, scalar)
    check(run(f"aten::bitwise_{op}.Scalar_out", a, scalar, want=want), want)


def test_bitwise_rejects_float():
    with raises_naming("aten::bitwise_and.Tensor_out", "integral or bool"):
        kernels.call("aten::bitwise_and.Tensor_out", rand((2,)), torch.tensor([1, 2]), Out((2,), torch.float32))
    with raises_naming("aten::bitwise_xor.Scalar_out", "integral or bool"):
        kernels.call("aten::bitwise_xor.Scalar_out", torch.tensor([1, 2]), 2.0, Out((2,), torch.float32))


@pytest.mark.parametrize("dtypes", [(torch.float32, torch.int64), (torch.bool, torch.bool), (torch.float16, torch.uint8)],
                         ids=str)
def test_logical_xor(dtypes):
    a = torch.tensor([1.0, 0.0, float("nan"), -0.0, 2.0, 0.0]).to(dtypes[0])
    b = torch.tensor([0, 0, 0, 1, 3, 1]).to(dtypes[1])
    want = torch.logical_xor(a, b)
    check(run("aten::logical_xor.out", a, b, want=want), want)
    want_f = want.float()  # any out dtype, like logical_and
    check(run("aten::logical_xor.out", a, b, want=want_f), want_f)


# ---------------------------------------------------------------------------
# clamp.Tensor
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("bounds", ["both", "min", "max"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.int64, torch.int32, torch.int8,
                                   torch.uint8])
def test_clamp_tensor_broadcasts(bounds, dtype):
    x = rand((3, 4), dtype)
    lo = rand((4,), dtype) if bounds != "max" else None
    hi = rand((3, 1), dtype) if bounds != "min" else None  # some lo > hi: then hi wins
    want = torch.clamp(x, lo, hi)
    check(run("aten::clamp.Tensor_out", x, lo, hi, want=want), want)


def test_clamp_tensor_nan_and_promotion():
    nan = float("nan")
    x, lo, hi = torch.tensor([1.0, nan, 9.0, 2.0]), torch.tensor([nan, 0.0, 0.0, 0.0]), torch.tensor([3.0, 3.0, 3.0, nan])
    want = torch.clamp(x, lo, hi)
    check(run("aten::clamp.Tensor_out", x, lo, hi, want=want), want)
    xi = torch.tensor([1, 5, 9], dtype=torch.int8)
    for lo, hi in [(torch.tensor([2.5]), None), (torch.tensor([2], dtype=torch.int32), torch.tensor(6)),
                   (None, torch.tensor(300))]:
        want = torch.clamp(xi, lo, hi)  # the 0-d int64 300 wraps to int8's 44
        check(run("aten::clamp.Tensor_out", xi, lo, hi, want=want), want)


def test_clamp_tensor_errors():
    with raises_naming("aten::clamp.Tensor_out", "min and max"):
        kernels.call("aten::clamp.Tensor_out", rand((3,)), None, None, Out((3,)))
    with raises_naming("aten::clamp.Tensor_out", "can't be cast"):
        kernels.call("aten::clamp.Tensor_out", torch.tensor([1, 2]), torch.tensor([1.5]), None, Out((2,), torch.int64))
    with raises_naming("aten::clamp.Tensor_out", "broadcast"):
        kernels.call("aten::clamp.Tensor_out", rand((3,)), rand((2,)), rand((3,)), Out((3,)))


# ---------------------------------------------------------------------------
# atan2
# ---------------------------------------------------------------------------


def test_atan2_signed_zeros_and_int_inputs():
    y = torch.tensor([0.0, -0.0, 0.0, -0.0, 1.0, -1.0, float("inf"), float("nan")])
    x = torch.tensor([0.0, 0.0, -0.0, -0.0, float("-inf"), float("inf"), float("inf"), 1.0])
    want = torch.atan2(y, x)
    check(run("aten::atan2.out", y, x, want=want), want, 1e-6)
    a, b = torch.tensor([1, -2, 0]), torch.tensor([0, 3, -1])
    want = torch.atan2(a, b)  # float32
    check(run("aten::atan2.out", a, b, want=want), want, 1e-6)
    with raises_naming("aten::atan2.out", "can't be cast"):
        kernels.call("aten::atan2.out", a, b, Out((3,), torch.int64))


# ---------------------------------------------------------------------------
# Older binary kernels in the dtypes the edge table allows
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.int16, torch.int8, torch.uint8, torch.float16, torch.bool])
@pytest.mark.parametrize(
    "op, fn",
    [("aten::add.out", lambda a, b: torch.add(a, b)), ("aten::mul.out", torch.mul), ("aten::maximum.out", torch.maximum),
     ("aten::minimum.out", torch.minimum), ("aten::logical_and.out", torch.logical_and)],
)
def test_older_binary_small_dtypes(op, fn, dtype):
    a, b = rand((3, 4), dtype, -100, 100), rand((4,), dtype, -100, 100)
    want = fn(a, b)
    args = (a, b, 1) if op == "aten::add.out" else (a, b)
    check(run(op, *args, want=want), want, float_rtol(want.dtype, True))


@pytest.mark.parametrize("scalar", [True, 1, 2.5])
def test_add_scalar_bool_tensor(scalar):
    a = rand((5,), torch.bool)
    want = torch.add(a, scalar)
    check(run("aten::add.Scalar_out", a, scalar, 1, want=want), want)


# ---------------------------------------------------------------------------
# Comparisons
# ---------------------------------------------------------------------------

COMPARISONS = ["eq", "ne", "lt", "le", "gt", "ge"]


@pytest.mark.parametrize("op", COMPARISONS)
@pytest.mark.parametrize("dtype", FLOATS + INTS + [torch.bool])
def test_comparison_every_dtype(op, dtype):
    a, b = rand((3, 4), dtype, -3, 4), rand((4,), dtype, -3, 4)
    if dtype.is_floating_point:
        b = torch.where(torch.arange(4) % 2 == 0, b, a[0])  # some equal elements
        a[1, 1] = float("nan")
    want = getattr(torch, op)(a, b)
    check(run(f"aten::{op}.Tensor_out", a, b, want=want), want)
    for scalar in [1, -2, 0.5, True]:
        want = getattr(torch, op)(a, scalar)
        check(run(f"aten::{op}.Scalar_out", a, scalar, want=want), want)


@pytest.mark.parametrize("op", COMPARISONS)
def test_comparison_scalar_converts_to_result_type(op):
    u = torch.tensor([44, 100, 0], dtype=torch.uint8)
    i8 = torch.tensor([44, -100, -44], dtype=torch.int8)
    h = torch.tensor([0.1, 0.2, -1.0], dtype=torch.float16)
    i32 = torch.tensor([1, 2, -1], dtype=torch.int32)
    for t, scalar in [(u, 300), (u, -256), (i8, 300), (i8, -212), (h, 0.1), (i32, 2**32 + 1), (u, 44.5)]:
        want = getattr(torch, op)(t, scalar)  # 300 is uint8's 44; 0.1 rounds to float16 first
        check(run(f"aten::{op}.Scalar_out", t, scalar, want=want), want)
    for t, other in [(u, torch.tensor(300)), (h, torch.tensor(0.1)), (i8, torch.tensor(300.5))]:
        want = getattr(torch, op)(t, other)  # 0-d tensors convert like Scalars
        check(run(f"aten::{op}.Tensor_out", t, other, want=want), want)


@pytest.mark.parametrize("shapes", BROADCAST_SHAPES, ids=str)
def test_comparison_mixed_dtype_broadcast(shapes):
    a, b = rand(shapes[0], torch.int16), rand(shapes[1], torch.float16)
    want = torch.le(a, b)
    check(run("aten::le.Tensor_out", a, b, want=want), want)
    want_i = torch.le(a, b).to(torch.int32)  # out of another dtype gets 0/1
    check(run("aten::le.Tensor_out", a, b, want=want_i), want_i)


# ---------------------------------------------------------------------------
# Errors and outs
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "op, args",
    [
        ("aten::atan2.out", (rand((2, 3)), rand((2,)))),
        ("aten::remainder.Tensor_out", (rand((2, 3)), rand((4,)))),
        ("aten::fmod.Tensor_out", (rand((2, 3)), rand((4,)))),
        ("aten::pow.Tensor_Tensor_out", (rand((2, 3)), rand((4,)))),
        ("aten::bitwise_and.Tensor_out", (torch.ones(2, 3, dtype=torch.int64), torch.ones(4, dtype=torch.int64))),
        ("aten::logical_xor.out", (rand((2, 3)), rand((4,)))),
        ("aten::div.out_mode", (rand((2, 3)), rand((4,)), "floor")),
        ("aten::eq.Tensor_out", (rand((2, 3)), rand((4,)))),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_not_broadcastable_names_op(op, args):
    with raises_naming(op, "not broadcastable"):
        kernels.call(op, *args, Out((2, 3), args[0].dtype))


def test_bad_rounding_mode_and_bool_results():
    with raises_naming("aten::div.out_mode", "rounding_mode"):
        kernels.call("aten::div.out_mode", rand((2,)), rand((2,)), "round", Out((2,)))
    b = torch.tensor([True, False])
    with raises_naming("aten::div.out_mode", "bool"):
        kernels.call("aten::div.out_mode", b, b, "floor", Out((2,), torch.bool))
    with raises_naming("aten::remainder.Tensor_out", "bool"):
        kernels.call("aten::remainder.Tensor_out", b, b, Out((2,), torch.bool))
    with raises_naming("aten::fmod.Scalar_out", "can't be cast"):
        kernels.call("aten::fmod.Scalar_out", torch.tensor([3, 4]), 1.5, Out((2,), torch.int64))


def test_dynamic_out_resized_below_bound():
    a, b = rand((2, 3)), rand((3,))
    want = torch.remainder(a, b)
    (got,) = kernels.call("aten::remainder.Tensor_out", a, b, Out((4, 8), torch.float32, dynamic=True))
    check(got, want)
    want = torch.pow(a.abs(), 2)
    (got,) = kernels.call("aten::pow.Tensor_Scalar_out", a.abs(), 2, Out((4, 8), torch.float32, dynamic=True))
    check(got, want)


def test_large_contiguous_runs_match():
    a, b = rand((64, 257)), rand((257,))
    for mode in ["floor", "trunc"]:
        want = torch.div(a, b, rounding_mode=mode)
        check(run("aten::div.out_mode", a, b, mode, want=want), want)
    ai, bi = rand((64, 257), torch.int32, -1000, 1000), nonzero((257,), torch.int32)
    want = torch.remainder(ai, bi)
    check(run("aten::remainder.Tensor_out", ai, bi, want=want), want)
    want = torch.bitwise_xor(ai, bi)
    check(run("aten::bitwise_xor.Tensor_out", ai, bi, want=want), want)


HALF_TYPES = [torch.float16, torch.bfloat16]


@pytest.mark.parametrize("dtype", HALF_TYPES, ids=str)
def test_half_arith_with_scalars_rounds_like_pytorch(dtype):
    """Bit for bit: add/sub round a Scalar, a 0-d tensor of another dtype and alpha to the half dtype
    first (PyTorch's add converts them to scalar_t), then compute in float and round once; mul and
    div read a Scalar or 0-d `other` unrounded (PyTorch takes its original value as float), but
    a 0-d `self` of another dtype rounds."""
    x = (torch.randn(4096, generator=_gen) * 3).to(dtype)
    y = torch.randn(4096, generator=_gen).to(dtype)
    x[:64] = torch.tensor(0.7, dtype=dtype)  # on the rounded Scalar itself
    s = torch.tensor(0.7)  # float32 0-d
    cases = [
        ("aten::add.Scalar_out", (x, 0.7, 1), x + 0.7),
        ("aten::add.Scalar_out", (x, 0.7, 0.3), torch.add(x, 0.7, alpha=0.3)),
        ("aten::sub.Scalar_out", (x, 0.7, 1), x - 0.7),
        ("aten::add.out", (x, y, 0.3), torch.add(x, y, alpha=0.3)),
        ("aten::add.out", (x, s, 1), x + s),
        ("aten::sub.out", (x, s, 2), torch.sub(x, s, alpha=2)),
        ("aten::sub.out", (s, x, 1), torch.sub(s, x)),
        ("aten::mul.Scalar_out", (x, 0.7), x * 0.7),
        ("aten::mul.out", (x, s), x * s),
        ("aten::mul.out", (s, x), torch.mul(s, x)),
        ("aten::div.Scalar_out", (x, 0.7), x / 0.7),
        ("aten::div.out", (x, s), x / s),
        ("aten::div.out", (s, x), torch.div(s, x)),
    ]
    for name, args, want in cases:
        got = torch.as_tensor(run(name, *args, want=want))
        assert got.dtype == dtype
        same = (got == want) | (got.isnan() & want.isnan())
        assert bool(same.all()), f"{name}{[a if not torch.is_tensor(a) else a.shape for a in args]}: " \
                                 f"{int((~same).sum())} of {want.numel()} differ"
