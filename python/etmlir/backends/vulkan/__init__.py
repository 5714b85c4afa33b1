"""The `vulkan` backend: delegated subgraphs compiled by MLIR into SPIR-V compute shaders.

    edge = edge.to_backend(etmlir.backends.partitioner("vulkan"))
    pte = edge.to_executorch()          # runs on the runtime's "vulkan" backend

Partitioning (`support.py`) takes the cpu backend's op families on static f32
shapes. Preprocess (`pipeline.py`) lowers each outlined subgraph with the
edge -> linalg steps the `cpu` backend uses, then this backend's passes
(`passes/`, one file per `et-vulkan-*` flag): bufferization, one GPU kernel per
linalg op, shared-memory tiling of the matrix products, one thread per
parallel iteration elsewhere, and MLIR's gpu -> SPIR-V conversion for a
Vulkan target env. The payload is the shared payload header around a
FlatBuffer dispatch graph (runtime/schema/vulkan.fbs): the SPIR-V shaders,
the buffers with the memory plan's slots, the weights, and the dispatches
with the barriers between them. The runtime's `vulkan` backend
(runtime/backends/vulkan/) loads the Vulkan loader at run time, creates the
pipelines and uploads the weights at `init`, and records one command buffer
per `execute`.

Partitioner options:
    ops / skip_ops / min_group_size  as for every backend
    compile_specs: sizes, tile, max_workgroup_invocations, spirv_version, validate, verbose
                   (pipeline.py says what each does); {"sizes": "64,256"} takes ops with dynamic
                   dims too, compiled once per size
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from torch_mlir import ir

from etmlir.backends.vulkan.support import VULKAN_SIZED_SUPPORT, VULKAN_SUPPORT
from etmlir.delegation.backend import Backend, PreprocessResult, register_backend
from etmlir.delegation.partitioner import Partitioner

BACKEND_ID = "vulkan"


class VulkanBackend(Backend):
    id = BACKEND_ID
    support = VULKAN_SUPPORT
    description = "SPIR-V compute shaders compiled by MLIR (linalg -> gpu -> spirv), run through the Vulkan API"

    def partitioner(self, *, ops: Collection[str] | None = None, skip_ops: Collection[str] = (),
                    min_group_size: int = 1, compile_specs: Mapping[str, str] | None = None) -> Partitioner:
        """As every backend's; the compile spec `sizes` lets ops with dynamic dims in."""
        specs = dict(compile_specs or {})
        from etmlir.backends.vulkan.pipeline import check_specs
        check_specs(specs)  # a bad spec fails here, before partitioning
        support = VULKAN_SIZED_SUPPORT if specs.get("sizes") else VULKAN_SUPPORT
        return Partitioner(self.id, support.with_options(ops=ops), min_group_size=min_group_size,
                           skip_ops=tuple(skip_ops), compile_specs=specs)

    def preprocess(self, module: ir.Module, compile_specs: Mapping[str, str]) -> PreprocessResult:
        # The compiler is imported when a delegate is compiled.
        from etmlir.backends.vulkan import pipeline
        return pipeline.preprocess(module, compile_specs)


register_backend(VulkanBackend())
