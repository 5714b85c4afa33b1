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

from etmlir import compile_progress
from etmlir.dialects import attrs
from etmlir.delegation.backend import BackendError, get_backend
from etmlir.passes.assign_debug_handles import debug_handles
from etmlir.passes.registry import PassFailure, emit_error, register_pass



def delegate_modules(module: ir.Operation) -> list[ir.Operation]:
    """The nested delegate modules (`module @<backend>_<n> {etmlir.backend}`) of the top module."""
    return [op.operation for op in module.regions[0].blocks[0].operations
            if op.operation.name == "builtin.module" and attrs.BACKEND in op.operation.attributes]


def compile_specs(nested: ir.Operation) -> dict[str, str]:
    """The delegate's compile specs (BackendError when the attribute is not a dictionary of strings)."""
    if attrs.COMPILE_SPECS not in nested.attributes:
        return {}
    value = nested.attributes[attrs.COMPILE_SPECS]
    if not isinstance(value, ir.DictAttr) or not all(isinstance(e.attr, ir.StringAttr) for e in ir.DictAttr(value)):
        raise BackendError(f"{attrs.COMPILE_SPECS} must be a dictionary of strings, not {value}")
    return {e.name: ir.StringAttr(e.attr).value for e in ir.DictAttr(value)}


def set_compile_specs(nested: ir.Operation, specs: Mapping[str, str]) -> None:
    with nested.context:
        nested.attributes[attrs.COMPILE_SPECS] = ir.DictAttr.get({k: ir.StringAttr.get(str(v))
                                                                 for k, v in specs.items()})


def payload_size(nested: ir.Operation) -> int | None:
    """The bytes of a nested module's payload (None: not compiled yet, or not tensor data)."""
    if attrs.PAYLOAD not in nested.attributes:
        return None
    try:
        shaped = ir.ShapedType(nested.attributes[attrs.PAYLOAD].type)
    except (AttributeError, ValueError):
        return None
    count = 1
    for dim in shaped.shape:
        count *= dim
    return count * ((getattr(shaped.element_type, "width", 8) + 7) // 8)


def preprocess_module(nested: ir.Operation) -> None:
    """Run the backend's preprocess on one nested module and attach its payload (raises BackendError)."""
    backend_id = nested.attributes[attrs.BACKEND]
    if not isinstance(backend_id, ir.StringAttr):
        raise BackendError(f"{attrs.BACKEND} must be a string naming the backend, not {backend_id}")
    backend = get_backend(ir.StringAttr(backend_id).value)
    specs = compile_specs(nested)
    with nested.context:
        copy = ir.Module.create(loc=nested.location)
        for op in nested.regions[0].blocks[0].operations:
            op.operation.clone(ip=ir.InsertionPoint(copy.body))
    result = backend.preprocess(copy, specs)
    data = np.frombuffer(result.payload, dtype=np.uint8)
    with nested.context, nested.location:
        nested.attributes[attrs.PAYLOAD] = ir.DenseElementsAttr.get(
            data, type=ir.RankedTensorType.get([len(data)], ir.IntegerType.get_unsigned(8)))
        if attrs.COMPILE_SPECS not in nested.attributes:
            set_compile_specs(nested, specs)
        if result.summary is not None:
            nested.attributes[attrs.PAYLOAD_SUMMARY] = ir.StringAttr.get(result.summary)
        nested.attributes[attrs.DEBUG_HANDLE_MAP] = ir.DictAttr.get({
            str(key): ir.DenseI64ArrayAttr.get(list(handles)) for key, handles in result.debug_handle_map.items()})


@register_pass("et-preprocess-delegates", level="edge")
def preprocess_delegates(module: ir.Operation) -> None:
    """et-preprocess-delegates: compile every outlined delegate into its backend's payload."""
    failed = False
    pending = [nested for nested in delegate_modules(module) if attrs.PAYLOAD not in nested.attributes]
    # On a terminal, a bar counts the delegates, naming the one compiling: `cpu_3 (cpu, 48 ops)`.
    with compile_progress.stage("preprocess", total=len(pending)) as bar:
        for nested in pending:
            name = ir.StringAttr(nested.attributes["sym_name"]).value
            backend = nested.attributes[attrs.BACKEND]
            backend = ir.StringAttr(backend).value if isinstance(backend, ir.StringAttr) else str(backend)
            ops = len(debug_handles(nested))
            bar.status(f"{name} ({backend}, {ops} op{'s' if ops != 1 else ''})")
            try:
                preprocess_module(nested)
            except (KeyError, BackendError) as error:
                emit_error(nested, f"delegate @{name}: {error.args[0] if error.args else error}")
                failed = True
            bar.advance()
    if failed:
        raise PassFailure()
