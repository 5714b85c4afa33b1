"""etmlir's passes, one module per pass, each file named after its flag.

    from etmlir.passes import run_pipeline
    run_pipeline(module, "builtin.module(et-plan-memory,et-verify-memory-plan)")

The registry (`registry.py`) finds a pass by its flag without importing the
others: `et-plan-memory` is in `plan_memory.py`, a backend's `et-<id>-<name>`
in `etmlir/backends/<id>/passes/<name>.py`. Importing this package imports
neither torch nor any backend (`python -c "import etmlir.passes"` takes about
0.4 s, most of it the MLIR bindings).
"""

from etmlir.passes.pipeline import PipelineError, run_pipeline
from etmlir.passes.registry import PassFailure, all_passes, get_pass, register_pass

__all__ = ["PassFailure", "PipelineError", "all_passes", "get_pass", "register_pass", "run_pipeline"]
