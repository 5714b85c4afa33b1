"""The `cpu` backend: delegated subgraphs compiled by MLIR into native code for this CPU.

    edge = edge.to_backend(etmlir.backends.partitioner("cpu"))
    pte = edge.to_executorch()          # runs on the runtime's "cpu" backend

Partitioning (`support.py`) takes the float ops on a model's hot path:
convolutions, matrix products, normalizations, activations, pooling and the
copies between them. Preprocess (`pipeline.py`) runs a named pass pipeline
on each outlined subgraph: edge -> torch dialect -> linalg on tensors
(`et-edge-to-torch`, `et-torch-to-linalg`), then this backend's own passes
(`passes/`, one file per `et-cpu-*` flag): elementwise fusion, the output
shapes function, bufferization into destination-passing style, calls of the
C microkernels for contractions (runtime/backends/cpu/payload_c/), weights
as external symbols, and the LLVM dialect. MLIR's JIT compiles that for
this machine; the object is linked with the microkernels into a
position-independent shared object behind the shared payload header
(`payload.py`, runtime/backends/cpu/PAYLOAD.md) that says which CPU it
needs. The runtime loads it from memory at `init`.

Weights read only by a delegate are compiled into its shared object (and
leave the program's constant segment: et-outline-delegates moves them), so
each weight is stored once.

Attention runs as one fused kernel when `to_edge` keeps it whole, as the
partitioner asks:

    part = etmlir.backends.partitioner("cpu")
    edge = etmlir.to_edge(aten, EdgeCompileConfig(keep=part.ops_to_keep())).to_backend(part)

Partitioner options:
    ops / skip_ops / min_group_size  as for every backend
    compile_specs: {"microkernels": "false"}: contractions through MLIR's generic loop
                   lowering instead of the microkernels (slow; for comparisons)
                   {"trace_regions": "false"}: no per-region events for the tracer (the
                   delegate is one row of a trace; et-cpu-trace-regions)
                   {"winograd": "false"}: 3x3 convolutions never through Winograd (whose
                   transformed filters are 4x / 16/9 the size: a smaller payload, slower;
                   et-cpu-pack-weights)
"""

from __future__ import annotations

from collections.abc import Mapping

from torch_mlir import ir

from etmlir.backends.cpu.support import CPU_SUPPORT
from etmlir.delegation.backend import Backend, PreprocessResult, register_backend

BACKEND_ID = "cpu"


class CpuBackend(Backend):
    id = BACKEND_ID
    support = CPU_SUPPORT
    keep = ("aten.scaled_dot_product_attention",)
    description = "native code for this CPU, compiled by MLIR (linalg -> LLVM) with C microkernels"

    def preprocess(self, module: ir.Module, compile_specs: Mapping[str, str]) -> PreprocessResult:
        # The compiler (MLIR's JIT, the C toolchain) is imported when a delegate is compiled.
        from etmlir.backends.cpu import pipeline
        return pipeline.preprocess(module, compile_specs)


register_backend(CpuBackend())
