"""Arithmetic on sizes known only at run time: edge `sym_*` ops run by `etmlir_prim::sym_*` kernels.

Each model computes with the sizes of a dynamic input (`x / x.shape[1]`,
`x.reshape(n0 * n1)`, `x[:, : n // 2]`, `torch.full((torch.sym_max(n, 3),), 1.0)`,
`n % 3`, `-n`, comparisons, true division, `torch.sym_float`, a size used as a
tensor), is compiled once (export -> edge -> .pte) and run at several sizes
within its bounds. Results are compared with PyTorch eager: shapes and dtypes
exactly, integer outputs exactly, float outputs with rtol 1e-5 (atol 1e-6). The
same programs are delegated (the `cpu` backend leaves size arithmetic on portable
kernels; the `nested` one copies it into each delegate that reads it). The kernels
themselves are checked against Python's own operators, errors included.
"""

from __future__ import annotations

import math
import operator

import numpy as np
import pytest
import torch
from torch import nn
from torch.export import Dim

import etmlir
import etmlir.runtime as rt
from etmlir import backends
from etmlir.delegation.partitioner import is_delegate_call
from etmlir.devtools.reference_runner import ReferenceRunner
from etmlir.dialects.sym_ops import SYM_OPS
from etmlir.passes.edge_to_torch import edge_to_torch
from etmlir.runtime import kernels

A = Dim("a", min=2, max=16)
B = Dim("b", min=2, max=32)
DYNAMIC = {"x": {0: A, 1: B}}
SIZES = [(4, 6), (2, 2), (16, 32), (5, 3), (3, 17)]


class DivideBySize(nn.Module):
    """A size as a Scalar operand, and as a tensor operand (`n - x` and `2 - x` pass NumToTensor)."""

    def forward(self, x):
        return x / x.shape[1], x.shape[0] - x, 2 - x


class Reshape(nn.Module):
    """`mul.int` into a view's size; a reshape to two run-time sizes."""

    def forward(self, x):
        n0, n1 = x.shape
        return x.reshape(n0 * n1), x.reshape(n1, n0)


class FullMaxMin(nn.Module):
    """`torch.sym_max` / `torch.sym_min` as factory sizes, `n + 1` into `arange`."""

    def forward(self, x):
        n0, n1 = x.shape
        return (torch.full((torch.sym_max(n0, 3),), 1.0), torch.ones(torch.sym_min(n0, n1)),
                torch.arange(n0 + 1))


class IntArithmetic(nn.Module):
    """`%`, `-`, unary minus, `**`, `//` on sizes, and sizes into an integer tensor's ops."""

    def forward(self, x):
        n0, n1 = x.shape
        return (x * (n0 % 3), x * (n1 - 1), x * (-n0), x * (n0 ** 2 - n1 // 3),
                x.to(torch.int64) // n1, (x * 10).to(torch.int64) % n0)


class Comparisons(nn.Module):
    """Comparisons of sizes used as values (`n0 > 3` is a bool, multiplied in as 0 or 1)."""

    def forward(self, x):
        n0, n1 = x.shape
        return x * (n0 > 3), x * (n0 == n1), x * (n0 <= n1), x * torch.sym_not(n0 < 5)


class FloatArithmetic(nn.Module):
    """True division of sizes, `torch.sym_float`, and an attention-style `n ** -0.5` scale."""

    def forward(self, x):
        n0, n1 = x.shape
        return x * (n0 / n1), x * torch.sym_float(n0), torch.softmax(x * n1 ** -0.5, -1)


class SliceHalf(nn.Module):
    """`n // 2` as a slice end. torch.export proves its guards only for an even dim (2 * _b)."""

    def forward(self, x):
        return x[:, : x.shape[1] // 2] + x.shape[0]


MODELS = {
    "divide_by_size": (DivideBySize(), DYNAMIC, SIZES),
    "reshape": (Reshape(), DYNAMIC, SIZES),
    "full_max_min": (FullMaxMin(), DYNAMIC, SIZES),
    "int_arithmetic": (IntArithmetic(), DYNAMIC, SIZES),
    "comparisons": (Comparisons(), DYNAMIC, SIZES),
    "float_arithmetic": (FloatArithmetic(), DYNAMIC, SIZES),
    "slice_half": (SliceHalf(), {"x": {0: A, 1: 2 * Dim("_b", min=1, max=16)}},
                   [(4, 6), (2, 2), (16, 32), (5, 14)]),
}


def _example(shape: tuple[int, ...]) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(sum(shape)))


@pytest.fixture(scope="module")
def edge_programs() -> dict[str, etmlir.EdgeProgram]:
    return {name: etmlir.to_edge(etmlir.export(model, (_example((4, 6)),), dynamic_shapes=dynamic))
            for name, (model, dynamic, _) in MODELS.items()}


@pytest.fixture(scope="module")
def methods(edge_programs) -> dict[str, rt.Method]:
    return {name: rt.load(edge.to_executorch().buffer).method("forward") for name, edge in edge_programs.items()}


def _assert_matches(got, want) -> None:
    got = got if isinstance(got, (tuple, list)) else (got,)
    want = want if isinstance(want, (tuple, list)) else (want,)
    assert len(got) == len(want)
    for index, (g, w) in enumerate(zip(got, want)):
        g = torch.as_tensor(np.asarray(g))
        assert tuple(g.shape) == tuple(w.shape), f"output {index}: shape {tuple(g.shape)} != {tuple(w.shape)}"
        assert g.dtype == w.dtype, f"output {index}: dtype {g.dtype} != {w.dtype}"
        if w.dtype.is_floating_point:
            torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-6, msg=f"output {index}")
        else:
            assert torch.equal(g, w), f"output {index}: {g} != {w}"


@pytest.mark.parametrize("name", MODELS)
def test_model_runs_at_every_size_and_matches_eager(methods, name):
    model, _, sizes = MODELS[name]
    for shape in sizes:
        x = _example(shape)
        with torch.no_grad():
            want = model(x)
        _assert_matches(methods[name](x), want)


def _ops(edge: etmlir.EdgeProgram) -> list[str]:
    return [op.operation.name for op in edge.function.regions[0].blocks[0].operations]


def test_size_arithmetic_reaches_edge_as_sym_ops(edge_programs):
    """Each family shows up as its edge op; a size used as a tensor as an `edge.scalar_tensor`."""
    seen = {name: set(_ops(edge)) for name, edge in edge_programs.items()}
    assert "edge.sym_mul" in seen["reshape"]
    assert {"edge.sym_max", "edge.sym_min", "edge.sym_add"} <= seen["full_max_min"]
    assert {"edge.sym_mod", "edge.sym_sub", "edge.sym_neg", "edge.sym_pow", "edge.sym_floordiv"} \
        <= seen["int_arithmetic"]
    assert {"edge.sym_gt", "edge.sym_eq", "edge.sym_le", "edge.sym_lt", "edge.sym_not"} <= seen["comparisons"]
    assert {"edge.sym_truediv", "edge.sym_float", "edge.sym_pow"} <= seen["float_arithmetic"]
    assert "edge.sym_floordiv" in seen["slice_half"]
    assert "edge.scalar_tensor" in seen["divide_by_size"]


def test_edge_to_torch_reads_size_arithmetic_back(edge_programs):
    """et-edge-to-torch turns sym ops back into torch's scalar ops; torch-mlir's lowering of that agrees."""
    module = edge_to_torch(edge_programs["slice_half"].module)
    assert "torch.aten.floordiv.int" in str(module)
    runner = ReferenceRunner(module)
    model = MODELS["slice_half"][0]
    for shape in [(4, 6), (3, 10)]:
        x = _example(shape)
        torch.testing.assert_close(torch.from_numpy(runner(x.numpy())), model(x), rtol=1e-5, atol=1e-6)


class Delegated(nn.Module):
    def forward(self, x):
        n0, n1 = x.shape
        flat = torch.relu(x).reshape(n0 * n1) * (n1 // 2)
        return flat.exp(), torch.full((torch.sym_max(n0, 3),), 2.0).sum() + flat.sum()


@pytest.fixture(scope="module")
def delegated_edge() -> etmlir.EdgeProgram:
    return etmlir.to_edge(etmlir.export(Delegated(), (_example((4, 6)),), dynamic_shapes=DYNAMIC))


def _run_against_eager(program: etmlir.EdgeProgram) -> None:
    method = rt.load(program.to_executorch().buffer).method("forward")
    for shape in SIZES:
        x = _example(shape)
        with torch.no_grad():
            _assert_matches(method(x), Delegated()(x))


def test_cpu_partitioner_copies_size_arithmetic_into_its_delegate(delegated_edge):
    lowered = delegated_edge.to_backend(backends.partitioner("cpu"))
    top = [op.operation for op in lowered.function.regions[0].blocks[0].operations]
    assert any(is_delegate_call(op) for op in top), "the cpu backend took nothing"
    arithmetic = [op for op in top if op.name.removeprefix("edge.") in SYM_OPS]
    # n0 * n1, n1 // 2 and max(n0, 3) are read only inside the delegate (the reshape, the scalar_tensor,
    # the `full`), so each is copied in and none is left outside.
    assert {op.name for op in arithmetic} == set()
    assert not any(op.name == "edge.full" for op in top), "the dynamic-sized full runs inside the delegate"
    _run_against_eager(lowered)


@pytest.mark.parametrize("skip_ops", [(), ("edge.exp",)], ids=["one_delegate", "two_delegates"])
def test_nested_backend_runs_size_arithmetic_inside_its_delegates(delegated_edge, skip_ops):
    """The nested backend copies size arithmetic into each delegate that reads it."""
    lowered = delegated_edge.to_backend(backends.partitioner("nested", skip_ops=list(skip_ops)))
    nested = [op.operation for op in lowered.module.body.operations if op.operation.name == "builtin.module"]
    assert nested and all("edge.sym_mul" in str(m) for m in nested)
    _run_against_eager(lowered)


# -- the kernels: Python's semantics, and clear errors where Python raises or 64 bits overflow ----------

INTS = [-7, -3, -1, 0, 1, 2, 5, 16]
FLOATS = [-2.5, -1.0, -0.0, 0.5, 3.0, 7.25]
BINARY = {"sym_add": operator.add, "sym_sub": operator.sub, "sym_mul": operator.mul,
          "sym_floordiv": operator.floordiv, "sym_mod": operator.mod, "sym_truediv": operator.truediv,
          "sym_max": max, "sym_min": min, "sym_eq": operator.eq, "sym_ne": operator.ne,
          "sym_lt": operator.lt, "sym_le": operator.le, "sym_gt": operator.gt, "sym_ge": operator.ge}


def _slot(value):
    """The result slot a program plans for a value of this kind (bool, int or float)."""
    return False if isinstance(value, bool) else 0 if isinstance(value, int) else 0.0


def _same(got, want) -> bool:
    if isinstance(want, float) and math.isnan(want):
        return math.isnan(got)
    return got == want and type(got) is type(want) and math.copysign(1, got) == math.copysign(1, want)


@pytest.mark.parametrize("name", BINARY)
def test_binary_kernel_matches_python(name):
    python = BINARY[name]
    mismatches = []
    for a in INTS + FLOATS:
        for b in INTS + FLOATS:
            try:
                want = python(a, b)
            except ZeroDivisionError:
                with pytest.raises(rt.Error, match=f"etmlir_prim::{name}: .*by zero"):
                    kernels.call_scalars(f"etmlir_prim::{name}", a, b, 0.0)
                continue
            (got,) = kernels.call_scalars(f"etmlir_prim::{name}", a, b, _slot(want))
            if not _same(got, want):
                mismatches.append((a, b, got, want))
    assert not mismatches, f"{name}: (a, b, kernel, python): {mismatches}"


@pytest.mark.parametrize("name, python", [
    ("sym_neg", operator.neg), ("sym_int", int), ("sym_float", float), ("sym_floor", math.floor),
    ("sym_ceil", math.ceil), ("sym_not", operator.not_)])
def test_unary_kernel_matches_python(name, python):
    for a in INTS + FLOATS + [True, False]:
        want = python(a)
        (got,) = kernels.call_scalars(f"etmlir_prim::{name}", a, _slot(want))
        assert _same(got, want), f"{name}({a!r}): kernel {got!r}, python {want!r}"


def test_pow_kernel_matches_python():
    for a, b in [(3, 4), (-2, 5), (0, 0), (2, -2), (2.0, 0.5), (-8, 3), (7, 1), (1.5, 2)]:
        want = a ** b
        (got,) = kernels.call_scalars("etmlir_prim::sym_pow", a, b, _slot(want))
        assert got == want and type(got) is type(want), f"{a} ** {b}: kernel {got!r}, python {want!r}"


@pytest.mark.parametrize("call, message", [
    (("etmlir_prim::sym_add", 2**62, 2**62, 0), "overflows a 64-bit int"),
    (("etmlir_prim::sym_mul", 2**40, 2**40, 0), "overflows a 64-bit int"),
    (("etmlir_prim::sym_sub", -2**63, 1, 0), "overflows a 64-bit int"),
    (("etmlir_prim::sym_neg", -2**63, 0), "overflows a 64-bit int"),
    (("etmlir_prim::sym_floordiv", -2**63, -1, 0), "overflows a 64-bit int"),
    (("etmlir_prim::sym_pow", 3, 64, 0), "overflows a 64-bit int"),
    (("etmlir_prim::sym_mod", 5, 0, 0), "modulo by zero"),
    (("etmlir_prim::sym_floordiv", 5, 0, 0), "division by zero"),
    (("etmlir_prim::sym_pow", 0, -1, 0.0), "negative power"),
    (("etmlir_prim::sym_int", float("nan"), 0), "cannot convert float NaN"),
    (("etmlir_prim::sym_floor", 1e300, 0), "does not fit a 64-bit int"),
    (("etmlir_prim::sym_truediv", 3, 4, 0), "planned an int"),
])
def test_kernel_errors_name_the_op(call, message):
    with pytest.raises(rt.Error, match=f"{call[0]}: .*{message}"):
        kernels.call_scalars(*call)


def test_int_min_mod_minus_one_is_zero():
    assert kernels.call_scalars("etmlir_prim::sym_mod", -2**63, -1, 0) == [0]
