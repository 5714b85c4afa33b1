"""et-cpu-shapes-function: add `@forward_shapes`, every result's sizes, when a result is dynamic.

The runtime must size the delegate's outputs before it calls `@forward`
(destination-passing style). `@forward_shapes` is `@forward` with its
results replaced by their sizes; `resolve-ranked-shaped-type-result-dims`
reduces it to arithmetic on the input sizes, and the computation itself
folds away. A delegate whose results are all static gets nothing.

    func.func @forward(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {
      %0 = linalg.generic ... ins(%x ...) -> tensor<?x4xf32>
      return %0

gains

    func.func @forward_shapes(%x: tensor<?x4xf32>) -> tensor<2xi64> {
      %d = tensor.dim %x, %c0 ...
      %s = tensor.from_elements %n, %c4_i64 : tensor<2xi64>
      return %s

The clone drops its `cf.assert`s first: they check data (a batch norm's
generated body asserts its divisor is not zero, per element) or sizes that
`@forward` still checks, and an op holding one is not dead, so the
computation around it would stay. It fails, naming the ops left, when the
sizes depend on the computation (a data-dependent size).
"""

from __future__ import annotations

from torch_mlir import ir

from etmlir.backends.cpu.passes import attention
from etmlir.backends.cpu.ir_util import (ENTRY, SHAPES_ENTRY, argument_types, ops_named, result_types, run,
                                         tensor_dim)
from etmlir.passes.registry import PassFailure, emit_error, register_pass
from etmlir.passes.rewrite import rewrite_each
from etmlir.program import find_function

SHAPES_LEVEL = "builtin.module(resolve-ranked-shaped-type-result-dims,canonicalize,cse,symbol-dce)"


def _drop_asserts(func: ir.Operation) -> None:
    for op in ops_named(func, ("cf.assert",)):
        op.erase()


@register_pass("et-cpu-shapes-function")
def shapes_function(module: ir.Operation) -> None:
    """et-cpu-shapes-function: derive @forward_shapes (the results' sizes) when a result of @forward is dynamic."""
    forward = find_function(module, ENTRY)
    if forward is None:
        emit_error(module, f"et-cpu-shapes-function: the module has no func.func @{ENTRY}")
        raise PassFailure()
    results = result_types(forward)
    if all(t.has_static_shape for t in results):
        return
    with forward.location:
        shapes = forward.clone(ip=ir.InsertionPoint(module.regions[0].blocks[0]))
        shapes.attributes["sym_name"] = ir.StringAttr.get(SHAPES_ENTRY)
        i64 = ir.IntegerType.get_signless(64)
        out_type = ir.RankedTensorType.get([sum(t.rank for t in results)], i64)
        shapes.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(argument_types(forward), [out_type]))
        ret = list(shapes.regions[0].blocks[0].operations)[-1]
        sizes = []
        with ir.InsertionPoint(ret):
            for value, t in zip(ret.operands, results):
                for d in range(t.rank):
                    if t.is_dynamic_dim(d):
                        size = ir.Operation.create("arith.index_cast", results=[i64], operands=[tensor_dim(value, d)])
                    else:
                        size = ir.Operation.create("arith.constant", results=[i64],
                                                   attributes={"value": ir.IntegerAttr.get(i64, t.shape[d])})
                    sizes.append(size.result)
            packed = ir.Operation.create("tensor.from_elements", results=[out_type], operands=sizes)
            ir.Operation.create("func.return", operands=[packed.result])
        ret.erase()
        rewrite_each(shapes, attention.ATTENTION, attention.sizes_only)
        _drop_asserts(shapes)
    run(module, SHAPES_LEVEL)
    shapes = find_function(module, SHAPES_ENTRY)
    leftover = sorted({op.name for op in shapes.regions[0].blocks[0].operations if op.name.startswith("linalg.")})
    if leftover:
        emit_error(shapes, "et-cpu-shapes-function: the delegate's output sizes depend on its computation "
                           f"({', '.join(leftover)} left in @{SHAPES_ENTRY})")
        raise PassFailure()
