"""et-vulkan-legalize-kernels: what MLIR's SPIR-V conversion cannot take, rewritten inside the kernels.

- `math.erf` (GELU) has no SPIR-V instruction: it becomes a Taylor polynomial
  near 0 and Abramowitz & Stegun's 7.1.26 elsewhere, on `math.exp` (absolute
  error below 2e-7; etmlir.backends.math_approximations).
- `math.fpowi` (`x ** 3` with an integer exponent, tanh-GELU) has no SPIR-V
  instruction (GLSL's Pow needs x >= 0): a constant exponent becomes repeated
  multiplication (and a division for a negative one).
- `arith.truncf` of an f64 constant (batch norm's epsilon arrives as a double)
  becomes the f32 constant: the kernels use no Float64 capability, which many
  phone GPUs lack. Any other f64 value is an error naming its op.
- Each kernel records which of its arguments it stores to (`etmlir.writes`): the
  dispatch graph places its barriers from them.
- `cf.assert`: the shape checks torch-mlir leaves are static and already
  folded; what remains checks values (batch norm's "variance + eps != 0").
  A shader cannot stop a dispatch, and eager PyTorch does not check either
  (it yields inf), so the assert is dropped.

    %y = math.erf %x : f32
becomes
    %t = 1 / (1 + 0.3275911 * |x|);  %y = sign(x) * (1 - t * (a1 + t * (a2 + ...)) * exp(-x * x))
    (|x| < 1: %y = x * (c0 + x^2 * (c1 + ...)), the Taylor series)
"""

from __future__ import annotations

from torch_mlir import ir

from etmlir.backends.math_approximations import expand_erf
from etmlir.backends.vulkan.passes.outline_kernels import kernels
from etmlir.passes.registry import PassFailure, emit_error, register_pass

WRITES = "etmlir.writes"


def _expand_fpowi(op: ir.Operation) -> bool:
    """x ** n for a constant integer n (|n| <= 64) as products (square and multiply); False if n is not constant."""
    base, exponent = op.operands[0], op.operands[1]
    owner = exponent.owner
    if isinstance(owner, ir.Block) or owner.name != "arith.constant":
        return False
    n = ir.IntegerAttr(owner.attributes["value"]).value
    if abs(n) > 64:
        return False
    t = base.type
    with op.location, ir.InsertionPoint(op):
        result = ir.Operation.create("arith.constant", results=[t], attributes={"value": ir.FloatAttr.get(t, 1.0)}
                                     ).results[0]
        power, k = base, abs(n)
        while k:
            if k & 1:
                result = ir.Operation.create("arith.mulf", results=[t], operands=[result, power]).results[0]
            k >>= 1
            if k:
                power = ir.Operation.create("arith.mulf", results=[t], operands=[power, power]).results[0]
        if n < 0:
            one = ir.Operation.create("arith.constant", results=[t], attributes={"value": ir.FloatAttr.get(t, 1.0)})
            result = ir.Operation.create("arith.divf", results=[t], operands=[one.results[0], result]).results[0]
    op.results[0].replace_all_uses_with(result)
    op.erase()
    return True


def _fold_f64_constant(op: ir.Operation) -> None:
    t = op.results[0].type
    value = ir.FloatAttr(op.operands[0].owner.attributes["value"]).value
    with op.location, ir.InsertionPoint(op):
        constant = ir.Operation.create("arith.constant", results=[t], attributes={"value": ir.FloatAttr.get(t, value)})
    op.results[0].replace_all_uses_with(constant.results[0])
    op.erase()


def written_arguments(kernel: ir.Operation) -> list[int]:
    """The kernel arguments it stores to (through views of them, too)."""
    arguments = list(kernel.regions[0].blocks[0].arguments)
    written: set[int] = set()

    def root(value: ir.Value) -> ir.Value:
        while not isinstance(value.owner, ir.Block) and value.owner.name.startswith("memref.") and value.owner.operands:
            value = value.owner.operands[0]
        return value

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "memref.store":
            target = root(op.operands[1])
            if target in arguments:
                written.add(arguments.index(target))
        return ir.WalkResult.ADVANCE

    kernel.walk(visit)
    return sorted(written)


def _is_f64_constant(value: ir.Value) -> bool:
    owner = value.owner
    return not isinstance(owner, ir.Block) and owner.name == "arith.constant" and str(value.type) == "f64"


@register_pass("et-vulkan-legalize-kernels")
def legalize_kernels(module: ir.Operation) -> None:
    """et-vulkan-legalize-kernels: erf expanded, f64 constants narrowed, value checks dropped in the kernels."""
    erfs: list[ir.Operation] = []
    powers: list[ir.Operation] = []
    truncs: list[ir.Operation] = []
    asserts: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "math.erf":
            erfs.append(op)
        elif op.name == "math.fpowi":
            powers.append(op)
        elif op.name == "arith.truncf" and _is_f64_constant(op.operands[0]):
            truncs.append(op)
        elif op.name == "cf.assert":
            asserts.append(op)
        return ir.WalkResult.ADVANCE

    for _, kernel in kernels(module):
        kernel.walk(visit)
        kernel.attributes[WRITES] = ir.DenseI32ArrayAttr.get(written_arguments(kernel))
    for op in erfs:
        expand_erf(op)
    for op in powers:
        if not _expand_fpowi(op):
            emit_error(op, "et-vulkan-legalize-kernels: math.fpowi with an exponent that is not a small constant "
                           "has no SPIR-V lowering")
            raise PassFailure()
    for op in truncs:
        constant = op.operands[0].owner
        _fold_f64_constant(op)
        if not list(constant.results[0].uses):
            constant.erase()
    for op in asserts:
        op.erase()
    wide: list[ir.Operation] = []

    def find_f64(op: ir.Operation) -> ir.WalkResult:
        if any(str(r.type) == "f64" for r in op.results) and not (op.name == "arith.constant" and not list(
                op.results[0].uses)):
            wide.append(op)
        return ir.WalkResult.ADVANCE

    for _, kernel in kernels(module):
        kernel.walk(find_f64)
    if wide:
        emit_error(wide[0], f"et-vulkan-legalize-kernels: '{wide[0].name}' computes in f64; the vulkan backend's "
                            "kernels are f32 (no Float64 capability)")
        raise PassFailure()
