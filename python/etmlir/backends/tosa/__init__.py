"""The `tosa` backend: delegated subgraphs as standard TOSA 1.0 FlatBuffers, for Arm NPUs and other TOSA consumers.

    edge = edge.to_backend(etmlir.backends.partitioner("tosa", profile="pro_fp"))
    pte = edge.to_executorch()        # runs on the runtime's "tosa" backend (the TOSA reference model)

Partitioning (`support.py`) takes what TOSA 1.0's PRO-FP profile expresses
on static shapes: convolutions (plain and depthwise), matrix products,
pooling, resizing, normalizations and softmax (decomposed), elementwise
arithmetic, activations, comparisons, reductions, and the views, copies,
slices and concatenations between them. Preprocess (`pipeline.py`) runs a
named pass pipeline on each outlined subgraph: `et-tosa-convert-edge` (our
conversion of edge ops into the upstream `tosa` dialect), canonicalization,
`tosa-reduce-transposes`, then MLIR's `tosa-attach-target` and
`tosa-validate` for the profile and level; tosa-tools' `tosa-opt
--tosa-serialize` (the TOSA project's own serializer, from the tosa-tools
environment that scripts/setup.sh makes) writes the standard FlatBuffer
(`tosa.fbs`). The payload is the shared payload header around it; the
weights are the FlatBuffer's constant tensors (et-outline-delegates moves
weights read only by the delegate out of the program's constant segment).

At run time the `tosa` backend (runtime/backends/tosa/) hands the FlatBuffer
to the TOSA reference model, linked as a library, in place of an NPU driver.

Partitioner options:
    profile:   "pro_fp" (the default; fp32). "pro_int" needs quantized edge graphs, which
               etmlir does not produce yet: it is refused.
    level:     "8k" (the default) or "none"
    ops / skip_ops / min_group_size / compile_specs  as for every backend
               (compile_specs {"verbose": "true"} prints the pipeline and each step's time)
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from torch_mlir import ir

from etmlir.backends.tosa.support import TOSA_SUPPORT
from etmlir.delegation.backend import Backend, BackendError, PreprocessResult, register_backend
from etmlir.delegation.partitioner import Partitioner

BACKEND_ID = "tosa"
PROFILES = ("pro_fp",)
LEVELS = ("8k", "none")


class TosaBackend(Backend):
    id = BACKEND_ID
    support = TOSA_SUPPORT
    description = "standard TOSA 1.0 FlatBuffers (PRO-FP), run by the TOSA reference model"

    def partitioner(self, *, ops: Collection[str] | None = None, skip_ops: Collection[str] = (),
                    min_group_size: int = 1, compile_specs: Mapping[str, str] | None = None,
                    profile: str = "pro_fp", level: str = "8k") -> Partitioner:
        """The partitioner over TOSA_SUPPORT; `profile` and `level` become compile specs."""
        specs = dict(compile_specs or {})
        specs.setdefault("profile", profile)
        specs.setdefault("level", level)
        check_specs(specs)
        return super().partitioner(ops=ops, skip_ops=skip_ops, min_group_size=min_group_size, compile_specs=specs)

    def preprocess(self, module: ir.Module, compile_specs: Mapping[str, str]) -> PreprocessResult:
        from etmlir.backends.tosa import pipeline
        return pipeline.preprocess(module, compile_specs)


def check_specs(specs: Mapping[str, str]) -> None:
    """Refuse an unknown compile spec, profile or level (BackendError naming the known ones)."""
    unknown = sorted(set(specs) - {"profile", "level", "verbose"})
    if unknown:
        raise BackendError(f"tosa backend: unknown compile spec(s) {', '.join(unknown)} (known: level, profile, verbose)")
    profile = specs.get("profile", "pro_fp")
    if profile == "pro_int":
        raise BackendError("tosa backend: profile 'pro_int' needs quantized edge graphs (int8 with q/dq ops), "
                           "which etmlir does not produce yet; use profile='pro_fp'")
    if profile not in PROFILES:
        raise BackendError(f"tosa backend: unknown profile '{profile}' (known: {', '.join(PROFILES)})")
    if specs.get("level", "8k") not in LEVELS:
        raise BackendError(f"tosa backend: unknown level '{specs.get('level')}' (known: {', '.join(LEVELS)})")


register_backend(TosaBackend())
