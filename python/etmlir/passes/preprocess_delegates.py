"""et-preprocess-delegates: compile each outlined delegate with its backend's `preprocess`.

    module @nested_0 attributes {etmlir.backend = "nested"} {
      func.func @forward(%arg0: tensor<4xf32>) -> tensor<4xf32> { ... }
    }

becomes

    module @nested_0 attributes {etmlir.backend = "nested", etmlir.compile_specs = {},
                                 etmlir.debug_handle_map = {"1" = array<i64: 1>, ...},
                                 etmlir.payload = dense<"0x4554..."> : tensor<5312xui8>} {
      func.func @forward(...) { ... }      // kept: the report and debugging read it
    }

The backend compiles a copy of the module (`Backend.preprocess(module,
compile_specs)`); its bytes and debug-handle map are stored on the nested
module, which `et-to-out-variants` turns into an `etx.payload` (and the
`.pte` into a deduplicated payload segment). Modules that already have a
payload are left alone, so lowering twice compiles each delegate once. A
backend that fails is an error at the module, naming the backend and why.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from torch_mlir import ir

from etmlir.backends.partitioner import BACKEND_ATTR
from etmlir.passes.registry import PassFailure, emit_error, register_pass

PAYLOAD_ATTR = "etmlir.payload"
COMPILE_SPECS_ATTR = "etmlir.compile_specs"
DEBUG_HANDLE_MAP_ATTR = "etmlir.debug_handle_map"


def delegate_modules(module: ir.Operation) -> list[ir.Operation]:
    """The nested delegate modules (`module @<backend>_<n> {etmlir.backend}`) of the top module."""
    return [op.operation for op in module.regions[0].blocks[0].operations
            if op.operation.name == "builtin.module" and BACKEND_ATTR in op.operation.attributes]


def compile_specs(nested: ir.Operation) -> dict[str, str]:
    if COMPILE_SPECS_ATTR not in nested.attributes:
        return {}
    return {e.name: ir.StringAttr(e.attr).value for e in ir.DictAttr(nested.attributes[COMPILE_SPECS_ATTR])}


def set_compile_specs(nested: ir.Operation, specs: Mapping[str, str]) -> None:
    with nested.context:
        nested.attributes[COMPILE_SPECS_ATTR] = ir.DictAttr.get({k: ir.StringAttr.get(str(v))
                                                                 for k, v in specs.items()})


def payload_size(nested: ir.Operation) -> int | None:
    """The bytes of a nested module's payload (None: not compiled yet, or not tensor data)."""
    if PAYLOAD_ATTR not in nested.attributes:
        return None
    try:
        shaped = ir.ShapedType(nested.attributes[PAYLOAD_ATTR].type)
    except (AttributeError, ValueError):
        return None
    count = 1
    for dim in shaped.shape:
        count *= dim
    return count * ((getattr(shaped.element_type, "width", 8) + 7) // 8)


def preprocess_module(nested: ir.Operation) -> None:
    """Run the backend's preprocess on one nested module and attach its payload (raises BackendError)."""
    from etmlir.backends import get_backend

    backend = get_backend(ir.StringAttr(nested.attributes[BACKEND_ATTR]).value)
    specs = compile_specs(nested)
    with nested.context:
        copy = ir.Module.create(loc=nested.location)
        for op in nested.regions[0].blocks[0].operations:
            op.operation.clone(ip=ir.InsertionPoint(copy.body))
    result = backend.preprocess(copy, specs)
    data = np.frombuffer(result.payload, dtype=np.uint8)
    with nested.context, nested.location:
        nested.attributes[PAYLOAD_ATTR] = ir.DenseElementsAttr.get(
            data, type=ir.RankedTensorType.get([len(data)], ir.IntegerType.get_unsigned(8)))
        if COMPILE_SPECS_ATTR not in nested.attributes:
            set_compile_specs(nested, specs)
        nested.attributes[DEBUG_HANDLE_MAP_ATTR] = ir.DictAttr.get({
            str(key): ir.DenseI64ArrayAttr.get(list(handles)) for key, handles in result.debug_handle_map.items()})


@register_pass("et-preprocess-delegates")
def preprocess_delegates(module: ir.Operation) -> None:
    """et-preprocess-delegates: compile every outlined delegate into its backend's payload."""
    from etmlir.backends import BackendError

    failed = False
    for nested in delegate_modules(module):
        if PAYLOAD_ATTR in nested.attributes:
            continue
        try:
            preprocess_module(nested)
        except (KeyError, BackendError) as error:
            name = ir.StringAttr(nested.attributes["sym_name"]).value
            emit_error(nested, f"delegate @{name}: {error.args[0] if error.args else error}")
            failed = True
    if failed:
        raise PassFailure()
