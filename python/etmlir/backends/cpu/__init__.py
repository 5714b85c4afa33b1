"""The `cpu` backend: delegated subgraphs compiled by MLIR into native code for this CPU.

    edge = edge.to_backend(etmlir.backends.partitioner("cpu"))
    pte = edge.to_executorch()          # runs on the runtime's "cpu" backend

Partitioning (`support.py`) takes the float ops on a model's hot path:
convolutions, matrix products, normalizations, activations, pooling and the
copies between them. Preprocess (`compiler.py`) lowers each outlined
subgraph edge -> torch dialect -> linalg on tensors (torch-mlir), fuses
elementwise ops, bufferizes into destination-passing style, replaces
contractions by calls of the payload's C microkernels (`ukernels.py`,
`payload_c/`), lowers to LLVM and compiles for this machine; the object is
linked with the microkernels into a position-independent shared object and
wrapped in a header (`payload.py`, runtime/backends/cpu/PAYLOAD.md) that
says which CPU it needs. The runtime loads it from memory at `init`.

Weights read only by a delegate are compiled into its shared object (and
leave the program's constant segment: et-outline-delegates moves them), so
each weight is stored once.

Partitioner options:
    ops / skip_ops / min_group_size  as for every backend
    compile_specs: {"microkernels": "false"}: contractions through MLIR's generic loop
                   lowering instead of the microkernels (slow; for comparisons)
"""

from __future__ import annotations

import sys
from collections.abc import Collection, Mapping

from torch_mlir import ir

from etmlir.backends.backend import Backend, BackendError, PreprocessResult, register_backend
from etmlir.backends.partitioner import Partitioner

BACKEND_ID = "cpu"
_SPECS = ("microkernels", "verbose")


class CpuBackend(Backend):
    id = BACKEND_ID
    description = "native code for this CPU, compiled by MLIR (linalg -> LLVM) with C microkernels"

    def partitioner(self, *, ops: Collection[str] | None = None, skip_ops: Collection[str] = (),
                    min_group_size: int = 1, compile_specs: Mapping[str, str] | None = None) -> Partitioner:
        from etmlir.backends.cpu.support import CPU_SUPPORT
        support = CPU_SUPPORT.with_options(ops=ops)
        return Partitioner(BACKEND_ID, support, min_group_size=min_group_size, skip_ops=tuple(skip_ops),
                           compile_specs=dict(compile_specs or {}))

    def preprocess(self, module: ir.Module, compile_specs: Mapping[str, str]) -> PreprocessResult:
        from etmlir.backends.cpu.compiler import compile_delegate

        unknown = sorted(set(compile_specs) - set(_SPECS))
        if unknown:
            raise BackendError(f"cpu backend: unknown compile spec(s) {', '.join(unknown)} "
                               f"(known: {', '.join(_SPECS)})")
        verbose = compile_specs.get("verbose", "false").lower() == "true"
        try:
            compiled = compile_delegate(
                module, microkernels=compile_specs.get("microkernels", "true").lower() != "false",
                log=(lambda line: print(f"[cpu] {line}", file=sys.stderr)) if verbose else None)
        except ir.MLIRError as error:
            raise BackendError(f"cpu backend: the delegate does not compile: {error}") from None
        # The payload keeps every op's debug handle (its header lists them); failures inside
        # the compiled code are reported against the delegate call.
        return PreprocessResult(compiled.payload, {h: (h,) for h in compiled.info.debug_handles})


register_backend(CpuBackend())
