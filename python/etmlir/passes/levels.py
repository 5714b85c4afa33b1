"""Which IR level a module is at, so a pass given a module of another level says so instead of crashing.

etmlir's passes each take one level of the flow: the `torch` dialect (ATen and
Core ATen), the `edge` dialect, or the `etx` executable dialect. A pass
declares its level (`register_pass(..., level="edge")`) and the pipeline
checks the module before the pass runs:

    $ et-opt model.torch.mlir --et-to-out-variants
    model.torch.mlir:3:8: error: et-to-out-variants expects an edge-dialect module; found
        'torch.aten.add.Tensor' (a torch-dialect op): run --et-to-edge first

Only the top module's functions are looked at: delegates (nested modules)
hold their backend's IR at any stage. The check is a cheap walk that stops at
the first op of another level; the pass still checks what is specific to it.
"""

from __future__ import annotations

from torch_mlir import ir

LEVELS = ("torch", "edge", "etx")

_DESCRIPTION = {"torch": "a torch-dialect module", "edge": "an edge-dialect module",
                "etx": "an etx (executable) module"}

# (expected level, level found) -> what to do about it.
_ADVICE = {
    ("edge", "torch"): "run --et-to-edge first (after --et-decompose-to-core-aten)",
    ("etx", "torch"): "run --et-to-edge and --et-to-out-variants first",
    ("etx", "edge"): "run --et-to-out-variants first",
    ("torch", "edge"): "the module is already at the edge level (et-to-edge ran)",
    ("torch", "etx"): "the module is already at the etx level (et-to-out-variants ran)",
    ("edge", "etx"): "the module is already at the etx level (et-to-out-variants ran)",
}

# etx ops that also appear in edge modules (a delegate call outlined by et-outline-delegates).
_EDGE_LEVEL_ETX_OPS = ("etx.delegate_call", "etx.payload")


def _op_level(op: ir.Operation) -> str | None:
    """The level an op belongs to, or None for ops of any level (func, scf, arith, ...)."""
    name = op.name
    if name.startswith(("torch.", "torch_c.")):
        return "torch"
    if name.startswith("edge."):
        return "edge"
    if name.startswith("etx."):
        return None if name in _EDGE_LEVEL_ETX_OPS else "etx"
    if name == "func.func":
        if "etx.method" in op.attributes:
            return "etx"
        ftype = ir.FunctionType(ir.TypeAttr(op.attributes["function_type"]).value)
        if any(str(t).startswith("!torch.") for t in list(ftype.inputs) + list(ftype.results)):
            return "torch"
    return None


def _foreign_op(module: ir.Operation, level: str) -> tuple[ir.Operation, str] | None:
    """The first op in `module`'s own functions that belongs to a level other than `level`."""
    ops: list[tuple[ir.Operation, str]] = []
    functions: list[tuple[ir.Operation, str]] = []  # reported only when no op is: an op says more

    def visit(op: ir.Operation) -> ir.WalkResult:
        op = op.operation
        if op.name == "builtin.module" and op != module:
            return ir.WalkResult.SKIP  # a delegate: its backend's IR
        other = _op_level(op)
        if other is not None and other != level:
            if op.name != "func.func":
                ops.append((op, other))
                return ir.WalkResult.INTERRUPT
            functions.append((op, other))
        return ir.WalkResult.ADVANCE

    module.walk(visit, ir.WalkOrder.PRE_ORDER)
    return (ops or functions or [None])[0]


def _function_name(op: ir.Operation) -> str:
    return ir.StringAttr(op.attributes["sym_name"]).value if "sym_name" in op.attributes else "?"


def level_problem(module: ir.Operation, flag: str, level: str) -> tuple[ir.Operation, str] | None:
    """(op to report at, message) if `module` is not at `level` for the pass `flag`, else None."""
    foreign = _foreign_op(module, level)
    if foreign is not None:
        op, other = foreign
        what = (f"function @{_function_name(op)}" + (" (an etx method)" if other == "etx" else
                                                      " (with torch-dialect types)")
                if op.name == "func.func" else f"'{op.name}' (a{'n' if other in ('edge', 'etx') else ''} "
                                                f"{other}-dialect op)")
        return op, f"{flag} expects {_DESCRIPTION[level]}; found {what}: {_ADVICE[(level, other)]}"
    if level == "etx":
        bodies = [op.operation for op in module.regions[0].blocks[0].operations
                  if op.operation.name == "func.func" and len(op.operation.regions[0].blocks) > 0]
        if bodies and not any("etx.method" in f.attributes for f in bodies):
            return bodies[0], (f"{flag} expects {_DESCRIPTION[level]}; found function @{_function_name(bodies[0])}, "
                               f"which is not an etx method: {_ADVICE[('etx', 'edge')]}")
    return None
