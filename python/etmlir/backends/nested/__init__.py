"""The `nested` backend: a delegate whose payload is a whole `.pte` compiled by our own pipeline.

It proves the delegation framework end to end without a code generator:
`preprocess` (`pipeline.py`) lowers the outlined subgraph exactly as
`to_executorch` lowers a model (et-fold-constants, et-to-out-variants,
et-plan-memory, serialize), and the payload is that program behind the
shared payload header (runtime/schema/payload.fbs: backend "nested", body
format "pte"). `support.py` says which ops it takes: those with a portable
kernel in this runtime. At run time the C++ backend registered
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

from collections.abc import Mapping

from torch_mlir import ir

from etmlir.backends.nested.support import NESTED_SUPPORT
from etmlir.delegation.backend import Backend, PreprocessResult, register_backend

BACKEND_ID = "nested"


class NestedBackend(Backend):
    id = BACKEND_ID
    support = NESTED_SUPPORT
    description = "a nested .pte run by the runtime's own executor (proves the delegate framework)"

    def preprocess(self, module: ir.Module, compile_specs: Mapping[str, str]) -> PreprocessResult:
        # The serializer and the pass pipeline are imported when a delegate is compiled.
        from etmlir.backends.nested import pipeline
        return pipeline.preprocess(module, compile_specs)


register_backend(NestedBackend())
