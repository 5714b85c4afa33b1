"""IR helpers the `cpu` backend's passes and its pipeline share."""

from __future__ import annotations

from torch_mlir import ir
from torch_mlir.passmanager import PassManager

# The payload's entry points (C interface: `_mlir_ciface_<name>`).
ENTRY = "forward"
SHAPES_ENTRY = "forward_shapes"


def run(module: ir.Module | ir.Operation, pipeline: str) -> None:
    """Run an upstream MLIR pipeline on `module` in place."""
    operation = module.operation
    with operation.context:
        PassManager.parse(pipeline).run(operation)


def ops_named(module: ir.Module | ir.Operation, names: tuple[str, ...]) -> list[ir.Operation]:
    """Every op in `module` (nested ones too) whose name is in `names`, in walk order."""
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name in names:
            found.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return found


def count_ops(module: ir.Module | ir.Operation, names: tuple[str, ...]) -> int:
    return len(ops_named(module, names))


def tensor_dim(value: ir.Value, d: int) -> ir.Value:
    """`tensor.dim` of `value`'s dim `d` (an index), at the current insertion point and location."""
    index = ir.IndexType.get()
    position = ir.Operation.create("arith.constant", results=[index],
                                   attributes={"value": ir.IntegerAttr.get(index, d)})
    return ir.Operation.create("tensor.dim", results=[index], operands=[value, position.result]).result


def function_types(func: ir.Operation) -> ir.FunctionType:
    return ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)


def argument_types(func: ir.Operation) -> list[ir.RankedTensorType]:
    return [ir.RankedTensorType(t) for t in function_types(func).inputs]


def result_types(func: ir.Operation) -> list[ir.RankedTensorType]:
    return [ir.RankedTensorType(t) for t in function_types(func).results]


def identity_layout(t: ir.MemRefType) -> bool:
    """`t` has no layout but its dims in row-major order (no strides, no offset)."""
    return str(t.layout) == str(ir.AffineMapAttr.get(ir.AffineMap.get_identity(t.rank)))


def uncast(value: ir.Value) -> ir.Value:
    """The buffer `value` is, through any chain of memref.casts (the kernels' operands are casts)."""
    while not isinstance(value.owner, ir.Block) and value.owner.name == "memref.cast":
        value = value.owner.operands[0]
    return value


def block_ops(op: ir.Operation) -> list[ir.Operation]:
    """The ops of the block holding `op`, in order."""
    for region in op.parent.regions:
        for block in region.blocks:
            ops = [o.operation for o in block.operations]
            if op in ops:
                return ops
    return [op]


def constant_int(value: ir.Value) -> int | None:
    """The integer an arith.constant defines (a kernel call's stride, window or mode), else None."""
    if isinstance(value.owner, ir.Block) or value.owner.operation.name != "arith.constant":
        return None
    return ir.IntegerAttr(value.owner.operation.attributes["value"]).value


def reassociation(op: ir.Operation) -> list[list[int]]:
    """The dim groups of an expand_shape or collapse_shape (memref or tensor)."""
    return [[ir.IntegerAttr(d).value for d in group] for group in ir.ArrayAttr(op.attributes["reassociation"])]


def reassociation_attr(groups: list[list[int]]) -> ir.ArrayAttr:
    """The `reassociation` attribute of an expand_shape or collapse_shape with these dim groups."""
    i64 = ir.IntegerType.get_signless(64)
    return ir.ArrayAttr.get([ir.ArrayAttr.get([ir.IntegerAttr.get(i64, d) for d in group]) for group in groups])


def declare_function(module: ir.Module | ir.Operation, name: str, inputs: list[ir.Type]) -> None:
    """Declare `func.func private @name(inputs)` (no results) in `module`, unless a symbol of that name exists:
    the C functions the generated code calls (microkernels, the payload's region and failure hooks)."""
    operation = module.operation
    body = operation.regions[0].blocks[0]
    if any("sym_name" in op.operation.attributes and ir.StringAttr(op.operation.attributes["sym_name"]).value == name
           for op in body.operations):
        return
    with operation.context, ir.Location.unknown(), ir.InsertionPoint(body):
        ir.Operation.create("func.func", regions=1, attributes={
            "sym_name": ir.StringAttr.get(name),
            "function_type": ir.TypeAttr.get(ir.FunctionType.get(inputs, [])),
            "sym_visibility": ir.StringAttr.get("private"),
        })


def clone_body(module: ir.Operation) -> ir.Module:
    """A new module holding copies of `module`'s top-level ops (same context)."""
    with module.context:
        clone = ir.Module.create(loc=module.location)
        for op in module.regions[0].blocks[0].operations:
            op.operation.clone(ip=ir.InsertionPoint(clone.body))
    return clone


def replace_body(module: ir.Operation, new: ir.Module) -> None:
    """Make `module`'s top-level ops those of `new` (moved, not copied)."""
    body = module.regions[0].blocks[0]
    for op in list(body.operations):
        op.operation.erase()
    for op in list(new.body.operations):
        body.append(op.operation.detach_from_parent())
