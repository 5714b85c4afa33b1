"""etmlir's passes, one module per pass, each file named after its flag.

Importing this package registers every pass in `registry`.
"""

from etmlir.passes import (  # noqa: F401  (registration)
    assign_debug_handles, decompose_to_core_aten, edge_canonicalize, edge_verify, emit, fold_constants,
    link_lowered_modules, outline_delegates, partition, plan_memory, preprocess_delegates, to_edge, to_out_variants,
    verify_core_aten, verify_memory_plan)
from etmlir.passes.pipeline import PipelineError, run_pipeline
from etmlir.passes.registry import PassFailure, all_passes, get_pass, register_pass

__all__ = ["PassFailure", "PipelineError", "all_passes", "get_pass", "register_pass", "run_pipeline"]
