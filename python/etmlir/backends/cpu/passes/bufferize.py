"""et-cpu-bufferize: tensors -> memrefs, results as out-parameters (destination-passing style).

One-shot bufferization over function boundaries; `buffer-results-to-out-params`
turns every result into an argument the caller (the runtime) passes, so the
code writes straight into the delegate's output tensors; the entry points get
`llvm.emit_c_interface` (the runtime calls `_mlir_ciface_forward`).

    func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32>
becomes
    func.func @forward(%x: memref<4xf32>, %out: memref<4xf32>) attributes {llvm.emit_c_interface}

A value returned twice (CSE merges identical computations: Swin computes
the same attention mask for each block of a stage, and those masks leave
the delegate as separate results) is copied for each repeat first
(`linalg.copy` into a `tensor.empty`): each result needs a buffer of its
own, and MLIR's bufferization crashes (a segfault) on a repeated one.
"""

from __future__ import annotations

from torch_mlir import ir

from etmlir.backends.cpu.ir_util import ENTRY, SHAPES_ENTRY, run, tensor_dim
from etmlir.passes.registry import register_pass
from etmlir.program import find_function

BUFFERIZE = (
    "builtin.module(one-shot-bufferize{bufferize-function-boundaries=1 "
    "function-boundary-type-conversion=identity-layout-map},"
    "buffer-results-to-out-params{hoist-static-allocs=1 modify-public-functions=1},"
    "canonicalize,cse,buffer-deallocation-pipeline,func.func(refback-munge-memref-copy))"
)


def _copy_repeated_results(func: ir.Operation) -> None:
    """Give each repeat of a returned value a copy of its own."""
    ret = list(func.regions[0].blocks[0].operations)[-1]
    seen: list[ir.Value] = []
    for i, value in enumerate(list(ret.operands)):
        if not any(value == s for s in seen):
            seen.append(value)
            continue
        t = ir.RankedTensorType(value.type)
        with ir.InsertionPoint(ret), ret.location:
            sizes = [tensor_dim(value, d) for d in range(t.rank) if t.is_dynamic_dim(d)]
            empty = ir.Operation.create("tensor.empty", results=[t], operands=sizes)
            copy = ir.Operation.create("linalg.copy", results=[t], operands=[value, empty.result],
                                       attributes={"operandSegmentSizes": ir.DenseI32ArrayAttr.get([1, 1])},
                                       regions=1)
            _copy_body(copy, t.element_type)
        ret.operands[i] = copy.result


def _copy_body(copy: ir.Operation, element: ir.Type) -> None:
    block = copy.regions[0].blocks.append(element, element)
    with ir.InsertionPoint(block), copy.location:
        ir.Operation.create("linalg.yield", operands=[block.arguments[0]])


@register_pass("et-cpu-bufferize")
def bufferize(module: ir.Operation) -> None:
    """et-cpu-bufferize: bufferize into destination-passing style; entry points get a C interface."""
    for name in (ENTRY, SHAPES_ENTRY):
        func = find_function(module, name)
        if func is not None:
            func.attributes["llvm.emit_c_interface"] = ir.UnitAttr.get()
            _copy_repeated_results(func)
    run(module, BUFFERIZE)
