"""Transcendental functions as arithmetic: what a backend uses where its target has no instruction or library call.

Two backends need them, for different reasons:
- vulkan: SPIR-V has no `erf` (GELU), so `math.erf` must become arithmetic;
- cpu: LLVM lowers `math.exp`, `math.tanh` and `math.erf` to scalar libm calls,
  and a loop with a call in it is not vectorized. As arithmetic (a polynomial
  and an exponent built from bits) the same loops run 8 or 16 lanes at a time.

Each `expand_*` replaces one scalar f32 op, in place, by arith/math ops that
every backend lowers (`math.absf`, `math.floor` and `math.copysign` become
single vector instructions on x86). Accuracy, measured against float64 over
a dense sweep (test/python/test_math_approximations.py):
- exp: Cody-Waite range reduction and Cephes' degree-6 polynomial, within 2
  ulp; exactly 0 below -86.64 (where the true value is below 2.4e-38), +inf
  above 88.72, NaN kept;
- tanh: an odd Taylor polynomial below |x| = 0.25 (error < 3e-9), else
  (1 - e) / (1 + e) with e = exp(-2|x|); within 3e-7 relative everywhere;
- erf: a Taylor polynomial below |x| = 1, else Abramowitz & Stegun 7.1.26;
  absolute error below 2e-7.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from torch_mlir import ir

ERF_P = 0.3275911
ERF_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)

LOG2E = 1.44269504088896341
EXP_LN2_HI = 0.693359375        # ln 2 split in two (Cody-Waite): k * LN2_HI is exact for |k| <= 2^8
EXP_LN2_LO = -2.12194440e-4
EXP_POLY = (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1)
EXP_MIN = -86.64339757      # ln(2^-125): below it the result is 0 (the true value is below 2.4e-38)
EXP_MAX = 88.72283905       # ln(FLT_MAX)
ERF_SMALL = 1.0
# erf(x) = 2/sqrt(pi) sum_n (-1)^n x^(2n+1) / (n! (2n+1)), n < 10: below |x| = 1 the next term is under 2e-8,
# and the relative error stays small near 0, where A&S's 1 - (...) cancels.
ERF_TAYLOR = tuple(1.1283791670955126 * (-1) ** n / (math.factorial(n) * (2 * n + 1)) for n in range(10))
TANH_SMALL = 0.25
TANH_TAYLOR = (1.0, -1.0 / 3.0, 2.0 / 15.0, -17.0 / 315.0, 62.0 / 2835.0)  # x, x^3, x^5, x^7, x^9

# arith.cmpf predicates
_OLT, _OGT, _UNO = 4, 2, 14


class _Builder:
    """Scalar f32 arithmetic inserted before one op (its location, its insertion point)."""

    def __init__(self, t: ir.Type) -> None:
        self.t = t
        self.i1 = ir.IntegerType.get_signless(1)
        self.i32 = ir.IntegerType.get_signless(32)

    def const(self, value: float) -> ir.Value:
        return ir.Operation.create("arith.constant", results=[self.t],
                                   attributes={"value": ir.FloatAttr.get(self.t, value)}).results[0]

    def op(self, name: str, *values: ir.Value, t: ir.Type | None = None) -> ir.Value:
        return ir.Operation.create(name, results=[t or self.t], operands=list(values)).results[0]

    def cmp(self, predicate: int, a: ir.Value, b: ir.Value) -> ir.Value:
        return ir.Operation.create("arith.cmpf", results=[self.i1], operands=[a, b], attributes={
            "predicate": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), predicate)}).results[0]

    def select(self, condition: ir.Value, a: ir.Value, b: ir.Value) -> ir.Value:
        return ir.Operation.create("arith.select", results=[self.t], operands=[condition, a, b]).results[0]

    def horner(self, x: ir.Value, coefficients: tuple[float, ...]) -> ir.Value:
        """c0 * x^(n-1) + c1 * x^(n-2) + ... + c(n-1), by Horner's rule."""
        value = self.const(coefficients[0])
        for c in coefficients[1:]:
            value = self.op("arith.addf", self.op("arith.mulf", value, x), self.const(c))
        return value

    def exp(self, x: ir.Value) -> ir.Value:
        """e^x: x = k ln2 + r with |r| <= ln2 / 2, e^r by a polynomial, 2^k from the exponent bits."""
        xc = self.op("arith.minimumf", self.op("arith.maximumf", x, self.const(EXP_MIN)), self.const(EXP_MAX))
        k = self.op("math.floor", self.op("arith.addf", self.op("arith.mulf", xc, self.const(LOG2E)), self.const(0.5)))
        r = self.op("arith.subf", xc, self.op("arith.mulf", k, self.const(EXP_LN2_HI)))
        r = self.op("arith.subf", r, self.op("arith.mulf", k, self.const(EXP_LN2_LO)))
        r2 = self.op("arith.mulf", r, r)
        p = self.op("arith.addf", self.op("arith.addf", self.op("arith.mulf", self.horner(r, EXP_POLY), r2), r),
                    self.const(1.0))
        # 2^(k-1) times 2p: k - 1 + 127 stays in [1, 254] for k in [-125, 128], so EXP_MAX does not overflow.
        ki = self.op("arith.fptosi", k, t=self.i32)
        bits = ir.Operation.create("arith.constant", results=[self.i32],
                                   attributes={"value": ir.IntegerAttr.get(self.i32, 126)}).results[0]
        shift = ir.Operation.create("arith.constant", results=[self.i32],
                                    attributes={"value": ir.IntegerAttr.get(self.i32, 23)}).results[0]
        scale = self.op("arith.bitcast", self.op("arith.shli", self.op("arith.addi", ki, bits, t=self.i32), shift,
                                                 t=self.i32))
        y = self.op("arith.mulf", self.op("arith.addf", p, p), scale)
        y = self.select(self.cmp(_OLT, x, self.const(EXP_MIN)), self.const(0.0), y)
        y = self.select(self.cmp(_OGT, x, self.const(EXP_MAX)), self.const(float("inf")), y)
        return self.select(self.cmp(_UNO, x, x), x, y)

    def tanh(self, x: ir.Value) -> ir.Value:
        a = self.op("math.absf", x)
        e = self.exp(self.op("arith.mulf", a, self.const(-2.0)))
        large = self.op("arith.divf", self.op("arith.subf", self.const(1.0), e), self.op("arith.addf", self.const(1.0), e))
        large = self.op("math.copysign", large, x)
        x2 = self.op("arith.mulf", x, x)
        small = self.op("arith.mulf", self.horner(x2, tuple(reversed(TANH_TAYLOR))), x)
        return self.select(self.cmp(_OLT, a, self.const(TANH_SMALL)), small, large)

    def erf(self, x: ir.Value, exp: bool) -> ir.Value:
        magnitude = self.op("math.absf", x)
        s = self.op("arith.divf", self.const(1.0),
                    self.op("arith.addf", self.const(1.0), self.op("arith.mulf", self.const(ERF_P), magnitude)))
        poly = self.op("arith.mulf", s, self.horner(s, tuple(reversed(ERF_A))))
        square = self.op("arith.negf", self.op("arith.mulf", magnitude, magnitude))
        gauss = self.exp(square) if exp else self.op("math.exp", square)
        positive = self.op("arith.subf", self.const(1.0), self.op("arith.mulf", poly, gauss))
        # A select rather than math.copysign: SPIR-V targets take this form everywhere.
        large = self.select(self.cmp(_OLT, x, self.const(0.0)), self.op("arith.negf", positive), positive)
        small = self.op("arith.mulf", self.horner(self.op("arith.mulf", x, x), tuple(reversed(ERF_TAYLOR))), x)
        return self.select(self.cmp(_OLT, magnitude, self.const(ERF_SMALL)), small, large)


def _replace(op: ir.Operation, build: Callable[[_Builder, ir.Value], ir.Value]) -> None:
    with op.location, ir.InsertionPoint(op):
        result = build(_Builder(op.operands[0].type), op.operands[0])
    op.results[0].replace_all_uses_with(result)
    op.erase()


def expand_erf(op: ir.Operation, *, inline_exp: bool = False) -> None:
    """`math.erf` -> A&S 7.1.26 on `math.exp` (or, with inline_exp, on the arithmetic exp)."""
    _replace(op, lambda b, x: b.erf(x, inline_exp))


def expand_exp(op: ir.Operation) -> None:
    """`math.exp` -> range reduction, a polynomial and the exponent bits."""
    _replace(op, lambda b, x: b.exp(x))


def expand_tanh(op: ir.Operation) -> None:
    """`math.tanh` -> an odd polynomial near 0, else (1 - e^-2|x|) / (1 + e^-2|x|) with x's sign."""
    _replace(op, lambda b, x: b.tanh(x))


EXPANSIONS = {"math.exp": expand_exp, "math.tanh": expand_tanh,
              "math.erf": lambda op: expand_erf(op, inline_exp=True)}
