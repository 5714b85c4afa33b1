"""et-verify-core-aten: fail, naming each op and its source location, unless the module is exactly Core ATen.

    %0 = torch.aten.linear %x, %w, %b : ... loc("model.py":41:8)

fails with

    model.py:41:8: error: 'torch.aten.linear' (aten.linear.default) is not a Core ATen op

while a module holding only Core ATen ops (see `etmlir.frontend.core_aten`)
passes unchanged. `keep` names the extra ops a backend preserved, matching
the `keep` given to `et-decompose-to-core-aten`.
"""

from __future__ import annotations

from torch_mlir import ir

from etmlir.frontend.aten_ops import op_overload_name
from etmlir.frontend.core_aten import is_core_aten, normalize_keep
from etmlir.passes.registry import Option, PassFailure, aten_op_name, each, emit_error, register_pass


@register_pass("et-verify-core-aten", options={
    "keep": Option(list, [], "extra ATen ops allowed (those kept by et-decompose-to-core-aten)",
                   check=each(aten_op_name)),
})
def verify_core_aten(module: ir.Operation, *, keep: list[str]) -> None:
    """et-verify-core-aten: report every op outside Core ATen with its source location, and fail."""
    keep_set = normalize_keep(keep)
    offenders: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if not is_core_aten(op, keep_set):
            offenders.append(op)
        return ir.WalkResult.ADVANCE

    module.walk(visit)
    for op in offenders:
        overload = op_overload_name(op)
        what = f" ({overload})" if overload and overload != op.name.removeprefix("torch.") else ""
        emit_error(op, f"'{op.name}'{what} is not a Core ATen op")
    if offenders:
        raise PassFailure()
