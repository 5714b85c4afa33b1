"""etmlir's passes, one module per pass, each file named after its flag.

Importing this package registers every pass in `registry`.
"""

from etmlir.passes import decompose_to_core_aten, to_edge, verify_core_aten  # noqa: F401  (registration)
from etmlir.passes.pipeline import PipelineError, run_pipeline
from etmlir.passes.registry import PassFailure, all_passes, get_pass, register_pass

__all__ = ["PassFailure", "PipelineError", "all_passes", "get_pass", "register_pass", "run_pipeline"]
