"""et-cpu-approximate-math: transcendental functions as arithmetic, and reductions LLVM may reorder.

Two things keep LLVM from vectorizing the loops linalg ops become:
- `math.exp`, `math.tanh` and `math.erf` lower to scalar libm calls, and a
  loop with a call is not vectorized (softmax, SiLU, sigmoid, GELU). They
  become polynomials and exponent bits (`etmlir.backends.math_approximations`,
  within a few ulp of libm; the accuracy is tested there);
- a float sum is vectorized only where the additions may be reordered
  (layer norm's mean and variance, softmax's denominator). The float ops in
  the body of a linalg op with a reduction dim get `reassoc` (and every body
  `contract`, so a multiply-add becomes one FMA).

Other uses of the ops (a scalar computed once, outside any linalg body) are
expanded too: one code path, and their cost is nothing.

    linalg.generic {iterator_types = ["parallel", "reduction"]} ins(%x ...) outs(%acc ...) {
    ^bb0(%in: f32, %out: f32):
      %e = math.exp %in : f32
      %s = arith.addf %e, %out : f32
      linalg.yield %s : f32
    }
becomes
    linalg.generic {iterator_types = ["parallel", "reduction"]} ins(%x ...) outs(%acc ...) {
    ^bb0(%in: f32, %out: f32):
      ... arith.maximumf, math.floor, arith.fptosi, arith.shli, arith.bitcast, arith.mulf ...
      %s = arith.addf %e, %out fastmath<reassoc,contract> : f32
      linalg.yield %s : f32
    }
"""

from __future__ import annotations

from torch_mlir import ir

from etmlir.backends.math_approximations import EXPANSIONS
from etmlir.passes.registry import register_pass

FLOAT_OPS = ("arith.addf", "arith.subf", "arith.mulf", "arith.divf", "arith.negf")


def _has_reduction(op: ir.Operation) -> bool:
    return "iterator_types" in op.attributes and "reduction" in str(op.attributes["iterator_types"])


@register_pass("et-cpu-approximate-math")
def approximate_math(module: ir.Operation) -> None:
    """et-cpu-approximate-math: exp/tanh/erf as arithmetic; reductions reassociable, multiply-adds contractible."""
    expand: list[ir.Operation] = []

    def find(op: ir.Operation) -> ir.WalkResult:
        if op.name in EXPANSIONS and str(op.results[0].type) == "f32":
            expand.append(op)
        return ir.WalkResult.ADVANCE

    module.walk(find)
    with module.context:
        for op in expand:
            EXPANSIONS[op.name](op)
        flags = {kind: ir.Attribute.parse(f"#arith.fastmath<{kind}>") for kind in ("contract", "reassoc,contract")}

    def mark(op: ir.Operation) -> ir.WalkResult:
        if op.name.startswith("linalg.") and op.regions:
            flag = flags["reassoc,contract" if _has_reduction(op) else "contract"]

            def inner(body_op: ir.Operation) -> ir.WalkResult:
                if body_op.name in FLOAT_OPS:
                    body_op.attributes["fastmath"] = flag
                return ir.WalkResult.ADVANCE

            op.walk(inner)
        return ir.WalkResult.ADVANCE

    module.walk(mark)
