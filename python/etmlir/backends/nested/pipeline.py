"""One outlined delegate -> a `nested` payload: the executable-level pipeline, then the `.pte` behind a header.

    edge @forward --et-fold-constants (spec fold_constants)--> --et-to-out-variants-->
        --et-plan-memory--> --et-verify-memory-plan--> serialize: the .pte
    payload = shared payload header (backend "nested", body format "pte") + the .pte

Each op keeps its debug handle on the nested program's instructions, so the
debug-handle map is the identity.
"""

from __future__ import annotations

from collections.abc import Mapping

from torch_mlir import ir

from etmlir.backends.payload_header import PayloadHeader, TensorSpec, write_payload
from etmlir.delegation.backend import BackendError, PreprocessResult
from etmlir.executable.serialize import serialize
from etmlir.passes.assign_debug_handles import debug_handles
from etmlir.passes.pipeline import PipelineElement, run_pipeline
from etmlir.program import find_function

BACKEND_ID = "nested"


def preprocess(module: ir.Module, compile_specs: Mapping[str, str]) -> PreprocessResult:
    """The payload: the shared payload header (backend "nested", body_format "pte") around the .pte."""
    unknown = sorted(set(compile_specs) - {"fold_constants", "method", "temp_bytes"})
    if unknown:
        raise BackendError(f"nested backend: unknown compile spec(s) {', '.join(unknown)} "
                           "(known: fold_constants, method, temp_bytes)")
    passes = [PipelineElement("et-to-out-variants"), PipelineElement("et-plan-memory"),
              PipelineElement("et-verify-memory-plan")]
    if compile_specs.get("fold_constants", "true").lower() != "false":
        passes.insert(0, PipelineElement("et-fold-constants"))
    handles = debug_handles(module.operation)
    # The delegate's signature for the header (tensors only; the runtime refuses anything else).
    specs: tuple[tuple[TensorSpec, ...], tuple[TensorSpec, ...]] = ((), ())
    forward = find_function(module, "forward")
    if forward is not None:
        with module.context:
            function_type = ir.FunctionType(ir.TypeAttr(forward.attributes["function_type"]).value)
            try:
                specs = tuple(tuple(map(TensorSpec.of, types))
                              for types in (function_type.inputs, function_type.results))
            except ValueError:
                specs = ((), ())
    try:
        run_pipeline(module, passes)
        with module.context:
            program = serialize(module, segment_alignment=64)
    except ir.MLIRError as error:
        raise BackendError(f"nested backend: the delegate does not compile: {error}") from None
    handle_map = {h: (h,) for h in sorted(set(handles))}
    header = PayloadHeader(backend_id=BACKEND_ID, body_format="pte", body_version=1, inputs=specs[0],
                           outputs=specs[1], entry_points=(("forward", "forward"),),
                           debug_handle_map=PayloadHeader.handle_map(handle_map))
    return PreprocessResult(write_payload(header, program), handle_map)
