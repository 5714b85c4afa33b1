"""Portable unary kernels (runtime/kernels/portable/unary_ops.cpp) against PyTorch eager.

Each test calls one kernel through etmlir.runtime.kernels.call and compares
with the ATen op run by PyTorch. Tolerances:
  * float32 results of the floating functions (exp, log, sin, erf, ...): within
    MAX_ULP (2, or 3 for a few) of the float64 result rounded to float32 over
    dense ranges and special values, and within MAX_ULP + 1 of torch's float32
    result (torch's own is within 1 ulp);
  * float64: rtol 1e-14 (libm against torch);
  * float16 / bfloat16: within 1 ulp of the half type (both compute in float
    and round once);
  * integer, bool, rounding, sign, abs, neg, relu: exact;
everywhere NaN positions must match, and infinities exactly.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from etmlir.runtime import kernels
from etmlir.runtime.kernels import Out

_gen = torch.Generator().manual_seed(0)

INT_DTYPES = [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8]
HALF_DTYPES = [torch.float16, torch.bfloat16]


def rand(shape, dtype=torch.float32, scale=3.0):
    shape = tuple(shape)
    if dtype.is_floating_point:
        return (torch.randn(shape, generator=_gen) * scale).to(dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=_gen).bool()
    lo = 0 if dtype == torch.uint8 else -100
    return torch.randint(lo, 100, shape, generator=_gen, dtype=dtype)


def call1(name, *args):
    (result,) = kernels.call(name, *args)
    return result if isinstance(result, torch.Tensor) else torch.from_numpy(np.array(result))


def out_like(t: torch.Tensor, dynamic: bool = False) -> Out:
    return Out(tuple(t.shape), t.dtype, dynamic)


def raises_naming(op: str):
    return pytest.raises(Exception, match=re.escape(op))


def assert_same(got: torch.Tensor, want: torch.Tensor) -> None:
    """Exact match, NaN positions included."""
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    if want.dtype.is_floating_point:
        torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)
    else:
        assert torch.equal(got, want)


def ulp_error(got: torch.Tensor, want: torch.Tensor) -> torch.Tensor:
    """|got - want| in units of the last place of `want` (rounded to got's dtype); 0 where both agree, inf where
    NaN-ness or infinities differ."""
    assert got.dtype == want.dtype or want.dtype == torch.float64, (got.dtype, want.dtype)
    ref = want.to(got.dtype)
    same = (got == ref) | (got.isnan() & ref.isnan())
    info = torch.finfo(got.dtype)
    mag = ref.double().abs().clamp(min=info.tiny)
    ulp = torch.pow(2.0, torch.floor(torch.log2(mag))) * info.eps
    err = (got.double() - want.double()).abs() / ulp
    err = torch.where(same, torch.zeros_like(err), err)
    return torch.where(err.isnan() | ~ref.isfinite() | ~got.isfinite(), torch.where(same, 0.0, float("inf")), err)


def assert_ulp(got: torch.Tensor, want: torch.Tensor, max_ulp: float, what: str = "", atol: float = 0.0) -> None:
    err = ulp_error(got, want)
    if atol:
        err = torch.where((got.double() - want.double()).abs() <= atol, 0.0, err)
    if err.numel() and err.max() > max_ulp:
        i = int(err.flatten().argmax())
        raise AssertionError(f"{what}: {err.max().item():.3g} ulp > {max_ulp} at x[{i}]: "
                             f"got {got.flatten()[i].item()!r}, want {want.flatten()[i].item()!r}")


def assert_signed_zeros(got: torch.Tensor, want: torch.Tensor) -> None:
    zero = (want == 0) & (got == 0)
    assert torch.equal(torch.signbit(got[zero]), torch.signbit(want.to(got.dtype)[zero])), "sign of zero differs"


# ---------------------------------------------------------------------------
# Floating-result functions: any input dtype, floating out
# ---------------------------------------------------------------------------

# name -> (torch fn, inputs for the dense check: a float64 grid)
def _grid(lo, hi, n=20001):
    return torch.linspace(lo, hi, n, dtype=torch.float64)


def _logs(lo, hi, n=4001):
    return torch.logspace(lo, hi, n, dtype=torch.float64)


FLOATING = {
    "exp": (torch.exp, [_grid(-105, 89)]),
    "expm1": (torch.expm1, [_grid(-20, 20), _logs(-40, 1), -_logs(-40, 1), _grid(85, 89)]),
    "sigmoid": (torch.sigmoid, [_grid(-105, 89)]),
    "tanh": (torch.tanh, [_grid(-12, 12), _logs(-40, 1)]),
    "log": (torch.log, [_logs(-44, 38), _grid(0, 4)]),
    "log2": (torch.log2, [_logs(-44, 38), _grid(0, 4)]),
    "log10": (torch.log10, [_logs(-44, 38), _grid(0, 4)]),
    "log1p": (torch.log1p, [_logs(-44, 38), -_logs(-44, 0), _grid(-1, 4)]),
    "sqrt": (torch.sqrt, [_logs(-44, 38), _grid(0, 4)]),
    "rsqrt": (torch.rsqrt, [_logs(-44, 38), _grid(0, 4)]),
    "reciprocal": (torch.reciprocal, [_logs(-37, 37), -_logs(-37, 37)]),
    "sin": (torch.sin, [_grid(-10, 10), _grid(-2.0**18, 2.0**18, 200001), _logs(-44, 5)]),
    "cos": (torch.cos, [_grid(-10, 10), _grid(-2.0**18, 2.0**18, 200001), _logs(-44, 5)]),
    "tan": (torch.tan, [_grid(-10, 10), _grid(-2.0**18, 2.0**18, 200001), _logs(-44, 5)]),
    "asin": (torch.asin, [_grid(-1, 1), _logs(-44, 0), 1 - _logs(-7, -0.5)]),
    "acos": (torch.acos, [_grid(-1, 1), _logs(-44, 0), 1 - _logs(-7, -0.5), -1 + _logs(-7, -0.5)]),
    "atan": (torch.atan, [_grid(-10, 10), _logs(-44, 38), -_logs(-44, 38)]),
    "sinh": (torch.sinh, [_grid(-12, 12), _logs(-44, 1.9), _grid(85, 90)]),
    "cosh": (torch.cosh, [_grid(-12, 12), _grid(85, 90)]),
    "asinh": (torch.asinh, [_grid(-10, 10), _logs(-44, 38), -_logs(-44, 38)]),
    "acosh": (torch.acosh, [_grid(1, 10), 1 + _logs(-7, 38), _grid(-2, 1, 101)]),
    "atanh": (torch.atanh, [_grid(-1, 1), _logs(-44, 0), 1 - _logs(-7, -0.5)]),
    "erf": (torch.erf, [_grid(-5, 5), _logs(-44, 1), -_logs(-44, 1)]),
}
# Our float32 error bound against the correctly rounded result (2 unless noted).
MAX_ULP = {"tanh": 3, "sigmoid": 3, "sinh": 3}

SPECIALS = [float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 1e-45, -1e-45, 1e-38, -1e-38, 1.0, -1.0, 0.5, -0.5,
            2.0, -2.0, 3.4e38, -3.4e38, 88.7, -88.7, 89.5, -104.0]


def _sample(name: str, shape) -> torch.Tensor:
    x = rand(shape)
    if name in ("asin", "acos", "atanh"):
        return x / 3
    if name in ("log", "log2", "log10", "sqrt", "rsqrt"):
        return x.abs()
    if name == "acosh":
        return x.abs() + 1
    return x


@pytest.mark.parametrize("name", list(FLOATING))
def test_floating_dense_float32_within_ulp_of_exact(name):
    fn, grids = FLOATING[name]
    x = torch.cat(grids + [torch.tensor(SPECIALS, dtype=torch.float64)]).float()
    got = call1(f"aten::{name}.out", x, out_like(x))
    exact = fn(x.double())
    assert_ulp(got, exact, MAX_ULP.get(name, 2), name)
    assert_signed_zeros(got, exact)


@pytest.mark.parametrize("name", list(FLOATING))
@pytest.mark.parametrize("shape", [(3, 7), (), (0, 5), (2, 3, 40)], ids=str)
def test_floating_float32_matches_torch(name, shape):
    x = _sample(name, shape)
    want = FLOATING[name][0](x)
    assert_ulp(call1(f"aten::{name}.out", x, out_like(want)), want, MAX_ULP.get(name, 2) + 1, name)


@pytest.mark.parametrize("name", list(FLOATING))
def test_floating_float64_matches_torch(name):
    x = torch.cat([_sample(name, (200,)).double(), torch.tensor(SPECIALS, dtype=torch.float64)])
    want = FLOATING[name][0](x)
    torch.testing.assert_close(call1(f"aten::{name}.out", x, out_like(want)), want, rtol=1e-14, atol=0,
                               equal_nan=True)


@pytest.mark.parametrize("name", list(FLOATING))
@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=str)
def test_floating_half_types_match_torch(name, dtype):
    x = torch.cat([_sample(name, (300,)), torch.tensor(SPECIALS[:5] + [0.5, -0.5, 2.0])]).to(dtype)
    want = FLOATING[name][0](x)
    assert_ulp(call1(f"aten::{name}.out", x, out_like(want)), want, 1, f"{name} {dtype}")


@pytest.mark.parametrize("name", list(FLOATING))
@pytest.mark.parametrize("dtype", INT_DTYPES + [torch.bool], ids=str)
def test_floating_integer_input_writes_float32(name, dtype):
    x = rand((50,), dtype)
    fn = FLOATING[name][0]
    assert fn(x).dtype == torch.float32  # PyTorch computes integers in float32
    # Against the exact result: PyTorch's float32 sinh/cosh overflow early (sinh(89) is 2.2e38, not inf).
    exact = fn(x.double())
    assert_ulp(call1(f"aten::{name}.out", x, Out((50,), torch.float32)), exact, MAX_ULP.get(name, 2), f"{name} {dtype}")


@pytest.mark.parametrize("name", ["sin", "log", "erf", "sigmoid"])
def test_floating_out_dtype_may_differ(name):
    fn = FLOATING[name][0]
    x = _sample(name, (4, 9))
    # float64 out: computed in float64.
    torch.testing.assert_close(call1(f"aten::{name}.out", x, Out((4, 9), torch.float64)), fn(x.double()),
                               rtol=1e-14, atol=0)
    # float64 in, float32 out: computed in float64, rounded once.
    assert_ulp(call1(f"aten::{name}.out", x.double(), Out((4, 9), torch.float32)), fn(x.double()), 0.5, name)
    # float16 in, float32 out.
    xh = x.half()
    assert_ulp(call1(f"aten::{name}.out", xh, Out((4, 9), torch.float32)), fn(xh.float()), 3, name)


@pytest.mark.parametrize("name", ["sin", "cos", "tan"])
def test_trig_large_arguments_use_libm(name):
    fn = FLOATING[name][0]
    x = torch.tensor([0.5, 3e5, -1e6, 12345678.0, 1e10, -3.4e38, 2.0**18, 2.0**18 + 0.125, float("inf"), float("nan"),
                      -7.25])
    want = fn(x)
    assert_ulp(call1(f"aten::{name}.out", x, out_like(want)), want, 2, name)
    # The same values through the converting path (float16 out computes in float).
    assert_ulp(call1(f"aten::{name}.out", x, Out((11,), torch.float16)), want.half(), 1, name)


def test_floating_dynamic_out_runs_below_bound():
    x = rand((2, 3))
    assert_ulp(call1("aten::log1p.out", x.abs(), Out((5, 5), dynamic=True)), torch.log1p(x.abs()), 3)


def test_reciprocal_of_zero_and_log_of_negative():
    x = torch.tensor([0.0, -0.0, -1.0, 4.0])
    assert_same(call1("aten::reciprocal.out", x, out_like(x)), torch.reciprocal(x))
    assert_same(call1("aten::log.out", x, out_like(x)), torch.log(x))
    xi = torch.tensor([0, -1, 4])
    assert_same(call1("aten::reciprocal.out", xi, Out((3,))), torch.reciprocal(xi))


@pytest.mark.parametrize("name", ["sin", "exp", "sqrt", "log"])
def test_floating_result_into_integer_out_fails(name):
    with raises_naming(f"aten::{name}.out"):
        kernels.call(f"aten::{name}.out", rand((3,), torch.int64), Out((3,), torch.int64))


# ---------------------------------------------------------------------------
# Same dtype: abs, neg, sign, rounding, relu
# ---------------------------------------------------------------------------

SAME_DTYPE = {
    "abs": torch.abs,
    "neg": torch.neg,
    "sign": torch.sign,
    "ceil": torch.ceil,
    "floor": torch.floor,
    "round": torch.round,
    "trunc": torch.trunc,
    "relu": torch.relu,
}


def _edge_values(dtype) -> torch.Tensor:
    if dtype.is_floating_point:
        vals = [float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 0.49999997,
                -0.49999997, 1e-30, -1e-30, 8388607.5, -8388607.5, 8388609.0, 1e20, -1e20, 4503599627370495.5]
        t = torch.tensor(vals, dtype=torch.float64).to(dtype)
        return torch.cat([t, rand((64,), dtype, scale=10)])
    info = torch.iinfo(dtype)
    t = torch.tensor([info.min, info.min + 1, -1, 0, 1, info.max], dtype=torch.int64).clamp(info.min, info.max)
    return torch.cat([t.to(dtype), rand((64,), dtype)])


@pytest.mark.parametrize("name", list(SAME_DTYPE))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64] + HALF_DTYPES + INT_DTYPES, ids=str)
def test_same_dtype_ops_exact(name, dtype):
    x = _edge_values(dtype)
    want = SAME_DTYPE[name](x)
    got = call1(f"aten::{name}.out", x, out_like(want))
    assert_same(got, want)
    if name not in ("relu", "sign") and dtype.is_floating_point:
        assert_signed_zeros(got, want)


@pytest.mark.parametrize("name", ["abs", "neg", "round", "relu"])
def test_same_dtype_ops_shapes(name):
    for shape in [(), (0,), (0, 3), (2, 3, 5)]:
        x = rand(shape)
        want = SAME_DTYPE[name](x)
        assert_same(call1(f"aten::{name}.out", x, out_like(want)), want)


def test_round_is_half_to_even():
    x = torch.arange(-6, 6, dtype=torch.float32) + 0.5
    assert_same(call1("aten::round.out", x, out_like(x)), torch.round(x))
    assert torch.equal(call1("aten::round.out", x, out_like(x))[:4], torch.tensor([-6.0, -4.0, -4.0, -2.0]))


def test_sign_of_bool_is_identity():
    x = rand((9,), torch.bool)
    assert_same(call1("aten::sign.out", x, out_like(x)), torch.sign(x))


@pytest.mark.parametrize("name", ["abs", "neg", "ceil", "relu", "sign"])
def test_same_dtype_ops_reject_other_out_dtype(name):
    with raises_naming(f"aten::{name}.out"):
        kernels.call(f"aten::{name}.out", rand((3,)), Out((3,), torch.float64))
    with raises_naming(f"aten::{name}.out"):
        kernels.call(f"aten::{name}.out", rand((3,), torch.int32), Out((3,), torch.int64))


@pytest.mark.parametrize("name", ["abs", "neg", "ceil", "floor", "round", "trunc", "relu"])
def test_same_dtype_ops_reject_bool(name):
    with raises_naming(f"aten::{name}.out"):
        kernels.call(f"aten::{name}.out", rand((3,), torch.bool), Out((3,), torch.bool))


# ---------------------------------------------------------------------------
# Bitwise and logical
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", INT_DTYPES + [torch.bool], ids=str)
def test_bitwise_not(dtype):
    x = _edge_values(dtype) if dtype != torch.bool else rand((20,), torch.bool)
    want = torch.bitwise_not(x)
    assert_same(call1("aten::bitwise_not.out", x, out_like(want)), want)


def test_bitwise_not_rejects_float():
    with raises_naming("aten::bitwise_not.out"):
        kernels.call("aten::bitwise_not.out", rand((3,)), Out((3,)))


@pytest.mark.parametrize("name", ["isinf", "isnan"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64,
                                   torch.int8, torch.uint8, torch.bool], ids=str)
def test_isinf_isnan(name, dtype):
    x = _edge_values(dtype) if dtype != torch.bool else rand((7,), torch.bool)
    want = getattr(torch, name)(x)
    assert_same(call1(f"aten::{name}.out", x, out_like(want)), want)


def test_isnan_needs_bool_out():
    with raises_naming("aten::isnan.out"):
        kernels.call("aten::isnan.out", rand((3,)), Out((3,), torch.float32))


@pytest.mark.parametrize("dtype", [torch.float16, torch.int16, torch.uint8], ids=str)
def test_logical_not_small_dtypes(dtype):
    x = rand((11,), dtype)
    x[0] = 0
    want = torch.logical_not(x)
    assert_same(call1("aten::logical_not.out", x, out_like(want)), want)


# ---------------------------------------------------------------------------
# Activations with parameters; clamp and hardtanh bounds
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("slope", [0.01, 0.2, -1.5, 0, 2])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16], ids=str)
def test_leaky_relu(slope, dtype):
    x = torch.cat([rand((40,)), torch.tensor(SPECIALS[:5])]).to(dtype)
    want = F.leaky_relu(x, slope)
    assert_same(call1("aten::leaky_relu.out", x, slope, out_like(want)), want)


@pytest.mark.parametrize("alpha,scale,input_scale", [(1.0, 1.0, 1.0), (0.5, 2.0, 1.5), (1.6732632423543772,
                                                     1.0507009873554805, 1.0), (2, 1, 3)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16], ids=str)
def test_elu(alpha, scale, input_scale, dtype):
    x = torch.cat([rand((60,)), torch.tensor(SPECIALS[:5] + [-1e-30, -30.0])]).to(dtype)
    want = torch.ops.aten.elu(x, alpha, scale, input_scale)
    got = call1("aten::elu.out", x, alpha, scale, input_scale, out_like(want))
    if dtype == torch.float64:
        torch.testing.assert_close(got, want, rtol=1e-14, atol=0, equal_nan=True)
    else:
        assert_ulp(got, want, 3 if dtype == torch.float32 else 1, "elu")


@pytest.mark.parametrize("name,fn", [("gelu", lambda x: F.gelu(x)), ("silu", F.silu), ("hardswish", F.hardswish),
                                     ("sigmoid", torch.sigmoid), ("tanh", torch.tanh)])
@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=str)
def test_activations_half_types(name, fn, dtype):
    x = rand((5, 40), dtype)
    want = fn(x)
    args = (x, "none") if name == "gelu" else (x,)
    # gelu: PyTorch's 1 + erf(x / sqrt 2) cancels to 0 for x < -5; ours keeps erfc (atol).
    assert_ulp(call1(f"aten::{name}.out", *args, out_like(want)), want, 1, name, atol=1e-6)


def test_silu_dense_float32_within_ulp_of_exact():
    x = torch.cat([_grid(-105, 89), torch.tensor(SPECIALS, dtype=torch.float64)]).float()
    exact = F.silu(x.double())
    # x e^x rounds twice where e^x is denormal (x < -87): absolute 1e-41 there.
    assert_ulp(call1("aten::silu.out", x, out_like(x)), exact, 3, "silu", atol=1e-41)


@pytest.mark.parametrize("name", ["gelu", "silu", "hardswish", "elu", "leaky_relu"])
def test_floating_only_activations_reject_integers(name):
    extra = {"gelu": ("none",), "elu": (1.0, 1.0, 1.0), "leaky_relu": (0.01,)}.get(name, ())
    with raises_naming(f"aten::{name}.out"):
        kernels.call(f"aten::{name}.out", rand((3,), torch.int64), *extra, Out((3,), torch.int64))
    with raises_naming(f"aten::{name}.out"):  # out of another floating dtype
        kernels.call(f"aten::{name}.out", rand((3,)), *extra, Out((3,), torch.float64))


@pytest.mark.parametrize("dtype", [torch.int16, torch.int8, torch.uint8, torch.float16, torch.bfloat16], ids=str)
def test_clamp_small_dtypes(dtype):
    x = _edge_values(dtype)
    for lo, hi in [(0, 50), (None, 3), (2, None), (60, 10)]:
        want = torch.clamp(x, lo, hi)
        assert_same(call1("aten::clamp.out", x, lo, hi, out_like(want)), want)
    want = F.hardtanh(x, 0, 7)
    assert_same(call1("aten::hardtanh.out", x, 0, 7, out_like(want)), want)


def test_clamp_bounds_convert_like_pytorch():
    u8 = torch.tensor([0, 3, 200], dtype=torch.uint8)
    want = torch.clamp(u8, -56, None)  # -56 wraps to 200 in uint8
    assert_same(call1("aten::clamp.out", u8, -56, None, out_like(want)), want)
    i64 = torch.tensor([-3, 0, 3])
    want = F.hardtanh(i64, -0.5, 0.75)  # bounds truncate to 0
    assert_same(call1("aten::hardtanh.out", i64, -0.5, 0.75, out_like(want)), want)
    with raises_naming("aten::clamp.out"):  # int8 cannot hold -200
        kernels.call("aten::clamp.out", torch.zeros(3, dtype=torch.int8), -200, None, Out((3,), torch.int8))
    with raises_naming("aten::clamp.out"):  # float16 cannot hold 70000
        kernels.call("aten::clamp.out", torch.zeros(3, dtype=torch.float16), None, 70000.0, Out((3,), torch.float16))
    with raises_naming("aten::hardtanh.out"):  # negative limits on uint8
        kernels.call("aten::hardtanh.out", u8, -1, 1, Out((3,), torch.uint8))
    with raises_naming("aten::clamp.out"):  # out must be the result type (float32 here)
        kernels.call("aten::clamp.out", i64, 0.5, None, Out((3,), torch.int64))


def test_float_only_errors_name_the_op():
    with pytest.raises(Exception, match=r"aten::gelu\.out.*approximate"):
        kernels.call("aten::gelu.out", rand((3,)), "exact", Out((3,)))
    with raises_naming("aten::elu.out"):  # alpha overflows float32
        kernels.call("aten::elu.out", rand((3,)), 1e300, 1.0, 1.0, Out((3,)))
