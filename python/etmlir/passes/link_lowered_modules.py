"""et-link-lowered-modules: turn traced calls of lowered modules into delegate calls (composition).

A model that calls a `LoweredBackendModule` (`etmlir.to_backend(...)`) exports
as a call of the custom op `etmlir_lowered::m<n>`. This pass finds that
lowered module (it lives in this process), copies its compiled delegate
(nested module + payload) into this module and calls it:

    %0 = "edge.custom_op"(%x) {op = "etmlir_lowered::m0", ...} : (tensor<1x8xf32>) -> tensor<1x4xf32>

becomes

    %0 = call @nested_0.forward(%x) {etmlir.backend = "nested"} : (tensor<1x8xf32>) -> tensor<1x4xf32>
    module @nested_0 attributes {etmlir.backend = "nested", etmlir.payload = dense<...>, ...} { ... }

`to_edge` runs it before `et-assign-debug-handles`, so the outer ops get
handles above the delegate's. Two calls of one lowered module share one
nested module, so the `.pte` stores its payload once. If a delegate's handles collide with handles
already in the module (a second lowered module), they are renumbered and the
delegate is compiled again, so every handle in the `.pte` names one op.
"""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np
from torch_mlir import ir

from etmlir.delegation.lowered import lowered_module
from etmlir.delegation.partitioner import DELEGATE_CALL, first_free_number, delegate_symbol
from etmlir.dialects import attrs
from etmlir.passes.outline_delegates import declare_delegate
from etmlir.passes.assign_debug_handles import debug_handles, next_debug_handle
from etmlir.passes.preprocess_delegates import delegate_modules, preprocess_module
from etmlir.passes.registry import PassFailure, emit_error, register_pass



def _link(module: ir.Operation, call: ir.Operation) -> None:
    qualified = ir.StringAttr(call.attributes["op"]).value
    lowered = lowered_module(qualified)
    if lowered is None:
        emit_error(call, f"{qualified} is a lowered module that does not exist in this process "
                         "(composition links LoweredBackendModule objects while they are alive)")
        raise PassFailure()
    with module.context:
        for nested in delegate_modules(module):  # called before: both calls run the one delegate
            if attrs.LOWERED_FROM in nested.attributes and ir.StringAttr(nested.attributes[attrs.LOWERED_FROM]).value == qualified:
                _replace_call(call, nested)
                return
        source = delegate_modules(lowered.program.module.operation)[0]
        text = source.get_asm(large_elements_limit=None, enable_debug_info=True)
        parsed = ir.Module.parse(text)
        copied = parsed.operation  # the parser takes a lone top-level module as the module itself
        name = f"{lowered.backend_id}_{first_free_number(module, lowered.backend_id)}"
        nested = copied.clone(ip=ir.InsertionPoint(module.regions[0].blocks[0]))
        nested.attributes["sym_name"] = ir.StringAttr.get(name)
        nested.attributes[attrs.LOWERED_FROM] = ir.StringAttr.get(qualified)
        # Handles in this module other than the copy's (the copy is already inside it).
        everywhere, own = Counter(debug_handles(module)), Counter(debug_handles(nested))
        if any(everywhere[h] > count for h, count in own.items()):
            # A clash: renumber above everything, and compile the delegate again with the new handles.
            base = next_debug_handle(module)
            i64 = ir.IntegerType.get_signless(64)
            renumbered = itertools.count(base)

            def visit(inner: ir.Operation) -> ir.WalkResult:
                if attrs.DEBUG_HANDLE in inner.attributes:
                    inner.attributes[attrs.DEBUG_HANDLE] = ir.IntegerAttr.get(i64, next(renumbered))
                return ir.WalkResult.ADVANCE

            nested.walk(visit)
            _inline_weights(nested, lowered.program.weight_buffers)
            del nested.attributes[attrs.PAYLOAD]
            del nested.attributes[attrs.DEBUG_HANDLE_MAP]
            preprocess_module(nested)
        declare_delegate(module, name, ir.StringAttr(nested.attributes[attrs.BACKEND]).value,
                         [v.type for v in call.operands], [r.type for r in call.results], call.location)
        _replace_call(call, nested)


def _inline_weights(nested: ir.Operation, weights: dict[str, np.ndarray]) -> None:
    """Give the copy's weights their data in the IR: the blobs behind its dense_resource
    attributes belong to the lowered module's program, not to this module."""
    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "edge.constant" and attrs.PARAM in op.attributes:
            param = ir.StringAttr(op.attributes[attrs.PARAM]).value
            if param in weights and str(op.attributes["value"]).startswith("dense_resource<"):
                t = ir.RankedTensorType(op.results[0].type)
                op.attributes["value"] = ir.DenseElementsAttr.get(np.ascontiguousarray(weights[param]), type=t)
        return ir.WalkResult.ADVANCE

    nested.walk(visit)


def _replace_call(call: ir.Operation, nested: ir.Operation) -> None:
    name = ir.StringAttr(nested.attributes["sym_name"]).value
    with call.location:
        delegate = ir.Operation.create(
            DELEGATE_CALL, results=[r.type for r in call.results], operands=list(call.operands),
            attributes={attrs.BACKEND: nested.attributes[attrs.BACKEND],
                        "callee": ir.FlatSymbolRefAttr.get(delegate_symbol(name))},
            ip=ir.InsertionPoint(call))
    for old, new in zip(call.results, delegate.results):
        old.replace_all_uses_with(new)
    call.erase()


@register_pass("et-link-lowered-modules", level="edge")
def link_lowered_modules(module: ir.Operation) -> None:
    """et-link-lowered-modules: calls of lowered modules (etmlir_lowered::m<n>) -> delegate calls."""
    calls: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "edge.custom_op" and ir.StringAttr(op.attributes["op"]).value.startswith("etmlir_lowered::"):
            calls.append(op)
        return ir.WalkResult.ADVANCE

    module.walk(visit)
    for call in calls:
        _link(module, call)
