"""et-edge-verify: check that a module is at the Edge level: only edge ops, on builtin tensors, legal dtypes.

    func.func @f(%x: tensor<4xi32>) -> tensor<4xi32> {
      %0 = "edge.softmax"(%x) {dim = 0 : i64, half_to_float = false} : (tensor<4xi32>) -> tensor<4xi32>
      %1 = torch.aten.relu ...
    }

reports, at each op's source location:

    error: 'edge.softmax' (aten::_softmax) does not accept dtypes (self=i32, result=i32): self must be one of ...
    error: 'torch.aten.relu' is not an edge op

Besides edge ops, a function body may hold `func.return`, `tensor.cast`
(a static-shape refinement et-to-edge emits for `torch.tensor_static_info_cast`)
and control flow (`scf.if`/`scf.while` on `etcf.predicate`, `arith.select`).
Dtype checks are the edge ops' own verifiers (generated dtype tables); this
pass runs them for every op and reports all failures, not just the first.
"""

from __future__ import annotations

from torch_mlir import ir

from etmlir.dialects.control_flow import CONTROL_FLOW_OPS, SELECT
from etmlir.dialects.edge import edge_op_problem
from etmlir.passes.registry import PassFailure, emit_error, register_pass

_STRUCTURE = ("builtin.module", "func.func", "func.return", "tensor.cast", "edge.constant", "edge.custom_op",
              # control flow (etmlir.dialects.control_flow); canonicalize turns an scf.if whose
              # branches both return earlier values into an arith.select of whole tensors
              *sorted(CONTROL_FLOW_OPS), SELECT)


def edge_problems(module: ir.Operation) -> list[tuple[ir.Operation, str]]:
    """(op, message) for every op that keeps `module` from being a valid edge module."""
    problems: list[tuple[ir.Operation, str]] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        op = op.operation
        name = op.name
        if name == "func.func":
            ftype = ir.FunctionType(ir.TypeAttr(op.attributes["function_type"]).value)
            for t in list(ftype.inputs) + list(ftype.results):
                if not isinstance(t, ir.RankedTensorType):
                    problems.append((op, f"function signature type {t} is not a ranked builtin tensor"))
                    break
        elif name in _STRUCTURE:
            pass
        else:
            problem = edge_op_problem(op)
            if problem:
                problems.append((op, problem))
        return ir.WalkResult.ADVANCE

    module.walk(visit)
    return problems


@register_pass("et-edge-verify")
def edge_verify(module: ir.Operation) -> None:
    """et-edge-verify: every op is an edge op with a dtype combination its kernels accept."""
    problems = edge_problems(module)
    for op, message in problems:
        emit_error(op, message)
    if problems:
        raise PassFailure()
