"""The `nested` backend: a delegate whose payload is a whole `.pte` compiled by our own pipeline.

It proves the delegation framework end to end without a code generator:
`preprocess` lowers the outlined subgraph exactly as `to_executorch` lowers a
model (et-fold-constants, et-to-out-variants, et-plan-memory, serialize) and
the payload is that program's bytes. At run time the C++ backend registered
as "nested" (`runtime/backends/nested/`) loads the payload with the runtime's
own Program/Method and the outer method's kernel registry at `init`, and
runs it at every delegate call: live-ins become the nested method's inputs,
its outputs are copied into the live-outs. Its weights live in the payload's
constant segment.

It is also what composition uses: a program lowered as a whole
(`etmlir.to_backend("nested", edge, ...)`) can be called from another model.

Partitioner options:
    ops:            only these edge ops (default: every op with a portable kernel)
    skip_ops:       edge ops to leave on the outer program's kernels
    min_group_size: smallest group worth a delegate call (default 1)
    compile_specs:  {"fold_constants": "false"} turns constant folding off in the payload;
                    {"temp_bytes": "8388608"} sizes the nested method's scratch memory (runtime)
Each op's debug handle is kept on the nested program's instructions, so the
debug-handle map is the identity.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Mapping

from torch_mlir import ir

from etmlir.backends.backend import Backend, BackendError, PreprocessResult, register_backend
from etmlir.backends.operator_support import OperatorSupport
from etmlir.backends.partitioner import Partitioner
from etmlir.dialects.edge import edge_op_of
from etmlir.executable.out_variants import out_variant
from etmlir.passes.assign_debug_handles import debug_handles

BACKEND_ID = "nested"


@functools.cache
def _runtime_kernels() -> frozenset[str] | None:
    """Kernels the runtime this process would run the program with has (None: not built)."""
    try:
        from etmlir.runtime.kernels import registered
    except ImportError:
        return None
    return frozenset(registered())


def has_portable_kernel(op: ir.Operation) -> str | None:
    """Refuse ops the runtime has no kernel for: the nested program runs on portable kernels."""
    info = edge_op_of(op)
    if info is None:
        return f"{op.name} has no portable kernel"
    variant = out_variant(info.aten)
    if variant is None:
        return f"{op.name} ({info.aten}) has no out-variant kernel"
    kernels = _runtime_kernels()
    if kernels is not None and variant.kernel not in kernels:
        return f"{op.name}: the runtime has no kernel {variant.kernel}"
    return None


class NestedBackend(Backend):
    id = BACKEND_ID
    description = "a nested .pte run by the runtime's own executor (proves the delegate framework)"

    def partitioner(self, *, ops: Collection[str] | None = None, skip_ops: Collection[str] = (),
                    min_group_size: int = 1, compile_specs: Mapping[str, str] | None = None) -> Partitioner:
        support = OperatorSupport(predicates=(has_portable_kernel,)).with_options(ops=ops)
        return Partitioner(BACKEND_ID, support, min_group_size=min_group_size, skip_ops=tuple(skip_ops),
                           compile_specs=dict(compile_specs or {}))

    def preprocess(self, module: ir.Module, compile_specs: Mapping[str, str]) -> PreprocessResult:
        from etmlir.executable.serialize import serialize
        from etmlir.passes.pipeline import PipelineElement, run_pipeline

        unknown = sorted(set(compile_specs) - {"fold_constants", "method", "temp_bytes"})
        if unknown:
            raise BackendError(f"nested backend: unknown compile spec(s) {', '.join(unknown)} "
                               "(known: fold_constants, method, temp_bytes)")
        passes = [PipelineElement("et-to-out-variants"), PipelineElement("et-plan-memory"),
                  PipelineElement("et-verify-memory-plan")]
        if compile_specs.get("fold_constants", "true").lower() != "false":
            passes.insert(0, PipelineElement("et-fold-constants"))
        handles = debug_handles(module.operation)
        try:
            run_pipeline(module, passes)
            with module.context:
                payload = serialize(module, segment_alignment=64)
        except ir.MLIRError as error:
            raise BackendError(f"nested backend: the delegate does not compile: {error}") from None
        return PreprocessResult(payload, {h: (h,) for h in sorted(set(handles))})


register_backend(NestedBackend())
