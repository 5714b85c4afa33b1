"""et-vulkan-specialize-shapes: a dynamic delegate's linalg specialised to one size of its dynamic dims.

A dispatch graph has fixed buffer sizes and workgroup counts, so a delegate
with a dynamic dim (nanoGPT's sequence length) is compiled once per size the
compile spec `sizes` lists, and the payload holds one graph per size (the
runtime picks the one that matches its inputs). This pass makes one of them:
every dynamic dim of `@forward`'s arguments becomes `size`, a `tensor.cast`
back to the dynamic type keeps the body valid, and canonicalization carries
the static sizes through it (tensor.dim folds to constants, tensor.empty and
the linalg ops become static). A result still dynamic after that (its size
came through a value, such as a size the delegate reads from an input) is
cast to the type with every dynamic dim `size`, on the same rule: a delegate
whose dynamic dims are not all one symbol (T and T - 1) cannot be compiled
this way, and its results then disagree with the runtime's output sizes
(an error at run time, naming the output).

A 0-d integer argument is a size the host computed (`edge.sym_size_int`
outside the delegate, feeding a view's shape): it is pinned to `size` too, so
the shapes it decides fold, and the module records it (`etmlir.vulkan_pinned`,
argument numbers); the runtime checks the value at every call and refuses a
graph whose pinned size disagrees, instead of computing with wrong shapes.

    func.func @forward(%x: tensor<1x?x8xf32>) -> tensor<1x?x8xf32>      (size=64)
becomes
    func.func @forward(%x: tensor<1x64x8xf32>) -> tensor<1x64x8xf32>
"""

from __future__ import annotations

from torch_mlir import ir

from etmlir.backends.cpu.ir_util import ENTRY, run
from etmlir.passes.registry import Option, PassFailure, emit_error, register_pass
from etmlir.program import find_function


PINNED = "etmlir.vulkan_pinned"


def _static(t: ir.RankedTensorType, size: int) -> ir.RankedTensorType:
    shape = [size if t.is_dynamic_dim(d) else t.shape[d] for d in range(t.rank)]
    return ir.RankedTensorType.get(shape, t.element_type, t.encoding)


def _cast(value: ir.Value, to: ir.Type) -> ir.Value:
    return ir.Operation.create("tensor.cast", results=[to], operands=[value]).results[0]


def _constant_shape(value: ir.Value) -> list[int] | None:
    """The values of a 1-d shape tensor built from constants (tensor.from_elements, or a dense constant)."""
    owner = value.owner
    if isinstance(owner, ir.Block):
        return None
    if owner.name == "arith.constant":
        attr = owner.attributes["value"]
        return [int(v) for v in ir.DenseIntElementsAttr(attr)] if isinstance(attr, ir.DenseIntElementsAttr) else None
    if owner.name == "tensor.from_elements":
        values = []
        for element in owner.operands:
            producer = element.owner
            if isinstance(producer, ir.Block) or producer.name != "arith.constant":
                return None
            values.append(ir.IntegerAttr(producer.attributes["value"]).value)
        return values
    return None


def _refine_reshapes(entry: ir.Block) -> bool:
    """`tensor.reshape` with a constant shape but a dynamic result type -> the static type, cast back."""
    changed = False
    for op in list(entry.operations):
        op = op.operation
        if op.name != "tensor.reshape" or op.results[0].type.has_static_shape:
            continue
        shape = _constant_shape(op.operands[1])
        old = op.results[0].type
        if shape is None or any(v < 0 for v in shape) or len(shape) != old.rank:
            continue
        with op.location, ir.InsertionPoint(op):
            static = ir.RankedTensorType.get(shape, old.element_type, old.encoding)
            reshaped = ir.Operation.create("tensor.reshape", results=[static], operands=list(op.operands)).results[0]
            cast = _cast(reshaped, old)
        op.results[0].replace_all_uses_with(cast)
        op.erase()
        changed = True
    return changed


@register_pass("et-vulkan-specialize-shapes", options={
    "size": Option(int, 1, "the value every dynamic dim of @forward's arguments takes", minimum=1)})
def specialize_shapes(module: ir.Operation, *, size: int = 1) -> None:
    """et-vulkan-specialize-shapes: every dynamic dim of @forward's arguments becomes `size`; results static."""
    forward = find_function(module, ENTRY)
    if forward is None:
        emit_error(module, f"et-vulkan-specialize-shapes: the module has no func.func @{ENTRY}")
        raise PassFailure()
    entry = forward.regions[0].blocks[0]
    first = list(entry.operations)[0].operation
    pinned = []
    for number, argument in enumerate(entry.arguments):
        t = argument.type
        if isinstance(t, ir.RankedTensorType) and t.rank == 0 and isinstance(t.element_type, ir.IntegerType):
            with first.location, ir.InsertionPoint(first):
                value = ir.DenseElementsAttr.get_splat(t, ir.IntegerAttr.get(t.element_type, size))
                constant = ir.Operation.create("arith.constant", results=[t], attributes={"value": value}).results[0]
            argument.replace_all_uses_with(constant)
            pinned.append(number)
    module.attributes[PINNED] = ir.DenseI64ArrayAttr.get(pinned)
    for argument in entry.arguments:
        t = argument.type
        if not isinstance(t, ir.RankedTensorType) or t.has_static_shape:
            continue
        with first.location, ir.InsertionPoint(first):
            argument.set_type(_static(t, size))
            dynamic = _cast(argument, t)
        for use in list(argument.uses):
            if use.owner != dynamic.owner:
                use.owner.operands[use.operand_number] = dynamic
    old = ir.FunctionType(ir.TypeAttr(forward.attributes["function_type"]).value)
    forward.attributes["function_type"] = ir.TypeAttr.get(
        ir.FunctionType.get([a.type for a in entry.arguments], old.results))
    run(module, "builtin.module(canonicalize,cse,canonicalize)")
    for _ in range(8):  # each round can make the next reshape's shape constant
        if not _refine_reshapes(entry):
            break
        run(module, "builtin.module(canonicalize,cse)")
    ret = list(entry.operations)[-1].operation
    results = []
    for i, value in enumerate(ret.operands):
        t = value.type
        if isinstance(t, ir.RankedTensorType) and not t.has_static_shape:
            owner = value.owner
            source = owner.operands[0] if not isinstance(owner, ir.Block) and owner.name == "tensor.cast" else None
            if source is None or not source.type.has_static_shape:
                with ret.location, ir.InsertionPoint(ret):
                    source = _cast(value, _static(t, size))
            ret.operands[i] = source
        results.append(ret.operands[i].type)
    forward.attributes["function_type"] = ir.TypeAttr.get(
        ir.FunctionType.get([a.type for a in entry.arguments], results))
    run(module, "builtin.module(canonicalize,cse)")
